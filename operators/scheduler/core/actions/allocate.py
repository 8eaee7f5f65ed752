"""The allocate action: place pending tasks, a gang at a time, all or nothing.

Queues by queue order (skipping overused ones; a plugin may weigh the job the queue
would place next, see ``add_queue_order_fn``), jobs of a queue by job order —
except that a job already ready (what it still asks for is surplus) waits until every
job of the queue still short of its minimum has had its turn — tasks by task order.
Each task goes to the best node that passes the predicates and has room (or room
being released, which pipelines it). When the job becomes ready the statement is
committed (binds are sent) and the job goes back in line for its remaining tasks; if
it cannot become ready its changes are discarded, so the next job can use the room
(kube-batch's allocate does the same, so that a gang that cannot start holds no room).

Tasks with no resource request are left to backfill — unless the job's
requested tasks alone do not make it ready: then its best-effort tasks are
placed here too (first node by name that passes the predicates, as backfill
would), in the same statement, so that a gang mixing both kinds (an MPI launcher
without requests beside its workers) can become ready at all.

A gang already partly placed (binds a dead leader did not finish, or that failed)
holds room and does nothing with it: such gangs are completed first, before any
queue's turn, whatever the queue and job order say.

A job that is only pipelined keeps its reservation for this session without
binding anything: its allocated tasks are turned into pipelined ones, so that
no later action counts them as placed and commits a part of the gang alone.
"""

import heapq
import itertools

import numpy as np

