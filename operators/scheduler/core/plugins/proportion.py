"""The proportion plugin: queues share the cluster by weight.

Deserved shares come from water-filling: the cluster is split by weight among
the queues whose request is not yet met; a queue that would get more than it
asks keeps just its request (capped by its capability), and what is left is
split again among the others, until nothing is left or every queue is met.
Dimensions that nobody asks for never keep a queue from being met.

The plugin also answers the reclaim action's questions about shares (DESIGN §3):
which queues are over their share (``overused``), whether a queue may take room back
for a task (up to its deserved share) or lose a task (only while it keeps its
deserved share), and how far above its share a queue is.

Where queues form a tree (any queue with a parent, a guarantee or an explicit deserved
share: DESIGN §14), the shares are the tree's and every answer reads the leaf's path
up to the root (``proportion_tree``); each queue's sums are then its subtree's.
Argument ``borrowing`` (the ``borrowing`` module).
"""

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework import job_sums
from kbatch.operators.scheduler.core.framework.info import (
    JobInfo,
    QueueInfo,
    TaskInfo,
    added_in_order,
)
from kbatch.operators.scheduler.core.framework.resources import (
    EPSILON,
    less_equal,
    share,
    shareable,
)
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.tiers import Vote, no_preemptor
from kbatch.operators.scheduler.core.framework.water_fill import deserved_shares as deserved_shares
from kbatch.operators.scheduler.core.plugins import borrowing
from kbatch.operators.scheduler.core.plugins.borrowing import parse_arguments as parse_arguments
from kbatch.operators.scheduler.core.plugins.proportion_kept import (
    keep_shares,
    kept_shares,
    shares_key,
)
from kbatch.operators.scheduler.core.plugins.proportion_tree import TreeShares, is_tree

NAME = "proportion"


@dataclass(slots=True)
class QueueShare:
    name: str
    weight: int
    capability: np.ndarray
    request: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray  # minResources of Inqueue jobs not yet allocated
    deserved: np.ndarray = field(init=False)
    share: float = 0.0  # as of the last ``refresh``: ask ``current_share``
    unbounded: bool = field(init=False)  # no capability at all: nothing to check
    # ``allocated`` moved since ``share`` was worked out: a gang placed task by task
    # works it out once, when the queue order or the close asks, not once per task.
    stale: bool = False

    def __post_init__(self) -> None:
        # (every queue, every session: the array methods, not numpy's wrapping functions)
        self.deserved = np.zeros(self.request.shape)
        self.unbounded = self.capability is unlimited(len(self.capability)) or bool(
            (self.capability == np.inf).all()
        )

    def refresh(self) -> None:
        self.share = share(self.allocated, self.deserved)
        self.stale = False

    def current_share(self) -> float:
        if self.stale:
            self.refresh()
        return self.share


@functools.lru_cache(maxsize=8)
def unlimited(dims: int) -> np.ndarray:
    """The capability of a queue that sets none: infinite in every dimension (read-only,
    one for every such queue of every session)."""
    capability = np.full(dims, np.inf)
    capability.flags.writeable = False
    return capability


