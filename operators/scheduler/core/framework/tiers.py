"""The plugins' functions, registered tier by tier and combined by kube-batch's rules
(DESIGN §3): what a session asks its plugins.

Order functions are given as *keys*: a plugin's key tells two objects apart when the
keys differ, and the first plugin (tier order, then order in tier) that tells them
apart wins, which is exactly a lexicographic comparison of the keys; full ties fall
to creation time, then (tasks) the pod's namespace/name, then uid: a cluster's uids are
random, so a tie broken by name is broken alike by the simulator and a cluster. A
plugin registers only inside its ``on_session_open`` (``opening`` names it), and
``compile`` fixes the enabled functions once all have.

The kinds of function and their answers are typed in ``signatures``; how the victims
functions of a tier combine is ``victims``.
"""

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbatch.config import PluginOption, SchedulerConf
from kbatch.operators.scheduler.core.framework import victims
from kbatch.operators.scheduler.core.framework.info import JobInfo, QueueInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate
from kbatch.operators.scheduler.core.framework.signatures import (
    AllocatableFn,
    CloseFn,
    EnqueueFn,
    Failures,
    JobCheckFn,
    JobEventFn,
    JobValidFn,
    Key,
    Lasting,
    LastingFn,
    LenderFn,
    NodeOrderFn,
    OrderKeyFn,
    OverusedFn,
    PredicateFn,
    PreemptorKeyFn,
    QueueShareFn,
    QueueTaskFn,
    TaskChangingFn,
    TaskEventFn,
    TaskFilterFn,
    VictimsFn,
)
from kbatch.operators.scheduler.core.framework.signatures import Invalid as Invalid
from kbatch.operators.scheduler.core.framework.signatures import Vote as Vote
from kbatch.operators.scheduler.core.framework.victims import no_preemptor as no_preemptor

# (The session, the proportion plugin and the enqueue action import these three from here.)


@dataclass(slots=True)
class _Registered:
    plugin: PluginOption
    tier: int
    fn: Any