from kbatch.api.podgroup import ConditionType
from kbatch.operators.scheduler.core.actions import backfill
from kbatch.operators.scheduler.core.framework import topology
from kbatch.operators.scheduler.core.framework.info import (
    JobInfo,
    QueueInfo,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.placement import Choice, Placer
from kbatch.operators.scheduler.core.framework.podgroup_status import condition
from kbatch.operators.scheduler.core.framework.queue_checks import (
    CAPABILITY,
    DESERVED,
    HeldBack,
)
from kbatch.operators.scheduler.core.framework.queue_tree import ROOT
from kbatch.operators.scheduler.core.framework.resources import EPSILON, shareable
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement

NAME = "allocate"


def execute(session: Session) -> None:
    placer = Placer(session)
    jobs_to_place = session.jobs_to_place()
    _complete_partly_placed(session, placer, jobs_to_place)
    tie = itertools.count()
    per_queue: dict[str, list[tuple[tuple[object, ...], int, JobInfo]]] = {}
    for job in jobs_to_place:
        heap = per_queue.setdefault(job.queue, [])
        heap.append((_turn_key(session, job), next(tie), job))
    queues = []
    for name, heap in per_queue.items():
        heapq.heapify(heap)
        queue = session.queues[name]
        queues.append((session.queue_order_key(queue, heap[0][2]), next(tie), name))
    heapq.heapify(queues)

    # Queues over their share, skipped, to borrow once every other queue has had its
    # turn (only where a plugin lets queues borrow: ``Session.borrows``).
    over: list[str] = []
    borrows = session.borrows
    while queues:
        _, _, name = heapq.heappop(queues)
        queue = session.queues[name]
        jobs = per_queue[name]
        if session.overused(queue):
            if borrows:
                over.append(name)
            else:
                _note_over_share(session, queue, jobs)
            continue
        if not jobs:
            continue
        _, _, job = heapq.heappop(jobs)
        if _allocate_job(session, placer, job):
            heapq.heappush(jobs, (_turn_key(session, job), next(tie), job))
        if jobs:  # keyed by its next job: it stays at the head until the queue's turn
            heapq.heappush(queues, (session.queue_order_key(queue, jobs[0][2]), next(tie), name))
    if over:
        _borrow(session, placer, per_queue, over)


def _note_over_share(
    session: Session, queue: QueueInfo, jobs: list[tuple[tuple[object, ...], int, JobInfo]]
) -> None:
    why = f"queue {queue.name} is using its deserved share"
    if queue.parent is not None:  # in a tree: the queue on its path that is
        why = str(held_back(session, queue) or why)
    for _, _, job in jobs:
        session.note_waiting(job, why, first=True, by_queue=True)


def _borrow(
    session: Session,
    placer: Placer,
    per_queue: dict[str, list[tuple[tuple[object, ...], int, JobInfo]]],
    over: list[str],
) -> None:
    """The second turn (DESIGN §14): queues over their share, in queue order, place
    jobs on the room no queue within its share could use, as far as the plugins lend it
    (``Session.lender``). A job placed so is marked borrowing (its PodGroup's
    ``kbatch.io/Borrowing`` condition names the lender): reclaim takes it first."""
    tie = itertools.count()
    queues = [
        (session.queue_order_key(session.queues[n], per_queue[n][0][2]), next(tie), n)
        for n in over
        if per_queue[n]
    ]
    heapq.heapify(queues)
    tried: dict[str, list[tuple[tuple[object, ...], int, JobInfo]]] = {n: [] for n in over}
    while queues:
        _, _, name = heapq.heappop(queues)
        queue, jobs = session.queues[name], per_queue[name]
        entry = heapq.heappop(jobs)
        job = entry[2]
        if _allocate_job(session, placer, job, borrowing=True):
            heapq.heappush(jobs, (_turn_key(session, job), next(tie), job))
        elif job.ready_count == 0:  # nothing borrowed: it waits for its share
            tried[name].append(entry)
        if jobs:
            heapq.heappush(queues, (session.queue_order_key(queue, jobs[0][2]), next(tie), name))
    for name in over:
        _note_over_share(session, session.queues[name], [*tried[name], *per_queue[name]])


def _turn_key(session: Session, job: JobInfo) -> tuple[object, ...]:
    """A job's place in its queue's line: a job that is ready already (its pending tasks
    are surplus: an elastic gang's, or a plain job's beyond minMember) comes after every
    job still short of its minimum, whatever the job order says (DESIGN §12)."""
    return (session.job_ready(job), *session.job_order_key(job))


def _complete_partly_placed(session: Session, placer: Placer, jobs: list[JobInfo]) -> None:
    """One turn, first, for each gang with tasks placed but not ready, by job order."""
    partly = [job for job in jobs if job.ready_count > 0 and not session.job_ready(job)]
    for job in sorted(partly, key=session.job_order_key):
        _allocate_job(session, placer, job)


def _allocate_job(session: Session, placer: Placer, job: JobInfo, borrowing: bool = False) -> bool:
    """One turn of ``job``; True if it became ready with tasks still pending (more turns).
    A job asking for a topology domain tries the domains ``topology.where`` gives, in
    turn, until one works. ``borrowing``: its queue is over its share, each task placed
    only on room a plugin lends (``_borrow``)."""
    requested = [t for t in job.tasks_with(TaskStatus.PENDING) if not t.template.best_effort]
    for within in _domains(session, placer, job, requested):
        kept = _attempt(session, placer, job, requested, within, borrowing)
        if kept is not None:
            return kept
    return False


def _domains(
    session: Session, placer: Placer, job: JobInfo, requested: list[TaskInfo]
) -> list[np.ndarray | None]:
    """``topology.where``, the room kept for the job's own tasks counted as theirs, as
    ``_attempt`` counts it: reserve keeps it for them, and held against them it made
    the domain it lies in seem full for as long as it was kept, which was for ever."""
    if job.topology is None:
        return [None]
    claimed = Statement(session)
    claimed.claim_kept_room(job)
    try:
        return topology.where(session, placer, job, requested)
    finally:
        claimed.discard()


def _attempt(
    session: Session,
    placer: Placer,
    job: JobInfo,
    requested: list[TaskInfo],
    within: np.ndarray | None,
    borrowing: bool = False,
) -> bool | None:
    """Place the job (on the nodes ``within`` only, unless None); what ``_allocate_job``
    returns if anything is kept (committed, or held pipelined), else None: discarded.
    ``borrowing``: each task only on room a plugin lends; a job kept so is marked."""
    statement = Statement(session)
    statement.claim_kept_room(job)
    lenders: set[str] | None = set() if borrowing else None
    held_before = job.ready_count
    placed = place_requested(session, placer, job, statement, requested, within, lenders)
    if requested and not session.job_ready(job):
        placed += backfill.place_best_effort(session, placer, job, statement, until_ready=True)
    if placed and (session.job_ready(job) or session.job_pipelined(job)):
        if lenders:
            _mark_borrowing(session, job, sorted(lenders))
        elif lenders is None and held_before == 0 and job.conditions and borrowing_of(job):
            # placed anew within its queue's share (its borrowed pods were taken back)
            message = f"runs within queue {job.queue}'s deserved share"
            session.set_condition(job, condition(_BORROWING, False, "WithinShare", message))
    if session.job_ready(job):
        session.note_attempts(scheduled=placed)
        statement.commit()
        return placed > 0 and any(
            not t.template.best_effort for t in job.tasks_with(TaskStatus.PENDING)
        )
    if session.job_pipelined(job):
        _hold(statement, job)
        return False
    statement.discard()
    return None


def place_requested(
    session: Session,
    placer: Placer,
    job: JobInfo,
    statement: Statement,
    tasks: list[TaskInfo],
    within: np.ndarray | None = None,
    lenders: set[str] | None = None,
    trial: bool = False,
) -> int:
    """Place ``tasks`` (by task order) until the job is ready or one does not fit.
    ``lenders`` (borrowing): each task only where a plugin lends room for it, the
    lenders named added. ``trial`` (reserve lending kept room): every task that fits, not
    only until ready, and only on room free now (nothing pipelined), with no note of why
    it stopped (the job waits for what it waited for)."""
    queue = session.queues[job.queue]
    placed = 0
    ordered = sorted(tasks, key=session.task_order_key)
    ahead: list[Choice] = []  # nodes for the next alike tasks, chosen together, last first
    for i, task in enumerate(ordered):
        if not session.allocatable(queue, task):
            if trial:
                break
            why = f"queue {queue.name} has reached its capability"
            if queue.parent is not None:  # in a tree: the queue on its path that is,
                # or else the room left is another subtree's unused guarantee
                kept = "the room left is kept for other queues' unused guarantees"
                why = str(held_back(session, queue, task) or kept)
            session.note_waiting(job, why, by_queue=True)
            break
        if lenders is not None:
            lender = session.lender(queue, task)
            if lender is None:
                why = f"queue {queue.name} is using its deserved share and may borrow no more"
                session.note_waiting(job, why, by_queue=True)
                break
            lenders.add(lender)
        if not ahead:
            ahead = placer.choose_alike(ordered[i:], within=within)[::-1]
        choice = ahead.pop() if ahead else None
        if choice is None and lenders is not None:
            break  # no room to borrow: the job waits for its share, as it says then
        if trial and (choice is None or choice.pipelined):
            break
        if choice is None:
            session.note_fit_error(job, task, placer.explain(task))
            session.note_attempts(unschedulable=1)
            break
        statement.place(task, choice.node, choice.pipelined)
        placed += 1
        if not trial and session.job_ready(job):
            break
    return placed


def held_back(session: Session, queue: QueueInfo, task: TaskInfo | None = None) -> HeldBack | None:
    """In a queue tree (DESIGN §14), the queue on ``queue``'s path (itself first) that
    holds it back, as ``kbatch explain`` shows it (``team-a is at its capability cpu
    64``): with a ``task``, the nearest whose capability the task would pass; without,
    the nearest holding more than its deserved share. From the shares the queues
    publish (kept current through the session); None if none is found."""
    request = task.request * shareable(session.dims) if task is not None else None
    names = session.dims.names
    current: QueueInfo | None = queue
    seen: set[str] = set()
    while current is not None and current.name not in seen:
        seen.add(current.name)
        held = current.allocated
        if held is not None:
            if request is not None and current.capability is not None:
                over = (request > EPSILON) & (held + request > current.capability + EPSILON)
                if over.any():
                    dim = int(over.argmax())
                    return HeldBack(current.name, CAPABILITY, names[dim], current.capability[dim])
            if request is None and current.deserved is not None:
                over = held > current.deserved + EPSILON
                if over.any():
                    dim = int(over.argmax())
                    return HeldBack(current.name, DESERVED, names[dim], current.deserved[dim])
        parent = current.parent
        current = session.queues.get(parent) if parent is not None else None
    return None


def _mark_borrowing(session: Session, job: JobInfo, lenders: list[str]) -> None:
    """The job's PodGroup says it runs on borrowed room, and whose."""
    whose = ", ".join(f"queue {n}" if n != ROOT else "the cluster's unowned room" for n in lenders)
    message = (
        f"queue {job.queue} is over its deserved share and borrows room of {whose}: "
        "the first reclaimed when it is needed back"
    )
    session.set_condition(job, condition(_BORROWING, True, "Borrowing", message))


_BORROWING = ConditionType.BORROWING


def borrowing_of(job: JobInfo) -> bool:
    """Does ``job`` run on borrowed room (its PodGroup's ``kbatch.io/Borrowing``)?"""
    return any(c.type is _BORROWING and c.status == "True" for c in job.conditions)


def _hold(statement: Statement, job: JobInfo) -> None:
    """Keep a pipelined job's room without sending anything: its allocated tasks become
    pipelined, so a later commit (backfill's, say) cannot count them as placed and
    bind the rest of the gang without them."""
    for task in job.tasks_with(TaskStatus.ALLOCATED):
        statement.pipeline(task, task.node)
