"""The preemptors' side of eviction, shared by the preempt and reclaim actions: the
jobs that may evict others in turn, their tasks that need room, and whether those
fit without evicting anyone (then the job waits for allocate instead)."""

from collections.abc import Iterator

from kbatch.operators.scheduler.core.framework.evictable import EvictableRoom
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.placement import Placer
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement


def jobs_by_queue(session: Session, jobs: list[JobInfo]) -> Iterator[JobInfo]:
    """Each job once: from the queue first in queue order, then by job order. The queue
    order is asked again before each job, so it follows the shares as they change; the
    keys are kept while no task changed (``Session.changes``: what the queue order
    functions read changes only with a task's status), as a backlog that can evict
    nothing changes none: every queue is asked once, not once per job."""
    waiting: dict[str, list[JobInfo]] = {}
    for job in sorted(jobs, key=session.job_order_key):
        waiting.setdefault(job.queue, []).append(job)
    keys: dict[str, tuple[object, ...]] = {}
    keys_of = -1  # the session.changes they were asked at
    # Kept while ``Session.changes`` stays (``Shortcuts.preemptor_queue_keys``; off: the
    # keys asked again before every job).
    keep_keys = session.shortcuts.preemptor_queue_keys

    def key(name: str) -> tuple[object, ...]:
        known = keys.get(name)
        if known is None:
            known = keys[name] = session.queue_order_key(session.queues[name])
        return known

    while waiting:
        if keys_of != session.changes or not keep_keys:
            keys.clear()
            keys_of = session.changes
        name = min(waiting, key=key)
        queue_jobs = waiting[name]
        job = queue_jobs.pop(0)
        if not queue_jobs:
            del waiting[name]
        yield job


def fits_without_eviction(
    session: Session, placer: Placer, job: JobInfo, pending: list[TaskInfo]
) -> bool:
    """Could the job's next tasks (``pending_tasks``) go where there is room (idle or
    being released), far enough to make it pipelined? A dry run: whatever it places is
    undone."""
    statement = Statement(session)
    statement.claim_kept_room(job)
    placed = 0
    for task in pending:
        choice = placer.choose(task)
        if choice is None:
            break
        statement.place(task, choice.node, choice.pipelined)
        placed += 1
        if session.job_pipelined(job):
            break
    possible = placed > 0 and session.job_pipelined(job)
    statement.discard()
    return possible


def outlook(
    session: Session, placer: Placer, job: JobInfo, room: EvictableRoom
) -> tuple[list[TaskInfo], bool]:
    """``pending_tasks`` and ``fits_without_eviction`` for ``job``, asked between its
    statements: kept while nothing is committed, as the same session state gives the
    same answers (the preempt action asks again in its second phase)."""
    state = room.state(())
    kept = room.outlooks.get(job.uid)
    if kept is not None and kept[0] == state:
        return kept[1], kept[2]
    pending = pending_tasks(session, job)
    fits = fits_without_eviction(session, placer, job, pending)
    room.outlooks[job.uid] = (state, pending, fits)
    return pending, fits


def pending_tasks(session: Session, job: JobInfo) -> list[TaskInfo]:
    """The job's pending tasks that need resources, in task order (which claiming the
    job's kept room does not change: it asks statuses, not nominations)."""
    return sorted(
        (t for t in job.tasks_with(TaskStatus.PENDING) if not t.template.best_effort),
        key=session.task_order_key,
    )