class TieredFunctions:
    """The registry and the combination rules; a Session is one (plus its bookkeeping)."""

    def __init__(self, conf: SchedulerConf) -> None:
        self.conf = conf
        self._fns: dict[str, list[_Registered]] = {}
        self._current: tuple[PluginOption, int] | None = None
        self._handlers: list[tuple[TaskEventFn | None, TaskEventFn | None]] = []
        self._enqueue_handlers: list[JobEventFn] = []
        self._changing: list[TaskChangingFn] = []
        self._victim_keys: dict[int, PreemptorKeyFn | None] = {}
        self._with_next_job: set[int] = set()  # queue order functions that take the job
        self._victim_filters: dict[int, TaskFilterFn] = {}
        self._victim_queue_keys: dict[int, Callable[[TaskInfo], Hashable] | None] = {}
        self._closers: list[tuple[str, CloseFn]] = []

    # ----------------------------------------------------------------- registration
    def opening(self, plugin: PluginOption, tier: int) -> None:
        """The framework names the plugin whose on_session_open runs next."""
        self._current = (plugin, tier)

    def _register(self, kind: str, fn: Any) -> None:
        if self._current is None:
            raise RuntimeError(f"{kind} registered outside on_session_open")
        plugin, tier = self._current
        self._fns.setdefault(kind, []).append(_Registered(plugin, tier, fn))

    def add_job_order_fn(self, fn: OrderKeyFn) -> None:
        self._register("JobOrder", fn)

    def add_queue_order_fn(self, fn: OrderKeyFn, next_job: bool = False) -> None:
        """``next_job``: ``fn`` takes the queue and the job the action would take from it
        next (None when not known), as ``fn(queue, job)`` — an order by what the queue
        would hold after that job (the flow plugin's progressive filling)."""
        self._register("QueueOrder", fn)
        if next_job:
            self._with_next_job.add(id(fn))

    def add_task_order_fn(self, fn: OrderKeyFn) -> None:
        self._register("TaskOrder", fn)

    def add_predicate_fn(self, fn: PredicateFn) -> None:
        self._register("Predicate", fn)

    def add_lasting_fn(self, fn: LastingFn) -> None:
        """Switched on and off with the plugin's predicates (``enablePredicate``)."""
        self._register("Lasting", fn)

    def add_node_order_fn(self, fn: NodeOrderFn) -> None:
        self._register("NodeOrder", fn)

    def add_preemptable_fn(
        self,
        fn: VictimsFn,
        preemptor_key: PreemptorKeyFn | None = None,
        keeps: TaskFilterFn | None = None,
    ) -> None:
        """``preemptor_key``: what ``fn`` reads of the preemptor (None: anything), so
        that eviction can reuse a plan that failed for an alike preemptor; ``keeps``:
        ``fn`` task by task, if it is that simple (see TaskFilterFn)."""
        self._register("Preemptable", fn)
        self._note_victims_fn(fn, preemptor_key, keeps)

    def add_reclaimable_fn(
        self,
        fn: VictimsFn,
        preemptor_key: PreemptorKeyFn | None = None,
        keeps: TaskFilterFn | None = None,
    ) -> None:
        self._register("Reclaimable", fn)
        self._note_victims_fn(fn, preemptor_key, keeps)

    def _note_victims_fn(
        self, fn: VictimsFn, preemptor_key: PreemptorKeyFn | None, keeps: TaskFilterFn | None
    ) -> None:
        self._victim_keys[id(fn)] = preemptor_key
        if keeps is not None:
            self._victim_filters[id(fn)] = keeps

    def add_overused_fn(self, fn: OverusedFn) -> None:
        self._register("Overused", fn)

    def add_job_ready_fn(self, fn: JobCheckFn) -> None:
        self._register("JobReady", fn)

    def add_job_pipelined_fn(self, fn: JobCheckFn) -> None:
        self._register("JobPipelined", fn)

    def add_job_valid_fn(self, fn: JobValidFn) -> None:
        self._register("JobValid", fn)

    def add_allocatable_fn(self, fn: AllocatableFn) -> None:
        """May this queue take this task now? (e.g. within its capability)"""
        self._register("Allocatable", fn)

    def add_reclaimer_fn(self, fn: QueueTaskFn) -> None:
        """May this queue take back, from other queues, the room of this task of its
        own? (proportion: only up to its deserved share)"""
        self._register("Reclaimer", fn)

    def add_victim_queue_fn(
        self, fn: QueueTaskFn, task_key: Callable[[TaskInfo], Hashable] | None = None
    ) -> None:
        """May this queue lose this task of its now, given the victims taken already?
        (proportion: only while it keeps its deserved share) ``task_key``: what ``fn``
        reads of the task, if it reads of the session only what the queue holds (None:
        anything), so that eviction can answer alike gangs alike."""
        self._register("VictimQueue", fn)
        self._victim_queue_keys[id(fn)] = task_key

    def add_queue_share_fn(self, fn: QueueShareFn) -> None:
        """How much of its share a queue holds (1.0: all of it); the highest gives back
        first."""
        self._register("QueueShare", fn)

    def add_job_enqueueable_fn(self, fn: EnqueueFn) -> None:
        self._register("JobEnqueueable", fn)

    def add_lender_fn(self, fn: LenderFn) -> None:
        """Whose unused share may this queue, over its own, borrow for this task?
        (proportion with ``borrowing``: room no queue within its share can use now, up to
        the borrower's limits and the lenders'.) Without one, no queue borrows."""
        self._register("Lender", fn)

    def add_event_handler(
        self,
        allocate: TaskEventFn | None = None,
        deallocate: TaskEventFn | None = None,
        enqueue: JobEventFn | None = None,
        changing: TaskChangingFn | None = None,
    ) -> None:
        """``allocate``/``deallocate``: after a task's status enters/leaves
        SHARE_STATUSES; ``enqueue``: after a job is admitted; ``changing``: before any
        status change a session makes (``Session.set_status``), with the new status."""
        self._handlers.append((allocate, deallocate))
        if enqueue is not None:
            self._enqueue_handlers.append(enqueue)
        if changing is not None:
            self._changing.append(changing)

    def add_close_fn(self, fn: CloseFn) -> None:
        if self._current is None:
            raise RuntimeError("close function registered outside on_session_open")
        self._closers.append((self._current[0].name, fn))

    def _enabled(self, kind: str) -> list[_Registered]:
        return [r for r in self._fns.get(kind, []) if r.plugin.enables(kind)]

    def compile(self) -> None:
        """Fix the enabled functions once all plugins have registered."""
        self._current = None
        self._job_keys = _calling([r.fn for r in self._enabled("JobOrder")])
        self._queue_keys = [r.fn for r in self._enabled("QueueOrder")]
        # Without a function that weighs the next job, the queue's keys alone.
        weighing = any(id(fn) in self._with_next_job for fn in self._queue_keys)
        self._queue_keys_alone = None if weighing else _calling(self._queue_keys)
        self._task_keys = _calling([r.fn for r in self._enabled("TaskOrder")])
        self._predicates: list[PredicateFn] = [r.fn for r in self._enabled("Predicate")]
        lasting = self._fns.get("Lasting", [])
        self._lasting: list[LastingFn] = [r.fn for r in lasting if r.plugin.enables("Predicate")]
        self._node_orders: list[NodeOrderFn] = [r.fn for r in self._enabled("NodeOrder")]
        self._overused: list[OverusedFn] = [r.fn for r in self._enabled("Overused")]
        self._ready: list[JobCheckFn] = [r.fn for r in self._enabled("JobReady")]
        self._pipelined: list[JobCheckFn] = [r.fn for r in self._enabled("JobPipelined")]
        self._valid: list[JobValidFn] = [r.fn for r in self._enabled("JobValid")]
        self._allocatable: list[AllocatableFn] = [r.fn for r in self._enabled("Allocatable")]
        self._enqueueable: list[EnqueueFn] = [r.fn for r in self._enabled("JobEnqueueable")]
        self._reclaimers: list[QueueTaskFn] = [r.fn for r in self._enabled("Reclaimer")]
        self._victim_queues: list[QueueTaskFn] = [r.fn for r in self._enabled("VictimQueue")]
        self._queue_shares: list[QueueShareFn] = [r.fn for r in self._enabled("QueueShare")]
        self._lenders: list[LenderFn] = [r.fn for r in self._enabled("Lender")]
        self._preemptable = self._by_tier("Preemptable")
        self._reclaimable = self._by_tier("Reclaimable")
        # what the deciding tier's victims functions read of a preemptor, as one function
        # (found once: eviction asks it for every task that needs room)
        self._preemptable_key = self._preemptor_key(self._preemptable)
        self._reclaimable_key = self._preemptor_key(self._reclaimable)

    def forget_functions(self) -> None:
        """Drop every registered function, once nothing will ask the plugins again. They
        are the plugins' closures and bound methods, which hold the session: a cycle
        that only the cyclic collector frees, with all the session reaches (its
        snapshot's jobs, statuses and events, thousands of objects a session; the
        simulator spent a quarter of its time collecting them). Without the cycle they
        go the moment the last reference does."""
        for registry in (
            self._fns,
            self._handlers,
            self._enqueue_handlers,
            self._changing,
            self._victim_keys,
            self._with_next_job,
            self._victim_filters,
            self._victim_queue_keys,
            self._closers,
        ):
            registry.clear()
        self._compile_nothing()

    def _compile_nothing(self) -> None:
        """What ``compile`` makes of no registered function, set at once: every list
        empty, every key function one that gives the empty tuple (``compile`` itself,
        of empty registries, costs as much as of full ones, once for every session)."""
        self._current = None
        nothing = _calling([])
        self._job_keys = self._queue_keys_alone = self._task_keys = nothing
        self._queue_keys = []
        self._predicates, self._node_orders, self._overused = [], [], []
        self._lasting = []
        self._ready, self._pipelined, self._valid = [], [], []
        self._allocatable, self._enqueueable, self._reclaimers = [], [], []
        self._victim_queues, self._queue_shares, self._lenders = [], [], []
        self._preemptable = [[] for _ in self.conf.tiers]
        self._reclaimable = [[] for _ in self.conf.tiers]
        self._preemptable_key = self._reclaimable_key = nothing

    def _preemptor_key(
        self, tiers: list[list[VictimsFn]]
    ) -> Callable[[TaskInfo], tuple[Key, ...]] | None:
        keys = victims.preemptor_keys(tiers, self._victim_keys)
        return None if keys is None else _calling(keys)

    def _by_tier(self, kind: str) -> list[list[VictimsFn]]:
        tiers: list[list[VictimsFn]] = [[] for _ in self.conf.tiers]
        for r in self._enabled(kind):
            tiers[r.tier].append(r.fn)
        return tiers

    # ----------------------------------------------------------------- combination
    def job_order_key(self, job: JobInfo) -> tuple[Key, ...]:
        return (*self._job_keys(job), job.created, job.uid)

    def queue_order_key(self, queue: QueueInfo, next_job: JobInfo | None = None) -> tuple[Key, ...]:
        """The queue's place in line; ``next_job``: the job an action would take from it
        next, for the functions registered to weigh it (see ``add_queue_order_fn``)."""
        if self._queue_keys_alone is not None:
            return (*self._queue_keys_alone(queue), queue.created, queue.name)
        keys = [
            fn(queue, next_job) if id(fn) in self._with_next_job else fn(queue)
            for fn in self._queue_keys
        ]
        return (*keys, queue.created, queue.name)

    def task_order_key(self, task: TaskInfo) -> tuple[Key, ...]:
        return (*self._task_keys(task), task.created, task.key, task.uid)

    def predicate(self, task: TaskInfo, idx: np.ndarray) -> tuple[np.ndarray, Failures]:
        """Which of the nodes ``idx`` every predicate of every tier accepts, and why not."""
        failures: Failures = []
        for fn in self._predicates:
            failures.extend(fn(task, idx))
        ok = np.ones(len(idx), dtype=bool)
        for _, failed in failures:
            ok &= ~failed
        return ok, failures

    def lasting(self, template: PodTemplate) -> Lasting:
        """Where pods of ``template`` may never go, as the nodes stand (``Lasting``)."""
        return Lasting.combined([fn(template) for fn in self._lasting])

    def node_scores(self, task: TaskInfo, idx: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(idx))
        for fn in self._node_orders:
            scores += fn(task, idx)
        return scores

    def overused(self, queue: QueueInfo) -> bool:
        return any(fn(queue) for fn in self._overused)

    # job_ready and allocatable: loops, not all() over a generator (one made per call),
    # for they are asked once per task placed.
    def job_ready(self, job: JobInfo) -> bool:
        for fn in self._ready:  # noqa: SIM110
            if not fn(job):
                return False
        return True

    def job_pipelined(self, job: JobInfo) -> bool:
        return all(fn(job) for fn in self._pipelined)

    def job_valid(self, job: JobInfo) -> Invalid | None:
        for fn in self._valid:
            verdict = fn(job)
            if verdict is not None:
                return verdict
        return None

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        for fn in self._allocatable:  # noqa: SIM110
            if not fn(queue, task):
                return False
        return True

    def may_reclaim_for(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """All that answer agree; with none, no queue has a share to take back."""
        return bool(self._reclaimers) and all(fn(queue, task) for fn in self._reclaimers)

    def may_lose(self, queue: QueueInfo, task: TaskInfo) -> bool:
        """All that answer agree; with none, no queue gives anything back."""
        return bool(self._victim_queues) and all(fn(queue, task) for fn in self._victim_queues)

    def may_lose_key(self, task: TaskInfo) -> Hashable:
        """What ``may_lose`` reads of ``task`` (see ``add_victim_queue_fn``), or None."""
        keys = [self._victim_queue_keys.get(id(fn)) for fn in self._victim_queues]
        if any(key is None for key in keys):
            return None
        return tuple(key(task) for key in keys if key is not None)

    @property
    def borrows(self) -> bool:
        """May a queue over its deserved share borrow room at all (``add_lender_fn``)?"""
        return bool(self._lenders)

    def lender(self, queue: QueueInfo, task: TaskInfo) -> str | None:
        """The queue whose unused share ``queue`` may borrow for ``task``, as the first
        function names it, if every function lets it; None otherwise."""
        named: str | None = None
        for fn in self._lenders:
            lender = fn(queue, task)
            if lender is None:
                return None
            named = named or lender
        return named

    def queue_share(self, queue: QueueInfo) -> float:
        return max((fn(queue) for fn in self._queue_shares), default=0.0)

    def job_enqueueable(self, job: JobInfo) -> tuple[Vote, str]:
        """REJECT if any plugin rejects (with its reason), else PERMIT if any permits,
        else WAIT if any says so."""
        verdict: tuple[Vote, str] = (Vote.ABSTAIN, "")
        for fn in self._enqueueable:
            vote, reason = fn(job)
            if vote is Vote.REJECT:
                return vote, reason
            if vote is Vote.PERMIT or (vote is Vote.WAIT and verdict[0] is Vote.ABSTAIN):
                verdict = (vote, reason)
        return verdict

    def enqueued(self, job: JobInfo) -> None:
        """The enqueue action admitted ``job``: plugins update their reservations."""
        for handler in self._enqueue_handlers:
            handler(job)

    def preemptable(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return victims.victims(self._preemptable, preemptor, candidates)

    def reclaimable(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return victims.victims(self._reclaimable, reclaimer, candidates)

    def preemptable_key(self, preemptor: TaskInfo) -> Hashable:
        """What ``preemptable`` reads of ``preemptor`` (see PreemptorKeyFn), or None."""
        keys = self._preemptable_key
        return None if keys is None else keys(preemptor)

    def reclaimable_key(self, reclaimer: TaskInfo) -> Hashable:
        keys = self._reclaimable_key
        return None if keys is None else keys(reclaimer)

    def preemptable_filter(self) -> TaskFilterFn | None:
        """A test every task ``preemptable`` offers passes (None: no such test)."""
        return victims.victims_filter(self._preemptable, self._victim_filters)

    def reclaimable_filter(self) -> TaskFilterFn | None:
        return victims.victims_filter(self._reclaimable, self._victim_filters)


def _calling(fns: list[OrderKeyFn]) -> Callable[[Any], tuple[Key, ...]]:
    """The keys ``fns`` give an item, as a tuple, by a function that calls them in turn:
    a generator over them cost more than the keys themselves, and sorting a backlog's
    jobs and tasks asks tens of thousands."""
    if len(fns) == 1:
        (a,) = fns
        return lambda x: (a(x),)
    if len(fns) == 2:
        a, b = fns
        return lambda x: (a(x), b(x))
    if len(fns) == 3:
        a, b, c = fns
        return lambda x: (a(x), b(x), c(x))
    return lambda x: tuple(fn(x) for fn in fns)
