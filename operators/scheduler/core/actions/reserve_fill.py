"""Lend the room reserve kept this session to waiting jobs gone before it is needed
(``framework.lending``, DESIGN §11).

A waiting job whose pods all have a walltime (``activeDeadlineSeconds``), admitted,
not ready, not over its queue's share and asking for no topology domain, is placed,
all or nothing as allocate places it (its surplus too), on the room there is and on
the kept room of the nodes lent past its longest walltime from now. Without
walltimes, nothing changes.
"""

from collections.abc import Sequence

from kbatch.operators.scheduler.core.actions import allocate
from kbatch.operators.scheduler.core.framework import lending
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.placement import Placer
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement


def fill(session: Session, kept: Sequence[Sequence[TaskInfo]], jobs: Sequence[JobInfo]) -> None:
    """Lend the room kept this session for the jobs of ``kept`` (each job's tasks the room
    is kept for, on their nominated nodes) to those of ``jobs`` (the jobs to place, in
    job order) gone before it is needed."""
    kept_tasks = [task for tasks in kept for task in tasks]
    heads = {task.job for task in kept_tasks}
    placer = Placer(session)
    lent_until: dict[int, float] | None = None  # worked out for the first job it may serve
    for job in jobs:
        if job.uid in heads or job.topology is not None:
            continue  # (a job asking for one domain is placed by allocate's domains only)
        if (timed := lending.walltime_tasks(session, job)) is None:
            continue  # (the cheap tests first: most jobs have no walltime)
        if session.job_ready(job) or session.overused(session.queues[job.queue]):
            continue
        if lent_until is None:
            lent_until = lending.lending(session, kept)
        if not lent_until:
            return  # nothing may be lent
        lent = lending.lent_to(session, lent_until, timed)
        if lent:
            tasks = [task for task, _ in timed]
            _place_on_lent_room(session, placer, job, tasks, kept_tasks, lent)


def _place_on_lent_room(
    session: Session,
    placer: Placer,
    job: JobInfo,
    tasks: list[TaskInfo],
    kept_tasks: list[TaskInfo],
    lent: set[int],
) -> None:
    """Place ``job`` whole (its surplus pods too, while they fit) on the room there is
    now, with the room kept on ``lent`` as free while it tries; the kept room is kept
    again after, whatever it took."""
    lifted = [(task, session.unkeep(task)) for task in kept_tasks if task.nominated in lent]
    statement = Statement(session)
    try:
        placed = allocate.place_requested(session, placer, job, statement, tasks, trial=True)
        if placed and session.job_ready(job):
            statement.commit()
            session.note_attempts(scheduled=placed)
        else:
            statement.discard()
    finally:
        for task, node in lifted:
            session.keep(task, node)
