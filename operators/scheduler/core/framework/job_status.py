"""Session close: what a job's PodGroup status and its queue's status become.

Written back only where they changed (the status writer is told nothing else), and
a PodGroup's only if it may be ours: one with a pod of our scheduler names, or with no
pods yet (it still needs Pending/Inqueue, and which scheduler it is for cannot be
known). One whose pods are all another scheduler's (a second kbatch with another
--scheduler-name) is left to that scheduler. A Queue's status is written whatever
scheduler its groups are for.
"""

import numpy as np

from kbatch.api.podgroup import ConditionType, PodGroupPhase, PodGroupStatus
from kbatch.api.quantity import format_quantity
from kbatch.api.queue import QueueStatus
from kbatch.operators.podgroup import status as pod_group_status_rules
from kbatch.operators.scheduler.core.framework.info import JobInfo, QueueInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.resources import Dims
from kbatch.operators.scheduler.core.framework.session import Session


def pod_group_status(job: JobInfo, session: Session) -> PodGroupStatus:
    counts = {status: job.counts[status] for status in TaskStatus}
    old = PodGroupStatus(phase=job.phase, conditions=job.conditions)
    status = pod_group_status_rules.counted(old, job.min_member, counts)
    new = session.new_conditions.get(job.uid, [])
    return pod_group_status_rules.with_conditions(status, new, session.now, session.uid)


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
                job,
                pod_group_status_rules.condition(
                    ConditionType.UNSCHEDULABLE, True, invalid.reason, invalid.message
                ),
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
