"""The enqueue action: admit Pending PodGroups (→ Inqueue) when there is room.

First come first served by queue and job order. A group is admitted when its
minResources fit in the cluster's idle resources less what Inqueue groups
already reserve, or when a plugin permits it (proportion: within the queue's
deserved share, so that reclaim can make room for a starving queue); never
when a plugin rejects it (proportion: past the queue's capability; a Closed
queue), nor when it requires one topology domain and no domain of that level is
large enough for its minResources, even empty (it would hold its promised room
for ever, and keep others out), nor when its pods never fit on the nodes, even all
empty (``node_fit``: the same). A group without minResources is admitted at once.

With delayed pod creation a group's pods exist only once it is admitted: an admitted
group none of whose pods run goes back to Pending once they show they never fit, and
its promise (here and in the plugins' reservations) is kept no longer.

With the reserve action configured, the first group of a queue refused only for idle
room is admitted all the same (DESIGN §11) once it has waited ``reserve.starvingAfter``
and a later job of its queue would take the room it waits for, when a plugin says its
queue's own work holds that room (``Vote.WAIT``; proportion: it fits the queue's
deserved share once the queue's running work ends), unless its queue is over its
deserved share, already has an admitted group waiting, or the nodes could not hold it
even with all our pods ended. Reserve then keeps the nodes that drain soonest for it,
and the later, smaller groups of its queue take only the room left elsewhere: a large
job is not starved at admission by a flood of small ones that each fit the idle room.
Room kept for an admitted group (reserve, preempt, reclaim) is what it takes as
its nodes free, so of its promise only what is idle on those nodes now is withheld
from the rest (``reserved``).
"""

import heapq
import itertools
from typing import NamedTuple

import numpy as np

from kbatch.api.podgroup import PodGroupPhase
from kbatch.api.quantity import format_quantity
from kbatch.operators.scheduler.core.framework import node_fit, topology
from kbatch.operators.scheduler.core.framework.info import (
    NO_NODE,
    JobInfo,
    TaskStatus,
    TopologyRequest,
)
from kbatch.operators.scheduler.core.framework.resources import EPSILON, less_equal, shareable
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.tiers import Vote

NAME = "enqueue"


# Phases read of every group, every session: module constants (reading an Enum member off
# its class costs a few times more: EnumType's __getattr__ hook, Python 3.11).
_PENDING, _INQUEUE = PodGroupPhase.PENDING, PodGroupPhase.INQUEUE


def reserved(session: Session) -> np.ndarray:
    """What Inqueue groups have been promised and do not hold yet (a resting job is a
    Running one: ``framework.resting``). Of a group with room kept for it on nodes
    still draining, only that room's idle part now, and what its kept room does not
    cover."""
    total = session.dims.zeros()
    idle = np.maximum(session.nodes.idle(), 0.0) if session.any_room_kept() else None
    for job in session.active_jobs():
        if job.phase is not _INQUEUE or (unplaced := job.minimum_unplaced()) is None:
            continue
        kept = _kept_room(job) if idle is not None and job.counts[TaskStatus.PENDING] else None
        if not kept or idle is None:
            total += unplaced
            continue
        total += np.maximum(unplaced - sum(kept.values(), session.dims.zeros()), 0.0)
        for node, room in kept.items():
            total += np.minimum(idle[node], room)
    return total


def _kept_room(job: JobInfo) -> dict[int, np.ndarray]:
    """The room kept for ``job``'s pending pods (nominated to nodes), by node."""
    kept: dict[int, np.ndarray] = {}
    for task in job.tasks_with(TaskStatus.PENDING):
        if task.nominated != NO_NODE:
            kept[task.nominated] = kept.get(task.nominated, 0.0) + task.request
    return kept


# What an admission verdict reads of a job: its queue, its priority (the priority plugin
# weighs what lower-priority jobs of the queue hold), its minResources and the topology
# domain it requires.
RefusalKey = tuple[str, int, bytes, TopologyRequest | None]
# A queue's waiting groups by job order, the first in line last (taken with pop()).
Line = list[tuple[tuple[object, ...], int, JobInfo]]


