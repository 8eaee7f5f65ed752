"""Scheduler-side models: tasks, jobs and queues (the node set: ``nodes``).

Kept apart from the CRD types: the cluster layer builds them for each
session's snapshot; actions change them only through a Statement.
"""

import operator
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING

import numpy as np

from kbatch.api.podgroup import PodGroupCondition, PodGroupPhase, PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.api.selector import LabelSelector
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate

if TYPE_CHECKING:
    from kbatch.operators.scheduler.core.framework.outcome import Event


class TaskStatus(IntEnum):
    PENDING = 0
    ALLOCATED = 1
    PIPELINED = 2
    BINDING = 3
    BOUND = 4
    RUNNING = 5
    RELEASING = 6
    SUCCEEDED = 7
    FAILED = 8
    UNKNOWN = 9


STATUS_COUNT = len(TaskStatus)  # (len of an Enum class is a Python call: once, not per job)

# The task's pod is on a node, or sent there: what a PodGroup counts as scheduled.
SCHEDULED_STATUSES = frozenset({TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING})
# Placed on a node, in this session or before: the job's allocation (kube-batch's
# AllocatedStatus).
PLACED_STATUSES = SCHEDULED_STATUSES | {TaskStatus.ALLOCATED}
# What the plugins count into a job's and a queue's share: placed, or promised room on a
# node that is being freed (pipelined).
SHARE_STATUSES = PLACED_STATUSES | {TaskStatus.PIPELINED}
# Statuses that occupy a node's resources now.
OCCUPYING_STATUSES = PLACED_STATUSES | {TaskStatus.RELEASING}
# Statuses that make a gang member count toward readiness.
READY_STATUSES = PLACED_STATUSES | {TaskStatus.SUCCEEDED}
FINISHED_STATUSES = frozenset({TaskStatus.SUCCEEDED, TaskStatus.FAILED})
# A job's counts of its tasks that can no longer take part in its gang.
_unusable_counts = operator.itemgetter(TaskStatus.FAILED, TaskStatus.UNKNOWN, TaskStatus.RELEASING)

NO_NODE = -1

# A PodGroup's topology request (DESIGN §12; framework/topology.py places it).
REQUIRED, PREFERRED = "required", "preferred"


@dataclass(frozen=True, slots=True)
class JobDeadline:
    """A batch/v1 Job's ``spec.activeDeadlineSeconds``: the job controller ends the Job's
    pods ``seconds`` after the Job started (``started``: its ``status.startTime``; None
    while it has none, as when suspended: the count starts at its release, which is
    before any pod it then makes starts)."""

    seconds: float
    started: float | None


@dataclass(frozen=True, slots=True)
class TopologyRequest:
    mode: str  # REQUIRED (one domain, or wait) or PREFERRED (one domain if one holds it)
    level: str  # a node label key


@dataclass(eq=False, slots=True)
class TaskInfo:
    """One pod. ``job`` is the owning job's uid ('' for a pod that is not ours)."""

    uid: str
    namespace: str
    name: str
    job: str
    template: PodTemplate
    status: TaskStatus = TaskStatus.PENDING
    node: int = NO_NODE
    priority: int = 0
    created: float = 0.0
    started: float | None = None  # its pod's status.startTime (None: not started)
    critical: bool = False  # system-cluster-critical / system-node-critical priority class
    # A pending task that evicted others to make room on this node (its pod's
    # status.nominatedNodeName): the room is kept for it there (NodeSet.reserve).
    nominated: int = NO_NODE
    role: str = ""  # its role in the gang (kbatch.io/task), counted for minTaskMember
    # its pod's PodScheduled condition as (status, reason, message); None: it has none
    scheduled_condition: tuple[str, str, str] | None = None
    # its pod's spec.activeDeadlineSeconds: the kubelet stops it this long after it
    # started (None: it may run for ever); what reserve lets into kept room (DESIGN §11)
    walltime: float | None = None
    # The uid of the batch/v1 Job that controls its pod ('' for none): the Job's own
    # deadline (``Snapshot.job_deadlines``) ends it too.
    owner_job: str = ""
    # The FailedScheduling event last recorded for its pod (``outcome.failed_scheduling``):
    # a backlog's pod that waits for the same reason again is given the same (frozen)
    # event, not a new one every session. Not part of what the task is.
    last_event: "Event | None" = field(default=None, compare=False)
    # "namespace/name": made once, not at each of the many asks (every task order key)
    key: str = field(init=False, compare=False)
    # Its pod's place in the order snapshots list pods, once a snapshot's builder looked
    # it up (-1: not yet); it holds while the task does (a pod applied again after it
    # was deleted is another task). Not part of what the task is.
    place: int = field(default=-1, init=False, compare=False)

    def __post_init__(self) -> None:
        self.key = f"{self.namespace}/{self.name}"

    @property
    def request(self) -> np.ndarray:
        return self.template.request


