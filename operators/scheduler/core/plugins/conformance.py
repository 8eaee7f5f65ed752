"""The conformance plugin: never evict what keeps the cluster itself alive.

Critical pods (priority classes ``system-cluster-critical`` and
``system-node-critical``) and every pod in ``kube-system`` are no one's victims.
"""

from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.victims import no_preemptor

NAME = "conformance"

CRITICAL_PRIORITY_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})
SYSTEM_NAMESPACE = "kube-system"


def evictable(task: TaskInfo) -> bool:
    return not (
        task.critical
        or task.namespace == SYSTEM_NAMESPACE
        or task.template.priority_class_name in CRITICAL_PRIORITY_CLASSES
    )


def victims(preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
    del preemptor
    return [task for task in candidates if evictable(task)]


def keeps(preemptor: TaskInfo, task: TaskInfo) -> bool:
    del preemptor
    return evictable(task)


def on_session_open(session: Session, option: PluginOption) -> None:
    del option
    session.add_preemptable_fn(victims, preemptor_key=no_preemptor, keeps=keeps)
    session.add_reclaimable_fn(victims, preemptor_key=no_preemptor, keeps=keeps)
