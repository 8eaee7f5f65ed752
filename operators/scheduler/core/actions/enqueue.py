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
"""

import heapq
import itertools

import numpy as np

from kbatch.api.podgroup import PodGroupPhase
from kbatch.api.quantity import format_quantity
from kbatch.operators.scheduler.core.framework import node_fit, topology
from kbatch.operators.scheduler.core.framework.info import JobInfo, TopologyRequest
from kbatch.operators.scheduler.core.framework.resources import EPSILON, less_equal, shareable
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.tiers import Vote

NAME = "enqueue"


# Phases read of every group, every session: module constants (reading an Enum member off
# its class costs a few times more: EnumType's __getattr__ hook, Python 3.11).
_PENDING, _INQUEUE = PodGroupPhase.PENDING, PodGroupPhase.INQUEUE


def reserved(session: Session) -> np.ndarray:
    """What Inqueue groups have been promised and do not hold yet (a resting job is a
    Running one: ``framework.resting``)."""
    total = session.dims.zeros()
    for job in session.active_jobs():
        if job.phase is _INQUEUE and (unplaced := job.minimum_unplaced()) is not None:
            total += unplaced
    return total


# What an admission verdict reads of a job: its queue, its priority (the priority plugin
# weighs what lower-priority jobs of the queue hold), its minResources and the topology
# domain it requires.
RefusalKey = tuple[str, int, bytes, TopologyRequest | None]
# A refusal as ``note_waiting`` takes it: why, and whether the queue (not the cluster) holds it.
Refusal = tuple[str, bool]


def execute(session: Session) -> None:
    waiting = _waiting(session)
    if not waiting:
        return  # (most sessions of a cluster keeping up: no idle room worked out)
    mask = shareable(session.dims)
    idle = (session.nodes.idle().sum(axis=0) - reserved(session)) * mask
    # (``Shortcuts.refuse_alike_at_once`` off: the groups always taken in line, even
    # when none of them may be admitted)
    shortcuts = session.shortcuts
    if shortcuts.refuse_alike_at_once and _all_refused(session, waiting, idle, mask):
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
            _, _, job = line.pop()
            key = _refusal_key(job)
            refusal = refusals.get(key) if key is not None else None
            if refusal is not None:
                session.note_waiting(job, refusal[0], by_queue=refusal[1])
            else:
                admitted, refusal = _try_admit(session, job, idle, mask)
                if admitted is not None:
                    idle = admitted
                    refusals.clear()
                    break  # the queues' order may have moved: asked again
                if key is not None and refusal is not None:
                    refusals[key] = refusal
            if not stays_first:
                break
        if line:
            heapq.heappush(queues, (session.queue_order_key(session.queues[name]), next(tie), name))


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
    session: Session, waiting: list[JobInfo], idle: np.ndarray, mask: np.ndarray
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
            if refusal is None:
                return False
            refusals[key] = refusal
        alike.append((job, key))
    for job, key in alike:
        why, by_queue = refusals[key]
        session.note_waiting(job, why, by_queue=by_queue)
    return True


def _lines(
    session: Session, waiting: list[JobInfo]
) -> dict[str, list[tuple[tuple[object, ...], int, JobInfo]]]:
    """Each queue's ``waiting`` groups, in job order, first in line last (to be taken
    with pop())."""
    tie = itertools.count()
    lines: dict[str, list[tuple[tuple[object, ...], int, JobInfo]]] = {}
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


def _try_admit(
    session: Session, job: JobInfo, idle: np.ndarray, mask: np.ndarray
) -> tuple[np.ndarray | None, Refusal | None]:
    """Admit ``job`` if it may be: the idle room left after it, or None and why not (as
    noted on the job)."""
    refusal = _refusal(session, job, idle, mask)
    if refusal is not None:
        session.note_waiting(job, refusal[0], by_queue=refusal[1])
        return None, refusal
    job.phase = PodGroupPhase.INQUEUE
    job.changed()
    session.enqueued(job)
    return (idle - job.min_resources * mask if job.min_resources is not None else idle), None


def _refusal(session: Session, job: JobInfo, idle: np.ndarray, mask: np.ndarray) -> Refusal | None:
    """Why ``job`` may not be admitted with ``idle`` room left, as the plugins stand; None
    if it may. Asking changes nothing."""
    queue = session.queues[job.queue]
    if not queue.open:
        return f"queue {queue.name} is Closed", True
    vote, why = session.job_enqueueable(job)
    if vote is Vote.REJECT:
        return f"not admitted: {why}", True
    never = topology.never_fits(session, job)
    if never is not None:
        return f"not admitted: {never}", False
    need = job.min_resources * mask if job.min_resources is not None else None
    if need is not None and vote is not Vote.PERMIT and not less_equal(need, idle):
        return "not admitted: minResources " + _shortfall(session, need, idle), False
    return None


def _shortfall(session: Session, need: np.ndarray, idle: np.ndarray) -> str:
    parts = [
        f"{name} {format_quantity(name, need[i])} > {format_quantity(name, max(idle[i], 0))} free"
        for i, name in enumerate(session.dims.names)
        if need[i] > idle[i] + EPSILON
    ]
    return "exceed the cluster's free resources: " + ", ".join(parts)