@dataclass(frozen=True, slots=True)
class GatedPods:
    """A job's pods held by their scheduling gates (``spec.schedulingGates``), which are
    not its tasks until the gates are removed: how many, and the gates (sorted)."""

    count: int
    gates: tuple[str, ...]

    def words(self) -> str:
        pods = "1 pod waits" if self.count == 1 else f"{self.count} pods wait"
        return f"{pods} for scheduling gates to be removed: {', '.join(self.gates)}"


@dataclass(eq=False, slots=True)
class JobInfo:
    """A PodGroup (or the implicit group of one pod) and its tasks."""

    uid: str
    namespace: str
    name: str
    queue: str
    min_member: int
    created: float
    dims_len: int
    priority: int = 0
    min_resources: np.ndarray | None = None
    # kbatch.io/lifetime in seconds (DESIGN §11): None, not preemptible for fair share
    lifetime: float | None = None
    # spec.minTaskMember (DESIGN §12): role -> pods of that role that must run too
    min_task_member: Mapping[str, int] = field(default_factory=dict)
    # kbatch.io/topology-required / -preferred (DESIGN §12): ("required", LEVEL), ...
    topology: TopologyRequest | None = None
    phase: PodGroupPhase = PodGroupPhase.PENDING
    conditions: tuple[PodGroupCondition, ...] = ()
    old_status: PodGroupStatus | None = None  # as last written, for change detection
    has_pod_group: bool = True  # False for a pod's implicit group of one
    pod_group_missing: bool = False  # pods name a PodGroup that does not exist (yet)
    gated: GatedPods | None = None  # pods of it held by scheduling gates (set by snapshots)
    tasks: dict[str, TaskInfo] = field(default_factory=dict)
    counts: list[int] = field(default_factory=lambda: [0] * STATUS_COUNT)
    # Tasks in READY_STATUSES, kept with ``counts`` (gang asks after every placement).
    ready_count: int = field(default=0, init=False)
    allocated: np.ndarray = field(init=False)
    total_request: np.ndarray = field(init=False)
    # What the last session's close found its status to stay (``job_status``): the one
    # condition set on it that session and the status it kept. Only a job kept from one snapshot
    # to the next (one no session touched) meets it again; not part of what the job is.
    kept_status: "KeptStatus | None" = field(default=None, init=False, compare=False)
    # A session changed one of its tasks (status, node or nominated node: ``set_status``
    # here, ``Session.keep``/``unkeep``): the snapshot builder makes it anew, where it
    # would keep an untouched job of an unchanged unit (kbatch.cluster.reuse.kept_jobs).
    touched: bool = field(default=False, init=False, compare=False)
    # Where to say that a session touched it or moved its phase: the list of uids kept by
    # the snapshot builder that made it, which makes its next snapshot's jobs from its
    # last one's by them (kbatch.cluster.reuse.kept_jobs). None: nobody asks.
    change_log: list[str] | None = field(default=None, init=False, compare=False, repr=False)

    def touch(self) -> None:
        """A session changed one of its tasks other than by ``set_status``."""
        if not self.touched:
            self.touched = True
            self.changed()

    def changed(self) -> None:
        """A session touched it or moved its phase: tell its ``change_log``."""
        if self.change_log is not None:
            self.change_log.append(self.uid)

    def protected_until(self) -> float | None:
        """When its lifetime ends: its first pod's start plus its lifetime (None: no
        lifetime, or no pod started)."""
        started = [t.started for t in self.tasks.values() if t.started is not None]
        if self.lifetime is None or not started:
            return None
        return min(started) + self.lifetime

    def __post_init__(self) -> None:
        self.allocated = np.zeros(self.dims_len)
        self.total_request = np.zeros(self.dims_len)

    def add_task(self, task: TaskInfo) -> None:
        self.tasks[task.uid] = task
        self.counts[task.status] += 1
        self.ready_count += task.status in READY_STATUSES
        if task.status in PLACED_STATUSES:
            self.allocated += task.request
        if task.status not in FINISHED_STATUSES:
            self.total_request += task.request

    def set_status(self, task: TaskInfo, status: TaskStatus) -> None:
        """Move ``task`` to ``status``, keeping the counts and the allocation current."""
        if not self.touched:  # (``touch``, inline: every status change of every session)
            self.touched = True
            if self.change_log is not None:
                self.change_log.append(self.uid)
        old = task.status
        self.counts[old] -= 1
        self.counts[status] += 1
        self.ready_count += (status in READY_STATUSES) - (old in READY_STATUSES)
        was, now = old in PLACED_STATUSES, status in PLACED_STATUSES
        if was and not now:
            self.allocated -= task.request
        elif now and not was:
            self.allocated += task.request
        task.status = status

    def count(self, *statuses: TaskStatus) -> int:
        return sum(self.counts[s] for s in statuses)

    @property
    def valid_count(self) -> int:
        """Tasks that can still take part in the gang (all but Failed/Unknown/Releasing)."""
        return len(self.tasks) - sum(_unusable_counts(self.counts))

    def role_count(self, role: str, statuses: Collection[TaskStatus]) -> int:
        return sum(1 for t in self.tasks.values() if t.role == role and t.status in statuses)

    def minimum_unplaced(self) -> np.ndarray | None:
        """What of its minResources the job does not hold yet (None: it names none): what
        an admitted group was promised and still waits for."""
        if self.min_resources is None:
            return None
        return np.maximum(self.min_resources - self.allocated, 0.0)

    def below_minimum(self) -> bool:
        """Some of it placed, but fewer than minMember, or a role below its minimum: a
        gang broken (an eviction must never leave one so)."""
        ready = self.ready_count
        if ready == 0:
            return False
        if ready < self.min_member:
            return True
        return any(
            self.role_count(role, READY_STATUSES) < minimum
            for role, minimum in self.min_task_member.items()
        )

    def can_lose(self, task: TaskInfo) -> bool:
        """Would the job still hold minMember and every role's minimum without ``task``?"""
        if self.ready_count - 1 < self.min_member:
            return False
        minimum = self.min_task_member.get(task.role)
        return minimum is None or self.role_count(task.role, READY_STATUSES) - 1 >= minimum

    def tasks_with(self, *statuses: TaskStatus) -> list[TaskInfo]:
        wanted = set(statuses)
        return [t for t in self.tasks.values() if t.status in wanted]


