"""The reclaim action: a queue below its deserved share takes resources back from
queues above theirs — the most over-served queue first — never taking a queue
below its deserved share, and only from queues marked reclaimable (victims from
``reclaimable``).

These limits hold whatever the tiers say (DESIGN §3), asked of the plugins that
know the shares (proportion) through session functions: a victim may go only if
its queue may lose it now (``may_lose``: it still holds its deserved share without
it, counting the victims already taken), and the reclaimer takes room only while
its queue may take it back (``may_reclaim_for``: up to its own deserved share), so
that no eviction makes the victim's queue a reclaimer of the same room in the next
session. The most over-served queue (``queue_share``) gives back first. A task its
queue may not take (capability) evicts nothing.
Per job through one Statement: if the job cannot become ready (pipelined) with
the room taken back, nothing is evicted.

Where queues form a tree (DESIGN §14) a leaf takes back from the nearest relatives
first (its siblings' subtrees, then its parent's siblings', and so on), the most
over-served first among them; a leaf may reclaim while its team is over its share
(room taken from a sibling stays in the team), as far as ``may_reclaim_for`` and
``may_lose`` let it.

Groups that run on borrowed room (their PodGroup's ``kbatch.io/Borrowing`` condition,
DESIGN §14) give back before any other, whatever the shares.

Each task tried counts as a preemption attempt (kube-batch counted preempt's
only; a reclaim is a preemption across queues).
"""

from collections.abc import Hashable
from functools import partial

