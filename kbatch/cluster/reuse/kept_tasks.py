"""Each pod's TaskInfo, made as the pod arrives and kept from one snapshot to the next;
dropped when the pod's record is replaced, or when the template, priority or job the
snapshot works out for the pod differs from the one the task was made with.

Making a TaskInfo for every pod at every snapshot is a large part of a cold snapshot,
while most pods have not changed since the last snapshot. So a task is
made once per pod record, and kept on it (``KeptTasks``): when the record arrives
(``ClusterState.apply``, as kube-batch's cache keeps its tasks current per informer
event), or when a snapshot first meets it. Every
snapshot after that is given the same task for as long as it is exactly the task that
snapshot would make (``PodPass.tasks`` checks, pod by pod):

- the same record (records are replaced, never changed: its uid, name, times, role,
  condition and class are the task's);
- the same template, priority and job, which the snapshot works out for the pod (they
  change with the resource dimensions, the PriorityClasses and the PodGroups);
- the status, node and nominated node its record says. These three are all a session
  changes of a task (``Session.set_status``, ``keep``, ``unkeep`` and
  ``JobInfo.set_status``, the one place a status is set): a task a session left changed
  is made anew, so no session's change reaches the next snapshot.

Snapshots of one state therefore share the tasks no session changed: a snapshot and its
session are the state's until its next snapshot is built (the runner, the simulator and
the bench take one at a time; ``visibility`` makes a state of its own).
"""

from collections.abc import Mapping
from dataclasses import dataclass

from kbatch.cluster.records import NodeRecord, PodRecord, PriorityClassRecord
from kbatch.operators.scheduler.core.framework.info import (
    FINISHED_STATUSES,
    NO_NODE,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate
from kbatch.operators.scheduler.core.framework.resources import Dims

CRITICAL_CLASSES = frozenset({"system-cluster-critical", "system-node-critical"})


class KeptTasks:
    """Pods' kept tasks, each on the record it was made from (``PodRecord.kept_task``): a
    record replaced takes its task with it, and one left out of a snapshot keeps its
    task for when it is shown again. A record keeps the tasks of the first keeper that
    keeps one on it (``kept_by``); a second builder over the same records (a test's
    fresh one beside a state's) makes its tasks anew every time, and never takes, nor
    takes away, the first one's."""

    def keep(self, pod: PodRecord, task: TaskInfo) -> None:
        if pod.kept_by is None or pod.kept_by is self:
            object.__setattr__(pod, "kept_task", task)
            object.__setattr__(pod, "kept_by", self)

    def task_of(self, pod: PodRecord) -> TaskInfo | None:
        """The task kept for ``pod`` (this very record), if any (``PodPass.tasks``
        has this inline)."""
        return pod.kept_task if pod.kept_by is self else None


class Priorities:
    def __init__(self, classes: Mapping[str, PriorityClassRecord]) -> None:
        self.values = {record.name: record.value for record in classes.values()}
        defaults = [c.value for c in classes.values() if c.global_default]
        self.default = max(defaults) if defaults else 0

    def of_class(self, name: str | None) -> int:
        """The value of class ``name``; the globalDefault class's without one, or for a
        class that does not exist."""
        return self.values.get(name or "", self.default)


@dataclass(frozen=True, slots=True)
class TaskContext:
    """What a pod's task is made under besides its record: the dimensions of its
    template's request, the nodes' indices, the PriorityClasses and the scheduler names
    that are ours."""

    dims: Dims
    node_index: Mapping[str, int]
    priorities: Priorities
    scheduler_names: frozenset[str]


def node_index_of(nodes: list[NodeRecord]) -> dict[str, int]:
    """Each node's index in a snapshot's NodeSet (which has them by name)."""
    return {name: i for i, name in enumerate(sorted(node.name for node in nodes))}


def where(pod: PodRecord, status: TaskStatus, node_index: Mapping[str, int]) -> tuple[int, int]:
    """The node of ``pod``'s task and the node it is nominated to (room kept for it there,
    as it evicted others for it), as indices into ``node_index`` (NO_NODE: none, or a node
    the snapshot does not have). ``PodPass.tasks`` has this inline."""
    if status is TaskStatus.PENDING:
        return NO_NODE, node_index.get(pod.nominated_node or "", NO_NODE)
    if pod.node_name and status not in FINISHED_STATUSES:
        return node_index.get(pod.node_name, NO_NODE), NO_NODE
    return NO_NODE, NO_NODE


def made_task(
    pod: PodRecord,
    status: TaskStatus,
    template: PodTemplate,
    job: str,
    priority: int,
    node: int,
    nominated: int,
) -> TaskInfo:
    """``pod``'s task, by position in TaskInfo's field order (half the cost of keywords,
    and this runs for every pod that arrives); tests/unit/cluster/test_snapshot_tasks.py
    holds each field to the pod's."""
    return TaskInfo(
        pod.uid,
        pod.namespace,
        pod.name,
        job,
        template,
        status,
        node,
        priority,
        pod.created,
        pod.started,
        pod.spec.priority_class_name in CRITICAL_CLASSES,  # critical
        nominated,
        pod.role,
        pod.scheduled_condition,
        pod.walltime,
        pod.owner_job,
    )
