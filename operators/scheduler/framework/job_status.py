"""Session close: what a job's PodGroup status and its queue's status become.

Written back only where they changed (the status writer is told nothing else), and
a PodGroup's only if it may be ours: one with a pod of our scheduler names, or with no
pods yet (it still needs Pending/Inqueue, and which scheduler it is for cannot be
known). One whose pods are all another scheduler's (a second kbatch with another
--scheduler-name) is left to that scheduler. A Queue's status is written whatever
scheduler its groups are for.
"""

from collections.abc import Mapping
from datetime import UTC, datetime

import numpy as np

from kbatch.api.podgroup import (
    ConditionType,
    PodGroupCondition,
    PodGroupPhase,
    PodGroupStatus,
    next_phase,
)
from kbatch.api.quantity import format_quantity
from kbatch.api.queue import QueueStatus
from kbatch.operators.scheduler.framework.info import JobInfo, QueueInfo, TaskStatus
from kbatch.operators.scheduler.framework.resources import Dims
from kbatch.operators.scheduler.framework.session import Session, condition


def iso_time(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def merge_conditions(
    old: tuple[PodGroupCondition, ...],
    new: list[PodGroupCondition],
    now: str,
    transition_id: str,
) -> tuple[PodGroupCondition, ...]:
    """Apply ``new`` over ``old`` by type; a condition keeps its transition time
    while its status stays the same."""
    merged = {c.type: c for c in old}
    for cond in new:
        before = merged.get(cond.type)
        if before is not None and before.status == cond.status:
            cond = cond.model_copy(
                update={
                    "last_transition_time": before.last_transition_time,
                    "transition_id": before.transition_id,
                }
            )
        else:
            cond = cond.model_copy(
                update={"last_transition_time": now, "transition_id": transition_id}
            )
        merged[cond.type] = cond
    return tuple(sorted(merged.values(), key=lambda c: c.type.value))


def counted_status(
    current: PodGroupPhase, min_member: int, counts: Mapping[TaskStatus, int]
) -> tuple[PodGroupPhase, int, int, int]:
    """A PodGroup's phase, running, succeeded and failed counts from its pods' statuses
    (the scheduler's session close and the PodGroup controller both use this)."""
    scheduled = sum(
        counts.get(s, 0) for s in (TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING)
    )
    succeeded = counts.get(TaskStatus.SUCCEEDED, 0)
    failed = counts.get(TaskStatus.FAILED, 0)
    phase = next_phase(
        current,
        min_member=min_member,
        scheduled=scheduled,
        succeeded=succeeded,
        unfinished=sum(counts.values()) - succeeded - failed,
        admitted=current is PodGroupPhase.INQUEUE,
    )
    return phase, counts.get(TaskStatus.RUNNING, 0), succeeded, failed


def pod_group_status(job: JobInfo, session: Session) -> PodGroupStatus:
    counts = {status: job.counts[status] for status in TaskStatus}
    phase, running, succeeded, failed = counted_status(job.phase, job.min_member, counts)
    conditions = merge_conditions(
        job.conditions, session.new_conditions.get(job.uid, []), iso_time(session.now), session.uid
    )
    return PodGroupStatus(
        phase=phase, conditions=conditions, running=running, succeeded=succeeded, failed=failed
    )


def queue_status(queue: QueueInfo, dims: Dims, jobs: list[JobInfo]) -> QueueStatus:
    def render(vector: np.ndarray | None) -> dict[str, str]:
        if vector is None:
            return {}
        return {name: format_quantity(name, value) for name, value in dims.mapping(vector).items()}

    phases = [job.phase for job in jobs if job.has_pod_group]
    return QueueStatus(
        deserved=render(queue.deserved),
        allocated=render(queue.allocated),
        request=render(queue.request),
        pending=phases.count(PodGroupPhase.PENDING),
        inqueue=phases.count(PodGroupPhase.INQUEUE),
        running=phases.count(PodGroupPhase.RUNNING),
    )


def write_back(session: Session) -> None:
    """Send every PodGroup and Queue status that changed to the cluster."""
    by_queue: dict[str, list[JobInfo]] = {name: [] for name in session.queues}
    for job in session.jobs.values():
        if not job.has_pod_group:
            continue
        invalid = session.invalid.get(job.uid)
        if invalid is not None and job.uid not in session.new_conditions:
            session.set_condition(
                job, condition(ConditionType.UNSCHEDULABLE, True, invalid.reason, invalid.message)
            )
        status = pod_group_status(job, session)
        if status != job.old_status and job.uid not in session.foreign_groups:
            session.cluster.status.update_pod_group(job.namespace, job.name, status)
        job.phase = status.phase
        by_queue.setdefault(job.queue, []).append(job)
    for name, queue in session.queues.items():
        published = queue_status(queue, session.dims, by_queue.get(name, []))
        if published != queue.old_status:
            session.cluster.status.update_queue(name, published)
