"""One scheduling cycle: a snapshot, the plugins' functions (``tiers``), and the
bookkeeping that actions drive through a Statement.

The session decides; it sends nothing. What its statements commit (binds,
evictions, nominations) and what its close adds (statuses, events) gather in its
``outcome``, which the runner hands to the backend to apply in one step. Plugins and
actions say why a job did not get what it asked for through the session's methods
(``note_fit_error``, ``note_waiting``, ``set_condition``, ...), read back by the
plugins that word conditions (gang) and by metrics.
"""

import math
import time
from collections.abc import Callable, Iterable

import numpy as np

from kbatch.api.podgroup import PodGroupCondition, PodGroupPhase
from kbatch.config import SchedulerConf
from kbatch.operators.scheduler.core.framework.fit_errors import FitError
from kbatch.operators.scheduler.core.framework.info import (
    NO_NODE,
    SHARE_STATUSES,
    JobInfo,
    KeptStatus,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from kbatch.operators.scheduler.core.framework.kept import KeptAcrossSessions
from kbatch.operators.scheduler.core.framework.outcome import (
    EVICT,
    Bind,
    Event,
    Eviction,
    Nomination,
    ObjectRef,
    Outcome,
    evicted_message,
)
from kbatch.operators.scheduler.core.framework.resources import room_dims
from kbatch.operators.scheduler.core.framework.resting import RestingGangs
from kbatch.operators.scheduler.core.framework.session_stats import SessionStats
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.operators.scheduler.core.framework.tiers import Invalid, TieredFunctions

# Read per task placed and per job: an Enum member read off its class is a Python call
# (3.11), a module name is not.
_PENDING, _BINDING = TaskStatus.PENDING, TaskStatus.BINDING
_NOT_ADMITTED = PodGroupPhase.PENDING


class Session(TieredFunctions):
    def __init__(
        self,
        snapshot: Snapshot,
        conf: SchedulerConf,
        now: float,
        uid: str,
        shortcuts: Shortcuts = ALL,
        kept: KeptAcrossSessions | None = None,
    ) -> None:
        super().__init__(conf)
        # Which shortcuts the session and its plugins and actions take (the scheduler's).
        self.shortcuts = shortcuts
        # What its plugins keep for the next session (the scheduler's; None: a new one,
        # kept by nothing after this session).
        self.kept = KeptAcrossSessions() if kept is None else kept
        self.dims = snapshot.dims
        self.nodes = snapshot.nodes
        self.jobs = snapshot.jobs
        self.queues = snapshot.queues
        self.orphans = snapshot.orphans
        self.refused_groups = snapshot.refused_groups
        self.foreign_groups = snapshot.foreign_groups
        self.job_deadlines = snapshot.job_deadlines
        self.non_preempting = snapshot.non_preempting
        self.namespace_labels = snapshot.namespace_labels  # (pod affinity's namespaceSelector)
        self.node_images = snapshot.node_images  # (nodeorder's image locality)
        self.node_volumes = snapshot.node_volumes
        self.node_devices = snapshot.node_devices
        # What changed since the snapshot before this one (None: none to compare with).
        self.delta = snapshot.delta
        self.now = now
        self.uid = uid
        # The first time after ``now`` when what a plugin decides by the clock changes
        # (``wake_at``): until then, a session on the same snapshot decides the same.
        self.wakes_at = math.inf
        self.stats = SessionStats()
        self.total = self.nodes.capacity
        self.room_dims = room_dims(self.dims)  # what a node's room is checked in
        self.outcome = Outcome()
        # Told the binds of each statement as it commits, before the session ends (None:
        # nobody): a live backend may send a long session's first binds at once. The
        # outcome still lists them, for ``apply``.
        self.committed_binds: Callable[[list[Bind]], None] | None = None
        # Grows with every task status change: session state as plugins read it.
        self.changes = 0
        # Pods on nodes carrying required anti-affinity terms (``anti_affinity_pods``),
        # counted when first asked: a session that places nothing never asks (the
        # shortcut off: counted at open).
        self._anti_affinity_pods: int | None = (
            None if shortcuts.count_anti_affinity_when_asked else self._count_anti()
        )
        # Why jobs did not get what they asked for (see the notes below).
        self._fit_errors: dict[str, dict[str, FitError]] = {}  # job -> task -> reasons
        self._waiting: dict[str, str] = {}  # job -> why, in words
        self._held_by_queue: set[str] = set()  # jobs whose queue, not the cluster, holds them
        self._invalid: dict[str, Invalid] = {}
        # Jobs whose verdict keeps them out even before they have pods (a namespace the
        # queue's spec.namespaceSelector does not select): enqueue admits none of them.
        self.barred: set[str] = set()
        self._conditions: dict[str, list[PodGroupCondition]] = {}
        # Room kept this session for a job waiting for nodes to drain (the reserve
        # action): its tasks' nominations do not expire at close.
        self._draining: dict[str, str] = {}  # job -> why, in words
        # Tasks an action plans on nodes without placing them (reserve, while it plans a
        # job's room): checks that read the pods of other nodes count them as placed
        # there (``plugins.pod_affinity``: pod affinity, topology spread, host ports), as
        # kube-scheduler counts nominated pods.
        self.planned: list[tuple[TaskInfo, int]] = []
        self._drain_tasks: set[str] = set()
        # Running gangs found at open as the last close left them (``job_status.quiet_gang``):
        # valid and ready, with the condition set on them then, unless the session touches them;
        # those that rest (``resting``) are not among them.
        self.quiet: dict[str, KeptStatus] = {}
        # Jobs that rest (``framework.resting``), the others in the snapshot's
        # order (``active_jobs``), and the jobs this session touched, in the order it
        # first did: set at open (``rest``).
        self.resting = RestingGangs()
        self._active: list[JobInfo] | None = None  # None: every job (no ``rest``)
        self._first_touched: list[JobInfo] = []
        self._woken = 0  # of ``_first_touched``, those looked at for resting ones

    @property
    def anti_affinity_pods(self) -> int:
        """Pods on the nodes carrying required anti-affinity terms: while there are any, a
        placement can change what other nodes accept (see placement.Placer)."""
        if self._anti_affinity_pods is None:
            self._anti_affinity_pods = self._count_anti()
        return self._anti_affinity_pods

    def _count_anti(self) -> int:
        """``anti_affinity_pods`` as the nodes' tasks stand (``set_status`` keeps it
        current once counted: a task is on its node's tasks exactly while it has one):
        the node set's count (``NodeSet.count_anti_required``)."""
        if self.shortcuts.count_anti_affinity_by_node_set:
            return self.nodes.count_anti_required()
        return sum(
            1
            for info in self.nodes.infos
            for task in info.tasks.values()
            if task.template.affinity.anti_required
        )

    def rest(self, resting: RestingGangs, active: list[JobInfo]) -> None:
        """At open: ``resting`` rest, ``active`` (the others, in order) do not."""
        self.resting, self._active = resting, active

    def active_jobs(self) -> list[JobInfo]:
        """The jobs, in order, less those resting untouched: what a pass over the jobs
        walks when a resting job has nothing to tell it (``framework.resting``)."""
        if self._active is None:
            self._active = list(self.jobs.values())
        if self._woken < len(self._first_touched):
            self._wake(self._active, self._first_touched[self._woken :])
            self._woken = len(self._first_touched)
        return self._active

    def _wake(self, active: list[JobInfo], touched: list[JobInfo]) -> None:
        woken = [job for job in touched if job.uid in self.resting.jobs]
        if not woken:
            return
        self.resting.wake([job.uid for job in woken])
        place = {uid: i for i, uid in enumerate(self.jobs)}
        self._active = sorted([*active, *woken], key=lambda job: place[job.uid])

    def resting_in(self, queue: str) -> int:
        """Jobs of ``queue`` resting untouched (each a Running PodGroup)."""
        self.active_jobs()  # wakes those touched
        return self.resting.by_queue[queue]

    def _touch(self, job: JobInfo) -> None:
        if not job.touched:
            self._first_touched.append(job)
            job.touch()

    def jobs_to_place(self) -> list[JobInfo]:
        """Jobs that placing actions work on: valid, admitted, in a known queue, with
        pending tasks. (Pending PodGroups wait for the enqueue action when it is
        configured; without it, as in kube-batch, every group may be placed.)"""
        gate = "enqueue" in self.conf.actions
        return [
            job
            for job in self.active_jobs()
            if job.counts[_PENDING]
            and job.uid not in self._invalid
            and job.queue in self.queues
            and not (gate and job.phase is _NOT_ADMITTED)
        ]

    def job_of(self, task: TaskInfo) -> JobInfo:
        return self.jobs[task.job]

    def set_status(self, task: TaskInfo, status: TaskStatus, node: int = NO_NODE) -> None:
        """Move a task to a new status (and node), keeping job, node and plugins current."""
        for changing in self._changing:
            changing(task, status)
        job = self.jobs[task.job]
        if not job.touched:  # (``_touch``, inline: every status change of every session)
            self._first_touched.append(job)
        self.changes += 1
        old_node, old = task.node, task.status
        if task.nominated != NO_NODE and (old is _PENDING) != (
            status is _PENDING
        ):  # placed, its kept room is its own again; back to pending, kept again
            self.nodes.reserve(task, -1.0 if old is _PENDING else 1.0)
        was = old in SHARE_STATUSES
        if old_node != NO_NODE:
            self.nodes.remove(task, old_node)
        job.set_status(task, status)
        if status is _PENDING:
            task.node = NO_NODE
        elif node != NO_NODE:
            task.node = node
        if task.node != NO_NODE:
            self.nodes.place(task, task.node)
        now = status in SHARE_STATUSES
        if (
            self._anti_affinity_pods is not None
            and task.template.affinity.anti_required
            and (old_node == NO_NODE) != (task.node == NO_NODE)
        ):
            self._anti_affinity_pods += 1 if task.node != NO_NODE else -1
        if now and not was:
            for on_allocate, _ in self._handlers:
                if on_allocate is not None:
                    on_allocate(task)
        elif was and not now:
            for _, on_deallocate in self._handlers:
                if on_deallocate is not None:
                    on_deallocate(task)

    def dispatch(self, task: TaskInfo) -> None:
        """Send an allocated task to its node (Statement.commit)."""
        job = self.jobs[task.job]
        self._touch(job)
        job.set_status(task, _BINDING)
        self.outcome.binds.append(Bind(task, self.nodes.names[task.node]))
        self.stats.binds += 1
        if task.created:
            self.stats.task_latencies.append(max(self.now - task.created, 0.0))

    def nominate(self, task: TaskInfo, node: int) -> None:
        """Keep ``node``'s room for ``task`` in the sessions to come (Statement.commit: it
        evicted others to make that room)."""
        self.outcome.nominations.append(Nomination(task, self.nodes.names[node]))

    def wake_at(self, when: float) -> None:
        """What a plugin decides by the clock changes at ``when`` (after ``now``): a
        lifetime's end, say. ``wakes_at`` is the first such time."""
        if self.now < when < self.wakes_at:
            self.wakes_at = when

    def any_room_kept(self) -> bool:
        """Is room kept on any node for a nominated task? (rarely: a cheap test first)"""
        return self.nodes.kept > 0

    def unkeep(self, task: TaskInfo) -> int:
        """Stop keeping room for pending ``task`` on its nominated node, in this session
        only; the node it was kept on."""
        node = task.nominated
        self.nodes.reserve(task, -1.0)
        task.nominated = NO_NODE
        self._touch(self.jobs[task.job])
        self.changes += 1
        return node

    def keep(self, task: TaskInfo, node: int) -> None:
        """Keep room for pending ``task`` on ``node`` again (a discarded claim)."""
        task.nominated = node
        self._touch(self.jobs[task.job])
        self.nodes.reserve(task, 1.0)
        self.changes += 1

    def keep_draining(self, task: TaskInfo, why: str) -> None:
        """The room kept for pending ``task`` while its node drains stays kept at close,
        and its job waits for ``why`` (Statement.commit of a drain)."""
        self._drain_tasks.add(task.uid)
        self._draining[task.job] = why

    def draining_reason(self, job: JobInfo) -> str | None:
        """Why ``job`` waits with room kept for it (which nodes drain), or None."""
        return self._draining.get(job.uid)

    def evict_now(self, task: TaskInfo, reason: str, disruption: str) -> None:
        """Send an eviction (Statement.commit); the task is already Releasing."""
        self.outcome.evictions.append(Eviction(task, reason, disruption))
        self.stats.evictions += 1
        self.stats.preemption_victims += 1  # counted when sent: never a discarded try's
        job = self.jobs[task.job]
        message = evicted_message(task.key, reason)
        self.record_event(ObjectRef("Pod", task.namespace, task.name), "Normal", EVICT, message)
        if job.has_pod_group:
            self.record_event(
                ObjectRef("PodGroup", job.namespace, job.name), "Normal", EVICT, message
            )

    def record_event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.outcome.event(ref, type_, reason, message)

    def record_events(self, events: Iterable[Event]) -> None:
        """Many events at once: a backlog's waiting pods each get one saying why, every session."""
        self.outcome.events.extend(events)

    # ----------------------------------------------------------------- why not, in words
    def set_condition(self, job: JobInfo, condition: PodGroupCondition) -> None:
        """A condition for the job's PodGroup status at close (gang words them)."""
        self._conditions.setdefault(job.uid, []).append(condition)

    def conditions_of(self, job: JobInfo) -> list[PodGroupCondition]:
        conditions = self._conditions.get(job.uid)
        if conditions is not None:
            return conditions
        if job.uid in self.resting.jobs and not job.touched and job.kept_status is not None:
            return [job.kept_status.condition]  # what gang's close would set
        return []

    def note_fit_error(self, job: JobInfo, task: TaskInfo, reasons: FitError) -> None:
        """No node took ``task``: why, node by node (reason -> number of nodes)."""
        self._fit_errors.setdefault(job.uid, {})[task.uid] = reasons

    def fit_errors_of(self, job: JobInfo) -> dict[str, FitError]:
        return self._fit_errors.get(job.uid, {})

    def note_waiting(
        self, job: JobInfo, why: str, first: bool = False, by_queue: bool = False
    ) -> None:
        """Why ``job`` did not get what it asked for, in words (``first``: unless an
        earlier step already said why); ``by_queue``: its queue holds it (its share, its
        capability, its state), not the cluster's size, so more nodes would not help."""
        if first and job.uid in self._waiting:
            return
        self._waiting[job.uid] = why
        if by_queue:
            self._held_by_queue.add(job.uid)
        else:
            self._held_by_queue.discard(job.uid)

    def waiting_reason(self, job: JobInfo) -> str | None:
        return self._waiting.get(job.uid)

    def held_by_queue(self, job: JobInfo) -> bool:
        """Does ``job`` wait for its queue (see ``note_waiting``)?"""
        return job.uid in self._held_by_queue

    def invalidate(self, job: JobInfo, verdict: Invalid, barred: bool = False) -> None:
        """``job`` may not be scheduled at all (job_valid, or the framework's own checks);
        ``barred``: nor admitted, even while it has no pods (``barred``)."""
        self._invalid[job.uid] = verdict
        if barred:
            self.barred.add(job.uid)

    def invalid_reason(self, job: JobInfo) -> Invalid | None:
        return self._invalid.get(job.uid)

    def unschedulable(self, job: JobInfo) -> bool:
        """Was ``job`` found invalid, or a task of it without a node, this session?"""
        return job.uid in self._invalid or job.uid in self._fit_errors

    def note_attempts(self, scheduled: int = 0, unschedulable: int = 0) -> None:
        self.stats.attempts["scheduled"] += scheduled
        self.stats.attempts["unschedulable"] += unschedulable

    def note_preemption_attempt(self) -> None:
        self.stats.preemption_attempts += 1

    # ----------------------------------------------------------------- close
    def close(self) -> Outcome:
        """Run the plugins' close functions; the outcome so far (the runner adds the
        statuses, ``job_status.publish``)."""
        self._expire_nominations()
        for name, closer in self._closers:
            started = time.perf_counter()
            closer(self)
            self.stats.plugin_close_seconds[name] = time.perf_counter() - started
        return self.outcome

    def _expire_nominations(self) -> None:
        """A task kept room on a node while its victims were leaving; once nothing is
        leaving there and it still was not placed, the room goes back to everyone, in
        the cluster too (else a job that cannot run after all would hold it for ever).
        Room the reserve action kept this session for a drain stays kept."""
        if not self.any_room_kept():
            return
        # (nothing is kept for a job with no task pending: most of a busy cluster's, whose
        # tasks this skips without a look, and every resting one, which this does not
        # walk; the rest in their order, as ever)
        leaving = np.any(self.nodes.releasing, axis=1).tolist()
        drain_tasks = self._drain_tasks
        for job in self.active_jobs():
            if not job.counts[_PENDING]:
                continue
            for task in job.tasks.values():
                node = task.nominated
                if node == NO_NODE or task.status is not _PENDING or task.uid in drain_tasks:
                    continue
                if not leaving[node]:
                    self.unkeep(task)
                    self.outcome.nominations.append(Nomination(task, None))