@dataclass(frozen=True, slots=True)
class KeptStatus:
    """A job's status that a session's close kept as it was (``JobInfo.kept_status``)."""

    condition: PodGroupCondition  # the one condition set on the job that session
    phase: PodGroupPhase  # its phase then
    status: PodGroupStatus  # its old status, kept
    # What the rest of that session found, for ``job_status.quiet_gang``: that the one
    # condition set was Scheduled (so it found the job valid and ready), under which
    # scheduler conf, and its tasks in READY_STATUSES and in all then.
    scheduled: bool
    conf: object
    ready: int
    size: int


@dataclass(slots=True)
class TaskRequests:
    """Tasks' requests to add to their jobs' ``allocated`` (the placed ones) and
    ``total_request`` (the unfinished ones) at once, as runs in the order the tasks were
    added: (row: the job's index in the ``owners`` given to ``add_to``, the request's
    index in ``distinct``, how many tasks in a row add it). Consecutive pods of a gang
    mostly share a job and a template, so a run stands for many tasks: the pass over the
    pods counts instead of appending per task, and the sums repeat each run's request as
    many times, in the same order (the same additions). Most tasks share a few template
    requests: each distinct array is copied once, the rest picked by index."""

    distinct: list[np.ndarray] = field(default_factory=list)
    placed_rows: list[int] = field(default_factory=list)
    placed: list[int] = field(default_factory=list)
    placed_counts: list[int] = field(default_factory=list)
    unfinished_rows: list[int] = field(default_factory=list)
    unfinished: list[int] = field(default_factory=list)
    unfinished_counts: list[int] = field(default_factory=list)
    _indices: dict[int, int] = field(default_factory=dict)  # id(request) -> its index

    def index(self, request: np.ndarray) -> int:
        """The index of ``request`` in ``distinct`` (added if new)."""
        at = self._indices.get(id(request))
        if at is None:
            at = self._indices[id(request)] = len(self.distinct)
            self.distinct.append(request)
        return at

    def add(self, row: int, at: int, count: int, placed: bool, unfinished: bool) -> None:
        """``count`` tasks in a row of the job in ``row`` with the request ``at``, to add to
        its ``allocated`` if ``placed`` and its ``total_request`` if ``unfinished``."""
        if placed:
            self.placed_rows.append(row)
            self.placed.append(at)
            self.placed_counts.append(count)
        if unfinished:
            self.unfinished_rows.append(row)
            self.unfinished.append(at)
            self.unfinished_counts.append(count)

    def matrix(self, width: int) -> np.ndarray:
        """``distinct`` as a (len × width) matrix."""
        return np.array(self.distinct, dtype=float).reshape(len(self.distinct), width)

    def add_to(self, owners: list[JobInfo], by_bincount: bool = True) -> None:
        """Add the sums to ``owners`` (each job once, in the order of the rows);
        ``by_bincount``: as ``added_in_order`` takes it."""
        if not owners:
            return
        matrix = self.matrix(len(owners[0].allocated))
        allocated = _summed(
            [job.allocated for job in owners],
            (self.placed_rows, self.placed, self.placed_counts),
            matrix,
            by_bincount,
        )
        total_request = _summed(
            [job.total_request for job in owners],
            (self.unfinished_rows, self.unfinished, self.unfinished_counts),
            matrix,
            by_bincount,
        )
        for job, kept, total in zip(owners, allocated, total_request, strict=True):
            job.allocated, job.total_request = kept, total


