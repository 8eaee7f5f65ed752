"""The vectorised node set: every node's resources as (nodes × dims) matrices, kept
current as tasks are placed, removed and reserved, with each node's labels, taints and
pods beside them (``NodeInfo``).
"""

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np

from kbatch.operators.scheduler.core.framework.info import (
    FINISHED_STATUSES,
    OCCUPYING_STATUSES,
    PLACED_STATUSES,
    TaskInfo,
    TaskStatus,
    added_in_order,
)
from kbatch.operators.scheduler.core.framework.podspec import HostPort, Taint

# (a member read off its Enum class costs a Python call: these run per placed task)
RELEASING, PIPELINED = TaskStatus.RELEASING, TaskStatus.PIPELINED
# Rows added one by one, up to this many: a session's snapshot places the few tasks of
# the jobs it made anew on rows copied from the last one (``place_again``), and the
# arrays that add many rows at once cost more than a few additions.
_FEW = 8


@dataclass(eq=False, slots=True)
class NodeInfo:
    """The non-vector part of a node: labels, taints, conditions, and its pods."""

    name: str
    labels: dict[str, str]
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    conditions: dict[str, str] = field(default_factory=dict)  # type -> status
    tasks: dict[str, TaskInfo] = field(default_factory=dict)

    def host_ports(self) -> list[HostPort]:
        return [
            port
            for task in self.tasks.values()
            if task.status not in FINISHED_STATUSES
            for port in task.template.host_ports
        ]