class _Proportion:
    def __init__(self, session: Session) -> None:
        self.session = session
        dims = len(session.dims)
        self.mask = shareable(session.dims)
        self.queues: dict[str, QueueShare] = {}
        for name, queue in session.queues.items():
            capability = queue.capability if queue.capability is not None else unlimited(dims)
            self.queues[name] = QueueShare(
                name, queue.weight, capability, np.zeros(dims), np.zeros(dims), np.zeros(dims)
            )
        self._add_up_jobs(session)
        # Queues in a tree (DESIGN §14): its shares and subtree sums; None: flat.
        self.tree: TreeShares | None = None
        if is_tree(session.queues):
            self.tree = self._tree_shares(session)
            self.rationed = self.tree.rationed
        else:
            self.rationed = self._flat_shares(session)
        for attr in self.queues.values():
            attr.refresh()
        self.publish(session)
        tree = self.tree
        # By leaf in a tree, its ancestors' shares, made stale with its own.
        paths = {} if tree is None else tree.paths
        self._ancestors = {n: tuple(self.queues[a] for a in p[1:]) for n, p in paths.items()}
        self._masked: dict[int, np.ndarray] = {}  # a template's request, masked
        # In a tree, the leaf reclaim last asked to take room back for, and the task's
        # request (None: none yet, and a victim's every ancestor keeps its share).
        self._reclaiming: tuple[str, np.ndarray] | None = None

    def _flat_shares(self, session: Session) -> np.ndarray:
        """The flat queues' deserved shares on them, kept from the last open for the same
        inputs (``proportion_kept``); the rationed dimensions."""
        total = session.total * self.mask
        key = shares_key(
            total, {n: (q.weight, q.request, q.capability) for n, q in self.queues.items()}
        )
        found = kept_shares(session.kept, key, session.shortcuts)
        if found is not None:
            deserved, rationed = found
        else:
            deserved = deserved_shares(
                total,
                {n: q.weight for n, q in self.queues.items()},
                {n: q.request for n, q in self.queues.items()},
                {n: q.capability for n, q in self.queues.items()},
            )
            for name, attr in self.queues.items():
                attr.deserved = deserved[name]
            rationed = rationed_dims(self.queues.values(), len(self.mask))
            keep_shares(session.kept, key, deserved, rationed, session.shortcuts)
            return rationed
        for name, attr in self.queues.items():
            attr.deserved = deserved[name]
        return rationed

    def _tree_shares(self, session: Session) -> TreeShares:
        """The tree's deserved shares on the queues, and each queue's sums its subtree's."""
        own = {
            n: (q.capability, q.allocated, q.request, q.reserved) for n, q in self.queues.items()
        }
        tree = TreeShares(
            session.queues, own, session.total * self.mask, self.mask, tuple(session.dims.names)
        )
        for name, attr in self.queues.items():
            deserved = tree.deserved(name)
            if deserved is not None:
                attr.deserved = deserved
        return tree

    def _add_up_jobs(self, session: Session) -> None:
        """The jobs' parts added to their queues' sums: those kept from the last session
        open, by the jobs that changed, if sure (``job_sums``), else the long way."""
        kept = job_sums.kept_sums(
            session.kept,
            session.jobs,
            self.mask,
            self.queues,
            session.delta,
            session.shortcuts,
        )
        if kept is None:
            jobs = list(session.jobs.values())
            _add_jobs(self.queues, jobs, self.mask, session.shortcuts.sums_by_bincount)
            return
        for i, queue in enumerate(self.queues.values()):
            queue.allocated += kept[i, job_sums.ALLOCATED]
            queue.request += kept[i, job_sums.REQUEST]
            queue.reserved += kept[i, job_sums.RESERVED]

    def queue_key(self, queue: QueueInfo) -> float:
        return self.queues[queue.name].current_share()

    def overused(self, queue: QueueInfo) -> bool:
        if self.tree is not None:
            return self.tree.overused(queue.name)
        attr = self.queues[queue.name]
        return bool((attr.allocated > attr.deserved + EPSILON).any())  # asked per job

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if self.tree is not None:
            if queue.name in self.tree.unchecked:
                return True
            return self.tree.allocatable(queue.name, task.request * self.mask)
        attr = self.queues[queue.name]
        if attr.unbounded:
            return True
        return less_equal(attr.allocated + task.request * self.mask, attr.capability)

    def may_reclaim_for(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Would ``queue`` stay within its deserved share with ``task`` added, in each
        dimension the task uses? (Volcano's test for a reclaimer.)"""
        if self.tree is not None:
            # reclaim asks this before it evicts for ``task``: the victims it then asks
            # ``may_lose`` of go to this leaf (see ``may_lose``)
            request = task.request * self.mask
            self._reclaiming = (queue.name, request)
            return self.tree.may_reclaim_for(queue.name, request)
        attr = self.queues[queue.name]
        request = task.request * self.mask
        used = request > EPSILON
        return bool(np.all(attr.allocated[used] + request[used] <= attr.deserved[used] + EPSILON))

    def may_lose(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """Does ``queue`` (as it holds now, the victims taken so far gone) keep its
        deserved share without ``task``?"""
        if self.tree is not None:  # (each ancestor below the one shared with the reclaimer)
            return self.tree.may_lose(queue.name, task.request * self.mask, self._reclaiming)
        attr, request = self.queues[queue.name], task.request * self.mask
        return keeps_deserved(attr.allocated, attr.deserved, request, self.rationed)

    def over_share(self, queue: QueueInfo) -> float:
        return self.queues[queue.name].current_share()

    def enqueueable(self, job: JobInfo) -> tuple[Vote, str]:
        attr = self.queues.get(job.queue)
        if attr is None or job.min_resources is None:
            return Vote.ABSTAIN, ""
        if self.tree is not None:
            not_a_leaf = self.tree.tree.not_a_leaf(job.queue)
            if not_a_leaf is not None:
                return Vote.REJECT, not_a_leaf
            need = job.min_resources * self.mask
            capped, within = self.tree.enqueue_verdict(job.queue, need)
            if capped is not None:
                return Vote.REJECT, f"queue {capped} would exceed its capability"
            if within:
                return Vote.PERMIT, f"within queue {job.queue}'s deserved share"
            kept = self.tree.enqueue_into_guarantee(job.queue, need)
            if kept is not None:  # admitted on idle room only: not another team's
                return Vote.REJECT, str(kept)
            if self.tree.within_once_drained(job.queue, need):
                return Vote.WAIT, _ONCE_DRAINED
            return Vote.ABSTAIN, ""
        need = job.min_resources * self.mask
        wanted = attr.allocated + attr.reserved + need
        if not less_equal(wanted, attr.capability):
            return Vote.REJECT, f"queue {job.queue} would exceed its capability"
        if less_equal(wanted, attr.deserved):
            return Vote.PERMIT, f"within queue {job.queue}'s deserved share"
        if less_equal(attr.reserved + need, attr.deserved):
            return Vote.WAIT, _ONCE_DRAINED
        return Vote.ABSTAIN, ""

    def enqueued(self, job: JobInfo) -> None:
        attr = self.queues.get(job.queue)
        unplaced = job.minimum_unplaced()
        if attr is not None and unplaced is not None:
            if self.tree is not None:
                self.tree.enqueued(job.queue, unplaced * self.mask)  # the leaf's too
                return
            attr.reserved += unplaced * self.mask

    def victims(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Tasks of queues above their deserved share that, without them (and without the
        candidates chosen before them), still hold their deserved share in every
        rationed dimension they use (see eviction.keeps_deserved)."""
        if self.tree is not None:
            return self._tree_victims(reclaimer, candidates)
        del reclaimer
        taken: dict[str, np.ndarray] = {}
        chosen = []
        for task in candidates:
            queue = self.session.jobs[task.job].queue
            attr = self.queues[queue]
            held = attr.allocated - taken.get(queue, 0)
            request = task.request * self.mask
            over = np.any(held > attr.deserved + EPSILON)
            if over and keeps_deserved(held, attr.deserved, request, self.rationed):
                chosen.append(task)
                taken[queue] = taken.get(queue, 0) + request
        return chosen

    def _tree_victims(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Tasks of leaves over their deserved share that may go back to ``reclaimer``'s
        leaf: each, with the candidates chosen before it, leaves its leaf and each
        ancestor below the one shared with the reclaimer its deserved share."""
        assert self.tree is not None
        jobs = self.session.jobs
        reclaiming = jobs[reclaimer.job].queue
        taken: dict[str, np.ndarray] = {}
        return [
            task
            for task in candidates
            if self.tree.may_give(jobs[task.job].queue, task.request * self.mask, taken, reclaiming)
        ]

    def reclaimer_key(self, reclaimer: TaskInfo) -> object:
        """What the victims read of the reclaimer: nothing when flat, its queue in a tree."""
        if self.tree is None:
            return ()
        return self.session.jobs[reclaimer.job].queue

    def changed(self, task: TaskInfo, sign: float) -> None:
        name = self.session.jobs[task.job].queue
        attr = self.queues.get(name)
        if attr is not None:
            masked = self._masked.get(id(task.template))
            if masked is None:
                masked = self._masked[id(task.template)] = task.request * self.mask
            if sign > 0:  # in place: published as is
                attr.allocated += masked
            else:
                attr.allocated -= masked
            attr.stale = True  # (the queue's share is published at the close)
            if self.tree is not None:
                self.tree.changed(name, masked, sign)
                for ancestor in self._ancestors.get(name, ()):
                    ancestor.stale = True

    def publish(self, session: Session) -> None:
        """Shares on the session's queues, for their status and metrics (at open, and
        again at close). The actions ask the session functions instead."""
        for name, queue in session.queues.items():
            attr = self.queues[name]
            queue.deserved = attr.deserved
            queue.allocated = attr.allocated
            queue.request = attr.request
            queue.share = attr.current_share()

    def close(self, session: Session) -> None:
        self.publish(session)


# Why a job past its queue's deserved share may wait for room all the same: the queue's
# own running work is what takes it past.
_ONCE_DRAINED = "within its queue's deserved share once the queue's running work ends"


def request_key(task: TaskInfo) -> bytes:
    """What ``may_lose`` reads of a task: its request."""
    return task.request.tobytes()


def keeps_deserved(
    allocated: np.ndarray, deserved: np.ndarray, request: np.ndarray, rationed: np.ndarray
) -> bool:
    """Does a queue holding ``allocated`` keep its ``deserved`` share without ``request``?

    Checked in each dimension the request uses that is ``rationed`` (the queues
    ask for more than there is, so deserved shares are real shares) or where the
    queue holds more than it deserves. Where nobody is short (memory in a
    cpu-bound cluster) the deserved amount is just the queue's demand, and
    giving a task back takes no share it is owed: kube-batch's strict test
    there made reclaim impossible from any queue whose pods ask for memory.

    An eviction that passes never makes the victim's queue a reclaimer of the
    same room: where it gave the task back, it keeps at least its deserved share.
    """
    checked = (request > EPSILON) & (rationed | (allocated > deserved + EPSILON))
    return bool(np.all(allocated[checked] - request[checked] >= deserved[checked] - EPSILON))


def rationed_dims(queues: Iterable[QueueShare], dims: int) -> np.ndarray:
    """The dimensions in which some queue deserves less than it asks (its request,
    capped by its capability): those the queues really share."""
    short = np.zeros(dims, dtype=bool)
    for queue in queues:
        short |= queue.deserved < np.minimum(queue.request, queue.capability) - EPSILON
    return short


def _add_jobs(
    queues: dict[str, QueueShare],
    jobs: list[JobInfo],
    mask: np.ndarray,
    by_bincount: bool = True,
) -> None:
    """Add each job's part (``job_sums.parts``: its allocation, request and reservation,
    masked) to its queue's. All jobs at once: ``added_in_order`` adds a queue's rows in job
    order, so the sums are those of adding job after job, to the bit — and thousands of
    jobs cost a few array operations, not a few each. (A job that reserves nothing adds
    a row of +0.0 to its queue's reserved: a sum from +0.0 stays what it was.)
    ``by_bincount``: as ``added_in_order`` takes it."""
    names = list(queues)
    row = {name: i for i, name in enumerate(names)}
    ours = [job for job in jobs if job.queue in row]
    if not ours:
        return
    index = np.fromiter((row[job.queue] for job in ours), np.int64, len(ours))
    each = job_sums.parts(ours, mask)
    sums = np.zeros((3, len(names), len(mask)))
    for kind in (job_sums.ALLOCATED, job_sums.REQUEST, job_sums.RESERVED):
        added_in_order(sums[kind], index, each[:, kind], by_bincount)
    for name, i in row.items():
        queue = queues[name]
        queue.allocated += sums[job_sums.ALLOCATED, i]
        queue.request += sums[job_sums.REQUEST, i]
        queue.reserved += sums[job_sums.RESERVED, i]


def on_session_open(session: Session, option: PluginOption) -> None:
    plugin = _Proportion(session)
    if parse_arguments(option.arguments):
        borrowing.lend(session, plugin.queues, plugin.tree, plugin.mask)
    session.add_queue_order_fn(plugin.queue_key)
    session.add_overused_fn(plugin.overused)
    session.add_allocatable_fn(plugin.allocatable)
    session.add_job_enqueueable_fn(plugin.enqueueable)
    key = no_preemptor if plugin.tree is None else plugin.reclaimer_key
    session.add_reclaimable_fn(plugin.victims, preemptor_key=key)
    session.add_reclaimer_fn(plugin.may_reclaim_for)
    session.add_victim_queue_fn(plugin.may_lose, task_key=request_key)
    session.add_queue_share_fn(plugin.over_share)
    session.add_event_handler(
        allocate=lambda task: plugin.changed(task, +1.0),
        deallocate=lambda task: plugin.changed(task, -1.0),
        enqueue=plugin.enqueued,
    )
    session.add_close_fn(plugin.close)