def _summed(
    starts: list[np.ndarray],
    runs: tuple[list[int], list[int], list[int]],
    matrix: np.ndarray,
    by_bincount: bool = True,
) -> np.ndarray:
    """``starts`` stacked, with row ``picks[i]`` of ``matrix`` added ``counts[i]`` times to
    row ``rows[i]``, run after run (``runs``: rows, picks, counts; the sums ``+=`` one by
    one would give)."""
    out = np.concatenate(starts).astype(float, copy=False).reshape(len(starts), matrix.shape[1])
    rows, picks, counts = runs
    if rows:
        times = np.fromiter(counts, np.intp, len(counts))
        at = np.repeat(np.fromiter(rows, np.intp, len(rows)), times)
        picked = np.repeat(np.fromiter(picks, np.intp, len(picks)), times)
        added_in_order(out, at, matrix[picked], by_bincount)
    return out


def added_in_order(
    out: np.ndarray, rows: np.ndarray, values: np.ndarray, by_bincount: bool = True
) -> None:
    """``np.add.at(out, rows, values)``: row ``i`` of the (n × width) ``values`` added to
    row ``rows[i]`` of ``out``, one at a time in index order (the sums ``+=`` one by one
    would give). Into an ``out`` all +0.0 (a new snapshot's: the common case),
    ``np.bincount`` does the same additions in the same order, several times faster
    (``by_bincount``: ``Shortcuts.sums_by_bincount``; False: by ``np.add.at`` always)."""
    if out.any() or np.signbit(out).any() or not by_bincount:
        np.add.at(out, rows, values)
        return
    for column in range(out.shape[1]):
        out[:, column] = np.bincount(rows, weights=values[:, column], minlength=len(out))


@dataclass(eq=False, slots=True)
class QueueInfo:
    name: str
    weight: int
    created: float
    capability: np.ndarray | None = None
    reclaimable: bool = True
    open: bool = True
    # Its place in the queue tree (DESIGN §14): the parent's name (None: a child of the
    # root), the room kept for its subtree (``spec.guarantee.resource``) and the share
    # it claims before the weights (``spec.deserved``); None where not set.
    parent: str | None = None
    guarantee: np.ndarray | None = None
    claim: np.ndarray | None = None
    # Which namespaces' groups may name it (``spec.namespaceSelector``; None: any). Its
    # ancestors' selectors apply to its groups too.
    namespace_selector: LabelSelector | None = None
    # How far its subtree may go beyond its deserved share by borrowing, and how much of
    # its own unused share may leave its subtree (``spec.borrowingLimit`` /
    # ``spec.lendingLimit``; infinite where not set, None where neither names anything).
    borrowing_limit: np.ndarray | None = None
    lending_limit: np.ndarray | None = None
    # Published by plugins (the proportion plugin: kept current from session open).
    deserved: np.ndarray | None = None
    allocated: np.ndarray | None = None
    request: np.ndarray | None = None
    share: float = 0.0
    old_status: QueueStatus | None = None  # as last written, for change detection
    # Set by the flow plugin at close (DESIGN §11): the flow for the status and when it
    # was measured (epoch seconds); ``flow_due``: worth writing on its own. Without the
    # plugin (None) the status keeps what it had.
    flow: float | None = None
    flow_updated: float | None = None
    flow_due: bool = False
