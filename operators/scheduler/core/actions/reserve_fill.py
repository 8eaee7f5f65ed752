"""Lend the room reserve kept this session to waiting jobs gone before it is needed
(``framework.lending``, DESIGN §11).

A waiting job whose pods all have a walltime (``activeDeadlineSeconds``), admitted,
not ready, not over its queue's share and asking for no topology domain, is placed,
all or nothing as allocate places it, on the room there is and on the kept room of the
nodes lent past its longest walltime from now. Without walltimes, nothing changes.
"""

from collections.abc import Sequence

from kbatch.operators.scheduler.core.framework import lending
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.placement import Choice, Placer
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement


def fill(session: Session, kept: Sequence[Sequence[TaskInfo]], jobs: Sequence[JobInfo]) -> None:
    """Lend the room kept this session for the jobs of ``kept`` (each job's tasks the room
    is kept for, on their nominated nodes) to those of ``jobs`` (the jobs to place, in
    job order) gone before it is needed."""
    lent_until = lending.lending(session, kept)
    if not lent_until:
        return
    kept_tasks = [task for tasks in kept for task in tasks]
    heads = {task.job for task in kept_tasks}
    placer = Placer(session)
    for job in jobs:
        if job.uid in heads or job.topology is not None:
            continue  # (a job asking for one domain is placed by allocate's domains only)
        if (tasks := lending.walltime_tasks(job)) is None:
            continue  # (the cheap tests first: most jobs have no walltime)
        if session.job_ready(job) or session.overused(session.queues[job.queue]):
            continue
        lent = lending.lent_to(session, lent_until, tasks)
        if lent:
            _place_on_lent_room(session, placer, job, tasks, kept_tasks, lent)


def _place_on_lent_room(
    session: Session,
    placer: Placer,
    job: JobInfo,
    tasks: list[TaskInfo],
    kept_tasks: list[TaskInfo],
    lent: set[int],
) -> None:
    """Place ``job`` whole on the room there is, with the room kept on ``lent`` as free
    while it tries; the kept room is kept again after, whatever it took."""
    lifted = [(task, session.unkeep(task)) for task in kept_tasks if task.nominated in lent]
    statement = Statement(session)
    try:
        placed = _place(session, placer, job, tasks, statement)
        if placed and session.job_ready(job):
            statement.commit()
            session.note_attempts(scheduled=placed)
        else:
            statement.discard()
    finally:
        for task, node in lifted:
            session.keep(task, node)


def _place(
    session: Session, placer: Placer, job: JobInfo, tasks: list[TaskInfo], statement: Statement
) -> int:
    """Allocate ``tasks`` by task order, its surplus too, until one finds no room now
    (room being released is not lent: it is someone's already)."""
    queue = session.queues[job.queue]
    ordered = sorted(tasks, key=session.task_order_key)
    ahead: list[Choice] = []
    placed = 0
    for i, task in enumerate(ordered):
        if not session.allocatable(queue, task):
            break
        if not ahead:
            ahead = placer.choose_alike(ordered[i:])[::-1]
        choice = ahead.pop() if ahead else None
        if choice is None or choice.pipelined:
            break
        statement.allocate(task, choice.node)
        placed += 1
    return placed