class NodeSet:
    """All nodes, sorted by name, with their resources as (nodes × dims) matrices.

    ``used`` holds what occupies a node now (every pod, whatever its scheduler);
    ``releasing`` what is on its way out; ``pipelined`` what is promised to
    tasks waiting for the releasing part; ``nominated`` what is kept for pending
    tasks that evicted others to make room here (no one else may take it).
    ``version[i]`` grows whenever node ``i`` changes, so that per-template results
    can be refreshed node by node; ``changed`` lists the node of every change, in
    order, so that a reader finds what changed since it last looked without comparing
    every node's version.
    """

    def __init__(self, infos: list[NodeInfo], allocatable: np.ndarray) -> None:
        order = sorted(range(len(infos)), key=lambda i: infos[i].name)
        self.infos = [infos[i] for i in order]
        self.names = [info.name for info in self.infos]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.allocatable = allocatable[order] if len(order) else allocatable
        self._capacity: np.ndarray | None = None  # (``capacity``, when first asked)
        # Stands for what the nodes say besides their tasks and rows (names, labels,
        # taints, cordons, conditions), when their maker knows it unchanged: two node sets
        # with the same one (not None) say the same (``of_same_nodes``; the node index
        # is then kept without comparing every node).
        self.static_version: object | None = None
        self._empty()

    @classmethod
    def of_same_nodes(
        cls, last: "NodeSet", allocatable: np.ndarray, capacity: np.ndarray | None = None
    ) -> "NodeSet":
        """A node set of ``last``'s nodes (with this ``allocatable``, in its order), nothing
        placed: the same NodeInfo objects (their tasks as ``last`` has them, until
        ``place_again``), names and index. ``last`` is not to be used after (a snapshot's
        is good until the next is made: ``kbatch.cluster.reuse.kept_nodes``). ``capacity``:
        ``allocatable`` added up, when the caller has it (read-only)."""
        node_set = cls.__new__(cls)
        node_set.infos, node_set.names = last.infos, last.names
        node_set.index, node_set.allocatable = last.index, allocatable
        node_set._capacity = capacity
        node_set.static_version = last.static_version
        node_set._empty()
        return node_set

    def _empty(self) -> None:
        self.used = np.zeros_like(self.allocatable)
        self.releasing = np.zeros_like(self.allocatable)
        self.pipelined = np.zeros_like(self.allocatable)
        self.nominated = np.zeros_like(self.allocatable)
        self.kept = 0  # pending tasks room is kept for (``reserve``)
        # Per node: its tasks whose pods carry required anti-affinity terms, as placed
        # (``place_all``, ``place_again``; ``count_anti_required`` counts them now).
        self.anti_required = np.zeros(len(self.infos), dtype=np.int64)
        # Per node: its tasks of no job (other schedulers' pods), kept current by every
        # placement and removal: most nodes have none, and ``jobless_nodes`` skips them.
        self.jobless = np.zeros(len(self.infos), dtype=np.int64)
        # Per node: is anything pipelined, nominated or releasing there (a row of those
        # not all zero)? Most nodes have none, and their room is simply what is idle.
        self._waits = np.zeros(len(self.infos), dtype=bool)
        self.version = np.zeros(len(self.infos), dtype=np.int64)
        self.changed: list[int] = []
        self.all = np.arange(len(self.infos))
        # Kept current row by row: room for a new allocation now (pipelined tasks hold
        # idle room beyond what is being released) and room once releases are done.
        self.free = self.allocatable.copy()
        self.future = self.allocatable.copy()

    def __len__(self) -> int:
        return len(self.infos)

    def count_anti_required(self) -> int:
        """The tasks on the nodes now whose pods carry required anti-affinity terms: those
        placed, the nodes changed since (``changed``) counted again from their tasks
        (``place`` and ``remove``, once per task placed, do not count)."""
        count = int(self.anti_required.sum())
        for node in set(self.changed):
            count -= int(self.anti_required[node])
            count += sum(
                1
                for task in self.infos[node].tasks.values()
                if task.template.affinity.anti_required
            )
        return count

    def idle(self) -> np.ndarray:
        return self.allocatable - self.used

    def future_idle(self) -> np.ndarray:
        return self.future

    def place(self, task: TaskInfo, node: int) -> None:
        """Account ``task`` (in its current status) on ``node``."""
        tasks = self.infos[node].tasks
        if not task.job and task.uid not in tasks:
            self.jobless[node] += 1
        tasks[task.uid] = task
        status = task.status
        if status in PLACED_STATUSES and not self._waits[node]:
            # ``_account`` of an allocation where nothing waits, inline (once per task a
            # session places): the same additions and rows.
            used = self.used[node]  # (a view: added to in place)
            used += task.request
            self.free[node] = self.future[node] = self.allocatable[node] - used
            self.version[node] += 1
            self.changed.append(node)
            return
        self._account(task, node, +1.0)

    def place_all(
        self,
        placed: Sequence[TaskInfo],
        reserved: Sequence[TaskInfo] = (),
        by_bincount: bool = True,
    ) -> None:
        """``place(task, task.node)`` for each of ``placed`` and ``reserve(task, 1.0)`` for
        each of ``reserved``, in order and with the same sums to the bit, but the rows
        worked out once: how a snapshot puts its pods on its nodes. Unlike ``place``, no
        version moves and no change is logged (nothing has seen these nodes yet).
        ``by_bincount``: as ``added_in_order`` takes it."""
        self._add_all(placed, reserved, by_bincount)
        self.kept += len(reserved)
        self._refresh_rows(self.all)

    def place_again(
        self,
        placed_before: "PlacedRows",
        nodes: Sequence[int],
        placed: Sequence[TaskInfo],
        reserved: Sequence[TaskInfo],
        kept: int,
        by_bincount: bool = True,
    ) -> None:
        """``place_all`` of a snapshot's tasks when, on every node but ``nodes``, they are
        the tasks (the same objects, in the same order and statuses) that another node
        set of the same nodes had placed as ``placed_before``, and each of those nodes'
        NodeInfo holds them still: the rows of the others are copied, the tasks of
        ``nodes`` (``placed`` and ``reserved``, in order: all that are there) placed
        anew. ``kept``: how many pending tasks have room kept, on any node. The same
        rows, to the bit, and the same tasks in each node's NodeInfo, as ``place_all``
        of them all."""
        for matrix, before in zip(self._placed_matrices(), placed_before.matrices, strict=True):
            np.copyto(matrix, before)
        np.copyto(self.anti_required, placed_before.anti_required)
        np.copyto(self.jobless, placed_before.jobless)
        # What the rows give (``_refresh_rows``) is row by row: the others' is copied too.
        for derived, before in zip(self._derived(), placed_before.derived, strict=True):
            np.copyto(derived, before)
        if len(nodes):
            at = np.fromiter(nodes, np.intp, len(nodes))
            for matrix in self._placed_matrices():
                matrix[at] = 0.0
            self.anti_required[at] = 0
            self.jobless[at] = 0
            infos = self.infos
            for node in nodes:
                infos[node].tasks = {}
            self._add_all(placed, reserved, by_bincount)
            self._refresh_rows(at)
        self.kept = kept

    def _derived(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._waits, self.free, self.future

    def _placed_matrices(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.used, self.releasing, self.pipelined, self.nominated

    def placed_rows(self) -> "PlacedRows":
        """A copy of what is placed and reserved on every node now (for ``place_again``)."""
        used, releasing, pipelined, nominated = self._placed_matrices()
        waits, free, future = self._derived()
        return PlacedRows(
            (used.copy(), releasing.copy(), pipelined.copy(), nominated.copy()),
            self.anti_required.copy(),
            self.jobless.copy(),
            (waits.copy(), free.copy(), future.copy()),
        )

    def _add_all(
        self, placed: Sequence[TaskInfo], reserved: Sequence[TaskInfo], by_bincount: bool
    ) -> None:
        """Put ``placed`` on their nodes and add them, and the room of ``reserved``, to the
        rows, in order (the rows of their nodes as ``place`` would leave them if they
        were all zero before)."""
        infos = self.infos
        for task in placed:
            infos[task.node].tasks[task.uid] = task
        anti = [task.node for task in placed if task.template.affinity.anti_required]
        if anti:
            np.add.at(self.anti_required, np.fromiter(anti, np.intp, len(anti)), 1)
        jobless = [task.node for task in placed if not task.job]
        if jobless:
            np.add.at(self.jobless, np.fromiter(jobless, np.intp, len(jobless)), 1)
        # The tasks each matrix adds, in order (a comprehension each: a busy cluster's
        # snapshot places every running pod, every session).
        using = [task for task in placed if task.status in OCCUPYING_STATUSES]
        releasing = [task for task in placed if task.status is RELEASING]
        pipelined = [task for task in placed if task.status is PIPELINED]
        nominated = ([task.nominated for task in reserved], [task.request for task in reserved])
        for matrix, (rows, values) in (
            (self.used, _on_nodes(using)),
            (self.releasing, _on_nodes(releasing)),
            (self.pipelined, _on_nodes(pipelined)),
            (self.nominated, nominated),
        ):
            if len(rows) > _FEW:
                at = np.fromiter(rows, np.intp, len(rows))
                added_in_order(matrix, at, _stacked(values, matrix.shape[1]), by_bincount)
            else:  # in turn: the same additions, without making the arrays for them
                for row, value in zip(rows, values, strict=True):
                    matrix[row] += value

    def _refresh_rows(self, at: np.ndarray) -> None:
        """``_waits``, ``free`` and ``future`` of the nodes ``at`` from their rows (what
        ``_refresh`` of each would give)."""
        waits = self.pipelined[at].any(axis=1)
        waits |= self.nominated[at].any(axis=1)
        waits |= self.releasing[at].any(axis=1)
        self._waits[at] = waits
        free = self.allocatable[at] - self.used[at]
        self.free[at] = free
        self.future[at] = free
        waiting = at[waits]
        if len(waiting):
            self.free[waiting], self.future[waiting] = self._room(waiting, self.used[waiting])

    def remove(self, task: TaskInfo, node: int) -> None:
        self._account(task, node, -1.0)
        if self.infos[node].tasks.pop(task.uid, None) is not None and not task.job:
            self.jobless[node] -= 1

    def jobless_nodes(self) -> list[int]:
        """The nodes holding a task of no job (another scheduler's pod), in order."""
        return np.flatnonzero(self.jobless).tolist()

    def held_by_others(self) -> np.ndarray:
        """Per node: what tasks of no job (other schedulers' pods, which may never end)
        hold there."""
        held = np.zeros_like(self.allocatable)
        for i in self.jobless_nodes():  # (most nodes hold none)
            for task in self.infos[i].tasks.values():
                if not task.job and task.status in OCCUPYING_STATUSES:
                    held[i] += task.request
        return held

    def reserve(self, task: TaskInfo, sign: float) -> None:
        """Keep (+1) or give back (-1) the room of ``task`` on its nominated node."""
        self.nominated[task.nominated] += sign * task.request
        self.kept += 1 if sign > 0 else -1
        self._waiting_changed(task.nominated)
        self._refresh(task.nominated)

    def _account(self, task: TaskInfo, node: int, sign: float) -> None:
        status = task.status
        change = task.request if sign > 0 else -task.request  # sign * request, to the bit
        if status in OCCUPYING_STATUSES:
            self.used[node] += change
        if status is RELEASING:
            self.releasing[node] += change
            self._waiting_changed(node)
        elif status is PIPELINED:
            self.pipelined[node] += change
            self._waiting_changed(node)
        self._refresh(node)

    def _waiting_changed(self, node: int) -> None:
        self._waits[node] = bool(
            self.pipelined[node].any() or self.nominated[node].any() or self.releasing[node].any()
        )

    def _refresh(self, node: int) -> None:
        if self._waits[node]:
            self.free[node], self.future[node] = self._room(node, self.used[node])
        else:  # what _room gives when nothing waits, without working out the zeros
            self.free[node] = self.future[node] = self.allocatable[node] - self.used[node]
        self.version[node] += 1
        self.changed.append(node)

    def _room(self, node: int | np.ndarray, used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Room for a new allocation now, and once releases are done, on ``node`` (a node
        or an index array) if it held ``used``."""
        idle = self.allocatable[node] - used
        waiting = self.pipelined[node] + self.nominated[node] - self.releasing[node]
        return idle - np.maximum(waiting, 0), idle - waiting

    @contextmanager
    def assumed(self, idx: np.ndarray, request: np.ndarray) -> Iterator[None]:
        """Within the block, the nodes ``idx`` are as they would be with one more task
        asking ``request`` allocated on each (to ask the plugins about that); afterwards
        exactly as they were. Nothing is recorded as changed: versions do not move."""
        saved = (
            self.used.take(idx, axis=0),
            self.free.take(idx, axis=0),
            self.future.take(idx, axis=0),
        )
        used = saved[0] + request  # what ``place`` adds, to the bit
        self.used[idx] = used
        if self._waits.take(idx).any():
            self.free[idx], self.future[idx] = self._room(idx, used)
        else:  # what _room gives when nothing waits (as ``_refresh`` has it)
            self.free[idx] = self.future[idx] = self.allocatable.take(idx, axis=0) - used
        try:
            yield
        finally:
            self.used[idx], self.free[idx], self.future[idx] = saved

    @property
    def capacity(self) -> np.ndarray:
        """The nodes' allocatable added up (read-only): worked out once per allocatable
        matrix, which every session asks of its snapshot (and the next snapshot of the
        same nodes mostly keeps)."""
        if self._capacity is None:
            capacity = np.asarray(self.allocatable.sum(axis=0))
            capacity.flags.writeable = False
            self._capacity = capacity
        return self._capacity


@dataclass(frozen=True, slots=True)
class PlacedRows:
    """A node set's used, releasing, pipelined and nominated rows, copied as a snapshot
    placed its tasks (``NodeSet.placed_rows``)."""

    matrices: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    anti_required: np.ndarray
    jobless: np.ndarray  # per node: its tasks of no job
    derived: tuple[np.ndarray, np.ndarray, np.ndarray]  # what waits, free and future


# Up to this many vectors, ``_stacked`` copies each (measured: the same time at ~500).
_STACKED_EACH_UP_TO = 400


def _on_nodes(tasks: list[TaskInfo]) -> tuple[list[int], list[np.ndarray]]:
    """The nodes of ``tasks`` and their requests, in order."""
    return [task.node for task in tasks], [task.template.request for task in tasks]


def _stacked(vectors: list[np.ndarray], width: int) -> np.ndarray:
    """``vectors`` as a (len × width) matrix. Most are a few template requests over and
    over: past a few hundred, each distinct array (by identity) is copied once and the
    rest picked by index (below, finding them costs more than copying each: a session's
    snapshot places the tasks of a few nodes again, a first one every running pod)."""
    if len(vectors) <= _STACKED_EACH_UP_TO:
        return np.array(vectors, dtype=float).reshape(len(vectors), width)
    ids = np.fromiter(map(id, vectors), np.intp, len(vectors))
    _, first, picks = np.unique(ids, return_index=True, return_inverse=True)
    distinct = np.array([vectors[i] for i in first], dtype=float).reshape(len(first), width)
    return distinct[picks.reshape(-1)]
