"""Pending pods' PodScheduled condition, for autoscalers (DESIGN §13).

cluster-autoscaler and Karpenter add nodes for a pending pod only when its
``PodScheduled`` condition is ``False`` with reason ``Unschedulable`` — what
kube-scheduler writes when no node takes the pod. kbatch writes the same for a pod it
tried to place and could not (message: kube-scheduler's ``0/4 nodes are available: 4
Insufficient cpu.``), and for one whose gang waits for room (not admitted because the
cluster lacks room for its minimum, or waiting for a node to drain): more nodes would
help those. A pod whose *queue* holds it — over its share, at its capability, Closed —
gets reason ``kbatch.io/QueueLimited`` instead, which autoscalers leave alone: a new
node would sit idle while the queue may not use it (YuniKorn's lesson). The API server
sets ``PodScheduled=True`` itself when a pod is bound.

Written only when it changed (the snapshot carries each pod's condition), at most
``PER_SESSION`` pods a session (the rest the next session), through the backend.
"""

from kbatch.api.podgroup import ConditionType
from kbatch.operators.scheduler.core.framework.fit_errors import nodes_unavailable
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.outcome import (
    QUEUE_LIMITED,
    UNSCHEDULABLE,
    PodCondition,
)
from kbatch.operators.scheduler.core.framework.session import Session

PER_SESSION = 500
QUEUE_LIMITED_NOTE = "its queue holds it, not the cluster's size: more nodes would not help"


def add(session: Session) -> None:
    """Each pending pod whose PodScheduled should read otherwise: into the outcome."""
    budget = PER_SESSION
    pending = TaskStatus.PENDING  # read once: an Enum member off its class is slow (3.11)
    for job in session.active_jobs():  # (no task of a resting job is pending)
        if job.uid in session.foreign_groups or not job.counts[pending]:
            continue
        for task in job.tasks_with(pending):
            found = wanted(session, job, task)
            if found is None or found == task.scheduled_condition:
                continue
            session.outcome.pod_conditions.append(PodCondition(task, *found))
            budget -= 1
            if budget == 0:
                return


def wanted(session: Session, job: JobInfo, task: TaskInfo) -> tuple[str, str, str] | None:
    """(status, reason, message) for ``task``'s PodScheduled, or None: this session has
    nothing to say of it (not tried, or the job is not schedulable at all)."""
    own = session.fit_errors_of(job).get(task.uid)
    if own:
        return "False", UNSCHEDULABLE, f"{nodes_unavailable(len(session.nodes), own)}."
    draining = session.draining_reason(job)
    if draining is not None:
        return "False", UNSCHEDULABLE, draining
    waiting = session.waiting_reason(job)
    if waiting is not None and session.held_by_queue(job):
        return "False", QUEUE_LIMITED, f"{waiting} ({QUEUE_LIMITED_NOTE})"
    for condition in session.conditions_of(job):
        if condition.type is ConditionType.UNSCHEDULABLE and condition.status == "True":
            return "False", UNSCHEDULABLE, condition.message
    if waiting is not None:
        return "False", UNSCHEDULABLE, waiting
    return None