from kbatch.operators.scheduler.core.actions.allocate import borrowing_of
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.evictable import EvictableRoom
from kbatch.operators.scheduler.core.framework.eviction import make_room, wasted_evictions
from kbatch.operators.scheduler.core.framework.eviction_rules import Rules
from kbatch.operators.scheduler.core.framework.info import (
    NO_NODE,
    JobInfo,
    QueueInfo,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.placement import Placer
from kbatch.operators.scheduler.core.framework.preemptors import (
    fits_without_eviction,
    jobs_by_queue,
    pending_tasks,
)
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement

NAME = "reclaim"


def execute(session: Session) -> None:
    # In a tree a leaf may take room back from a sibling while their team is over its
    # share: the leaf's own share is asked task by task (``may_reclaim_for``).
    flat = not any(queue.parent is not None for queue in session.queues.values())
    first = _reclaimable_over_share(session)
    jobs = session.jobs_to_place() if first else []
    if not _anyone_to_take_from(session, jobs, first, flat):
        return
    placer = Placer(session)
    room = EvictableRoom(session)
    over_served: dict[Hashable, frozenset[str]] = {room.state(()): first}
    # Tries that were discarded, by what they read (``_try_key``): the attempts each made
    failed_tries: dict[Hashable, int] = {}
    fits: dict[Hashable, bool] = {}  # dry runs' answers, by what they read (``_fits``)
    for job in jobs_by_queue(session, jobs):
        queue = session.queues[job.queue]
        if flat and session.overused(queue):
            continue
        rules = _rules(session, room, queue, _over_served(session, room, over_served), flat)
        if not rules.held().any():
            continue  # no other queue has anything it could give back
        pending = pending_tasks(session, job)
        alike = _alike_key(room, job, pending)
        if _fits(session, placer, job, pending, alike, fits):
            continue  # allocate will place it
        tried = _try_key(job, pending, rules, alike)
        attempts = None if tried is None else failed_tries.get(tried)
        if attempts is not None:
            # the same try from the same state: it would make as many attempts and fail
            session.stats.preemption_attempts += attempts
            continue
        before = session.stats.preemption_attempts
        if not _reclaim_for(session, placer, job, pending, rules) and tried is not None:
            failed_tries[tried] = session.stats.preemption_attempts - before


def _anyone_to_take_from(
    session: Session, jobs: list[JobInfo], over: frozenset[str], flat: bool
) -> bool:
    """May any of ``jobs`` take room back as the action starts: is some reclaimable
    queue (``over``: those over their share) another than its own, its queue not over
    its share where queues are flat? If not, no job reclaims, nothing is committed, and
    the answer stays: a flood of jobs that fit costs reclaim no index of the running
    tasks (made every session, it would cost more than the rest of the action)."""
    waiting = {job.queue for job in jobs}
    if flat:
        return bool(over) and not all(session.overused(session.queues[q]) for q in waiting)
    return any(over - {queue} for queue in waiting)


def _alike_key(room: EvictableRoom, job: JobInfo, pending: list[TaskInfo]) -> Hashable:
    """What a dry run and a try both read of the session and of ``job``: the session
    state between statements, the job's shape and its pending tasks' templates (shared
    by alike pods), roles and priorities. Built once per job for ``_fits`` and
    ``_try_key``."""
    return (
        room.state(()),
        _shape(job),
        tuple((id(t.template), t.role, t.priority, t.critical) for t in pending),
    )


def _try_key(
    job: JobInfo, pending: list[TaskInfo], rules: Rules, alike: Hashable
) -> Hashable | None:
    """All that ``_reclaim_for`` reads of ``job`` and the session, as a key (None: not
    known): what a dry run reads (``alike``), the rule, and what the deciding plugins
    read of each pending task. Two jobs with equal keys make equal tries: the same
    attempts, the same victims, the same verdict. A backlog of alike gangs that each
    would evict a gang in vain is then tried once per queue and commit, not once per
    gang."""
    if rules.key is None:
        return None
    if any(t.nominated != NO_NODE for t in job.tasks_with(TaskStatus.PENDING)):
        return None  # room kept for the job is its own: no other job claims the same
    chosen = []
    for task in pending:
        chooses = rules.choose_key(task)
        if chooses is None:
            return None
        chosen.append(chooses)
    return (alike, rules.key, tuple(chosen))


def _fits(
    session: Session,
    placer: Placer,
    job: JobInfo,
    pending: list[TaskInfo],
    alike: Hashable,
    known: dict[Hashable, bool],
) -> bool:
    """``fits_without_eviction``, kept by all that its dry run reads (``alike``). Only
    for a job all of whose tasks are pending with no room kept for them: no node of its
    own tells it apart from an alike job. A backlog of alike gangs is then tried once per
    queue and commit, not once per gang; the answer is the same."""
    tasks = job.tasks.values()
    if any(t.status != TaskStatus.PENDING or t.nominated != NO_NODE for t in tasks):
        return fits_without_eviction(session, placer, job, pending)
    answer = known.get(alike)
    if answer is None:
        answer = known[alike] = fits_without_eviction(session, placer, job, pending)
    return answer


def _shape(job: JobInfo) -> Hashable:
    """What the plugins may read of a job (besides its tasks): its queue, minimums,
    priority, lifetime, topology, phase and its tasks' roles and statuses."""
    return (
        job.queue,
        job.namespace,
        job.min_member,
        job.priority,
        None if job.min_resources is None else job.min_resources.tobytes(),
        job.lifetime,
        tuple(sorted(job.min_task_member.items())),
        job.topology,
        job.phase,
        job.has_pod_group,
        tuple(sorted((t.role, t.status) for t in job.tasks.values())),
    )


def _reclaim_for(
    session: Session, placer: Placer, job: JobInfo, pending: list[TaskInfo], rules: Rules
) -> bool:
    """Evict for ``job`` what makes it pipelined, in one statement, committed only if it
    is and no victim's room stays idle; whether it was committed."""
    queue = session.queues[job.queue]
    statement = Statement(session)
    statement.claim_kept_room(job)
    for task in pending:
        if not session.allocatable(queue, task):
            break  # its queue may not take it: evicting for it would be in vain
        if not session.may_reclaim_for(queue, task):
            break  # the queue takes back only up to its deserved share
        session.note_preemption_attempt()
        messages = partial(decided.reclaim_messages, task, job)
        if not make_room(session, statement, placer, task, rules, messages):
            break
        if session.job_pipelined(job):
            break
    if session.job_pipelined(job) and not wasted_evictions(session, statement):
        statement.commit()
        rules.room.committed()
        return True
    statement.discard()
    return False


def _over_served(
    session: Session, room: EvictableRoom, known: dict[Hashable, frozenset[str]]
) -> frozenset[str]:
    """The reclaimable queues over their share as the session stands between statements:
    kept by its state (``room.state``), as the same state gives the same answer — so a
    backlog's jobs ask every queue once per commit, not once each."""
    state = room.state(())
    over = known.get(state)
    if over is None:
        over = known[state] = _reclaimable_over_share(session)
    return over


def _reclaimable_over_share(session: Session) -> frozenset[str]:
    """The reclaimable queues over their share, as the session stands now."""
    queues = session.queues.values()
    return frozenset(q.name for q in queues if q.reclaimable and session.overused(q))


# Shares above this order alike (a queue deserving nothing holds an infinite share):
# it keeps the rings of relatives apart in one float.
_SHARE_BOUND = 1e6


def _kinship(session: Session, reclaimer: str) -> dict[str, int] | None:
    """Where queues form a tree (DESIGN §14): each queue's ring as seen from
    ``reclaimer`` (0: under its parent, 1: under its grandparent, ...), for reclaim to
    take from the nearest relatives first; None for flat queues."""
    queues = session.queues
    if not any(queue.parent is not None for queue in queues.values()):
        return None

    def path(name: str) -> list[str]:
        out: list[str] = []
        while name in queues and name not in out:
            out.append(name)
            parent = queues[name].parent
            if parent is None:
                break
            name = parent
        return out

    ancestors = {name: at for at, name in enumerate(path(reclaimer))}
    rings: dict[str, int] = {}
    for name in queues:
        shared = next((ancestors[n] for n in path(name) if n in ancestors), len(ancestors))
        rings[name] = max(shared - 1, 0)
    return rings


def _rules(
    session: Session,
    room: EvictableRoom,
    reclaimer: QueueInfo,
    over_served: frozenset[str],
    flat: bool,
) -> Rules:
    """The rules for one job of ``reclaimer``. The queues it may take from are those
    over their share as the job's turn begins (``over_served``); ``still_allowed`` asks
    again before each victim, as the victims taken change the shares."""
    givers = over_served - {reclaimer.name}

    def queue_of(t: TaskInfo) -> QueueInfo | None:
        return session.queues.get(session.jobs[t.job].queue)

    def from_other_overused_queue(job: JobInfo) -> bool:
        return job.queue in givers

    def still_allowed(t: TaskInfo) -> bool:
        queue = queue_of(t)
        return queue is not None and session.overused(queue) and session.may_lose(queue, t)

    def what_allowed_reads(t: TaskInfo) -> Hashable:
        """``still_allowed`` reads the victim's queue (``overused`` reads nothing else
        of the session) and what ``may_lose`` reads of the victim."""
        loses = session.may_lose_key(t)
        return None if loses is None else (session.jobs[t.job].queue, loses)

    kin = None if flat else _kinship(session, reclaimer.name)  # flat: asked once a session
    # Below every other key: tasks of groups on borrowed room go before any other.
    borrowed_first = 2 * _SHARE_BOUND * (len(session.queues) + 2)

    def most_over_served_first(t: TaskInfo) -> float:
        queue = queue_of(t)
        if queue is None:
            return 0.0
        if kin is None:
            key = -session.queue_share(queue)
        else:  # nearest relatives first, then the most over-served among them
            share = min(max(session.queue_share(queue), 0.0), _SHARE_BOUND)
            key = kin.get(queue.name, len(kin)) * 2 * _SHARE_BOUND - share
        if borrowing_of(session.jobs[t.job]):
            return key - borrowed_first
        return key

    # The givers tell the rule apart: flat, none of it reads the reclaimer (its own
    # queue, never over its share here, is never one of them); in a tree the order
    # reads where the reclaimer is.
    return Rules(
        room,
        ("other queues", frozenset(givers), None if kin is None else reclaimer.name),
        from_other_overused_queue,
        session.reclaimable,
        session.reclaimable_key,
        still_allowed,
        most_over_served_first,
        queues=frozenset(givers),
        keeps=session.reclaimable_filter(),
        # Flat, whether a gang may go whole does not depend on who reclaims; in a tree
        # it does (the ancestors a victim keeps a share for are those not shared).
        verdict_key=NAME if kin is None else (NAME, reclaimer.name),
        allowed_key=what_allowed_reads,
    )