class Refusal(NamedTuple):
    """Why a group is not admitted, as ``note_waiting`` takes it."""

    why: str
    by_queue: bool  # its queue holds it (not the cluster)
    # Only the idle room is too small for this (``_AheadOfRoom``); None: not only that.
    need: np.ndarray | None = None


class _AheadOfRoom:
    """The groups admitted ahead of the idle room (reserve keeps room for each as its
    nodes drain), with the reserve action configured: a queue's first group refused only
    for idle room that has waited ``reserve.starvingAfter``, once a later job of its
    queue would take room it waits for (a later group of its line admitted, or a pod of
    its queue without a PodGroup, which is never held at admission, waiting). One a
    session per queue within its deserved share with no admitted group waiting (reserve
    serves that one)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self._closed: set[str] | None = None  # queues that may not, worked out when asked
        self._drained: np.ndarray | None = None  # the cluster's room with ours all ended
        self._pods_since: dict[str, float] | None = None  # per queue: its latest such pod
        self._first: dict[str, JobInfo] = {}  # per queue: the group that may go ahead

    def eligible(self, job: JobInfo, refusal: Refusal) -> bool:
        """May ``job``, refused so, go ahead of the room? Only if the idle room was all
        it lacked, and not if it needs more than the nodes hold once all our pods there
        end: no draining would ever make that room."""
        need = refusal.need
        if need is None or not self._may(job.queue) or not self._starving(job):
            return False
        if self._drained is None:
            nodes = self._session.nodes
            self._drained = (nodes.allocatable - nodes.held_by_others()).sum(axis=0)
        return less_equal(need, self._drained)

    def _starving(self, job: JobInfo) -> bool:
        """Has ``job`` waited ``reserve.starvingAfter`` since it was made? If not, the
        session is woken when it has (the simulator's clock as the live one)."""
        session = self._session
        starving_from = job.created + session.conf.reserve.starving_after_seconds
        if session.now >= starving_from:
            return True
        session.wake_at(starving_from)
        return False

    def at_once(self, job: JobInfo) -> bool:
        """Do pods of ``job``'s queue without a PodGroup, come after it, wait to be placed?"""
        if self._pods_since is None:
            self._pods_since = {}
            for other in self._session.active_jobs():
                if not other.has_pod_group and other.counts[TaskStatus.PENDING]:
                    since = self._pods_since.get(other.queue, other.created)
                    self._pods_since[other.queue] = max(since, other.created)
        return self._pods_since.get(job.queue, job.created) > job.created

    def hold(self, job: JobInfo) -> None:
        """``job`` goes ahead if a later group of its queue is to be admitted."""
        self._first.setdefault(job.queue, job)

    def overtaken(self, job: JobInfo) -> JobInfo | None:
        """``job`` may be admitted: the group of its queue to go ahead of it (taken), if
        any."""
        first = self._first.pop(job.queue, None)
        if first is not None:
            self.take(job.queue)
        return first

    def take(self, queue: str) -> None:
        self._may(queue)
        assert self._closed is not None
        self._closed.add(queue)

    def _may(self, queue: str) -> bool:
        if self._closed is None:
            session = self._session
            self._closed = {
                job.queue
                for job in session.active_jobs()
                if job.phase is _INQUEUE and job.has_pod_group and not session.job_ready(job)
            }
        return queue not in self._closed and not self._session.overused(self._session.queues[queue])


def execute(session: Session) -> None:
    waiting = _waiting(session)
    if not waiting:
        return  # (most sessions of a cluster keeping up: no idle room worked out)
    mask = shareable(session.dims)
    idle = (session.nodes.idle().sum(axis=0) - reserved(session)) * mask
    # (``Shortcuts.refuse_alike_at_once`` off: the groups always taken in line, even
    # when none of them may be admitted)
    shortcuts = session.shortcuts
    ahead = _AheadOfRoom(session) if "reserve" in session.conf.actions else None
    if shortcuts.refuse_alike_at_once and _all_refused(session, waiting, idle, mask, ahead):
        return
    lines = _lines(session, waiting)
    tie = itertools.count()
    queues = [(session.queue_order_key(session.queues[name]), next(tie), name) for name in lines]
    heapq.heapify(queues)
    # Refusals so far, by what the verdict reads: until a job is admitted (which moves the
    # idle room and the plugins' reservations) a job alike to one refused is refused the
    # same way. A long line of alike pending groups is the common case, and asking the
    # plugins and wording the shortfall for each of them was most of the action's time.
    refusals: dict[RefusalKey, Refusal] = {}
    # (``Shortcuts.refused_queue_stays_first`` off: every job taken goes back through
    # the heap of queues)
    stays_first = shortcuts.refused_queue_stays_first
    while queues:
        _, _, name = heapq.heappop(queues)
        line = lines[name]
        # The queue first in line stays first through its refusals: they move nothing the
        # queues' order reads (admitting a job does: the plugins hear of it), and the keys
        # are unique (they end with the queue's name). Its long line of refusals then
        # costs no turn through the heap each.
        while line:
            job = _next_to_admit(session, line, refusals, idle, mask, ahead)
            if job is not None:
                idle = _admit(session, job, idle, mask)
                refusals.clear()
                break  # the queues' order may have moved: asked again
            if not stays_first:
                break
        if line:
            heapq.heappush(queues, (session.queue_order_key(session.queues[name]), next(tie), name))


def _next_to_admit(
    session: Session,
    line: Line,
    refusals: dict[RefusalKey, Refusal],
    idle: np.ndarray,
    mask: np.ndarray,
    ahead: _AheadOfRoom | None,
) -> JobInfo | None:
    """Take the first of ``line``: the group to admit now (it, or the one of its queue
    to go ahead of it, it then put back), or None, told why it waits."""
    entry = line.pop()
    job = entry[2]
    key = _refusal_key(job)
    refusal = refusals.get(key) if key is not None else None
    if refusal is None:
        refusal = _refusal(session, job, idle, mask)
        if key is not None and refusal is not None:
            refusals[key] = refusal
    if refusal is None:
        first = ahead.overtaken(job) if ahead is not None else None
        if first is None:
            return job
        line.append(entry)  # asked again once ``first`` is admitted
        return first
    if ahead is not None and ahead.eligible(job, refusal):
        if ahead.at_once(job):
            ahead.take(job.queue)
            return job
        ahead.hold(job)
    session.note_waiting(job, refusal.why, by_queue=refusal.by_queue)
    return None


def _waiting(session: Session) -> list[JobInfo]:
    """The Pending groups that may be admitted, in the session's order, less those whose
    pods never fit on the nodes (``_never_fits``: admitted ones sent back too). A group
    with no pods yet may be admitted although it is not valid (too few pods for
    minMember): with delayed pod creation its pods only exist once it is Inqueue. (A
    resting job is a Running one.)"""
    verdicts: node_fit.Verdicts = {}
    return [
        job
        for job in session.active_jobs()
        if (job.phase is _PENDING or job.phase is _INQUEUE)
        and job.has_pod_group
        and not _never_fits(session, job, verdicts)
        and job.phase is _PENDING
        and job.queue in session.queues
        and (not job.tasks or session.invalid_reason(job) is None)
        and job.uid not in session.barred
    ]


def _never_fits(session: Session, job: JobInfo, verdicts: node_fit.Verdicts) -> bool:
    """Do the pods of ``job``, Pending or admitted with none running, never fit on the
    nodes (``node_fit``)? If so it waits, told why, Pending: one admitted is sent back,
    its promise kept no longer, here or in the plugins' reservations (from the next
    session on: they summed it at open). Asked before any other reason to wait, so
    that the one that holds for good is the one told."""
    if job.ready_count or (never := node_fit.never_fits(session, job, verdicts)) is None:
        return False
    if job.phase is _INQUEUE:
        job.phase = _PENDING
        job.changed()
    session.note_waiting(job, f"not admitted: {never}")
    return True


def _all_refused(
    session: Session,
    waiting: list[JobInfo],
    idle: np.ndarray,
    mask: np.ndarray,
    ahead: _AheadOfRoom | None,
) -> bool:
    """If not one of ``waiting`` may be admitted, note why on each and say so. Nothing
    then moves the idle room or the plugins' reservations, so each is refused as the
    first alike (``_refusal_key``) is, wherever it stands in line: the verdicts are
    asked once per kind of group and the line need not be put in order. A group
    without minResources is admitted unless its queue refuses it: with one waiting,
    the line is walked. (A backlog on a full cluster: most sessions admit nothing.)"""
    alike: list[tuple[JobInfo, RefusalKey]] = []
    refusals: dict[RefusalKey, Refusal] = {}
    for job in waiting:
        key = _refusal_key(job)
        if key is None:
            return False
        if key not in refusals:
            refusal = _refusal(session, job, idle, mask)
            if refusal is None or (
                ahead is not None and ahead.eligible(job, refusal) and ahead.at_once(job)
            ):
                return False
            refusals[key] = refusal
        alike.append((job, key))
    for job, key in alike:
        refusal = refusals[key]
        session.note_waiting(job, refusal.why, by_queue=refusal.by_queue)
    return True


def _lines(session: Session, waiting: list[JobInfo]) -> dict[str, Line]:
    """Each queue's ``waiting`` groups, in job order, first in line last (to be taken
    with pop())."""
    tie = itertools.count()
    lines: dict[str, Line] = {}
    for job in waiting:
        lines.setdefault(job.queue, []).append((session.job_order_key(job), next(tie), job))
    for jobs in lines.values():
        jobs.sort(reverse=True)  # keys are unique (they end with the job's uid)
    return lines


def _refusal_key(job: JobInfo) -> RefusalKey | None:
    """What the verdict on ``job`` reads of it; None for a group without minResources
    (admitted unless its queue refuses it: nothing worth remembering)."""
    if job.min_resources is None:
        return None
    return job.queue, job.priority, job.min_resources.tobytes(), job.topology


def _admit(session: Session, job: JobInfo, idle: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Admit ``job``: the idle room left after it."""
    job.phase = PodGroupPhase.INQUEUE
    job.changed()
    session.enqueued(job)
    return idle - job.min_resources * mask if job.min_resources is not None else idle


def _refusal(session: Session, job: JobInfo, idle: np.ndarray, mask: np.ndarray) -> Refusal | None:
    """Why ``job`` may not be admitted with ``idle`` room left, as the plugins stand; None
    if it may. Asking changes nothing."""
    queue = session.queues[job.queue]
    if not queue.open:
        return Refusal(f"queue {queue.name} is Closed", True)
    vote, why = session.job_enqueueable(job)
    if vote is Vote.REJECT:
        return Refusal(f"not admitted: {why}", True)
    never = topology.never_fits(session, job)
    if never is not None:
        return Refusal(f"not admitted: {never}", False)
    need = job.min_resources * mask if job.min_resources is not None else None
    if need is not None and vote is not Vote.PERMIT and not less_equal(need, idle):
        why = "not admitted: minResources " + _shortfall(session, need, idle)
        return Refusal(why, False, need if vote is Vote.WAIT else None)
    return None


def _shortfall(session: Session, need: np.ndarray, idle: np.ndarray) -> str:
    parts = [
        f"{name} {format_quantity(name, need[i])} > {format_quantity(name, max(idle[i], 0))} free"
        for i, name in enumerate(session.dims.names)
        if need[i] > idle[i] + EPSILON
    ]
    return "exceed the cluster's free resources: " + ", ".join(parts)
