"""The last snapshot's NodeInfo objects, kept for the next snapshot while no Node was
written; dropped when a Node record changes or the resource dimensions do.

Without them a busy cluster's snapshot would make every node's NodeInfo and place every
running pod on its node at every session, though few of them changed.

While the node records are the same objects (no Node was written), the next snapshot's
node set is made of the last one's NodeInfo objects, and only the nodes whose tasks may
differ are placed anew; the rows of every other node are copied from those the last
snapshot placed (``NodeSet.place_again``). A node's tasks may differ when

- a task on it, or with room kept on it, was made anew by this snapshot: one of a job
  not kept unchanged (``kbatch.cluster.reuse.kept_jobs``), or another scheduler's pod;
- one was there, at the last snapshot, of a job this snapshot does not keep (written
  since, touched by the session, or gone), or of no job of ours;
- the last session changed its NodeInfo or rows (``NodeSet.changed``: it placed,
  removed or kept room for a task there).

A job kept unchanged has the same tasks, in the same statuses, on the same nodes, so every
other node holds what it held; its tasks come in the same order too (the pods'), so
the rows, summed in that order, are the same to the bit. The last snapshot's node set
is not to be used once the next is made (its NodeInfo objects are the next one's).
"""

import operator
from collections.abc import Callable, Collection, Mapping, Sequence

import numpy as np

from kbatch.cluster.records import NodeRecord
from kbatch.operators.scheduler.core.framework.info import NO_NODE, JobInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.nodes import NodeSet, PlacedRows
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

# The key of tasks of no job of ours (``TaskInfo.job`` is empty): never kept unchanged.
NO_UNIT = ""


class KeptNodes:
    """The last snapshot's node set, what it placed, and where each job's tasks were.
    ``shortcuts``: ``unchanged_nodes`` off, every snapshot makes every node's NodeInfo
    and places every task; ``nodes_of_known_units_only`` off, the units whose tasks left
    their nodes are found among every unit, not among those the snapshot says it did
    not keep; ``task_places`` off, a task's place in snapshot order is looked up at
    every sort; ``sums_by_bincount``, as ``NodeSet.place_all`` takes it."""

    def __init__(self, shortcuts: Shortcuts = ALL) -> None:
        self._shortcuts = shortcuts
        self._by_bincount = shortcuts.sums_by_bincount
        self._records: list[NodeRecord] = []
        self._last: NodeSet | None = None
        self._placed: PlacedRows | None = None
        self._allocatable = np.zeros((0, 0))  # the last node set's, as it was made
        self._capacity = np.zeros(0)  # its allocatable added up (``NodeSet.capacity``)
        # Per unit (a job's uid; NO_UNIT: tasks of no job of ours), the nodes its tasks
        # were on, or had room kept on, when placed.
        self._unit_nodes: dict[str, list[int]] = {}
        # Per node, the tasks placed there and those with room kept there, in snapshot
        # order, as the last snapshot placed them (a session changes NodeInfo.tasks).
        self._on_node: list[list[TaskInfo]] = []
        self._kept_on_node: list[list[TaskInfo]] = []
        self._kept_count = 0  # tasks with room kept, on any node

    def node_set(self, nodes: list[NodeRecord], made: Callable[[], NodeSet]) -> NodeSet:
        """The next snapshot's node set of ``nodes``, nothing placed yet: of the last one's
        nodes while the records are the same objects, else ``made()``."""
        last = self._last
        if (
            last is not None
            and self._placed is not None
            and self._shortcuts.unchanged_nodes
            and (
                nodes is self._records  # (the state's own list, while no Node is written)
                or (
                    len(nodes) == len(self._records)
                    and all(map(operator.is_, nodes, self._records))  # (C speed)
                )
            )
        ):
            self._records = nodes  # (the same records: the list asked next is this one)
            return NodeSet.of_same_nodes(last, self._allocatable.copy(), self._capacity)
        self._records, self._last, self._placed = nodes, None, None
        node_set = made()
        node_set.static_version = object()  # (records are never changed in place)
        self._allocatable = node_set.allocatable.copy()
        self._capacity = node_set.capacity  # (read-only: shared by the node sets after)
        return node_set

    def place(
        self,
        node_set: NodeSet,
        placed: Sequence[TaskInfo],
        nominated: Sequence[TaskInfo],
        made: Sequence[TaskInfo],
        kept_jobs: Mapping[str, JobInfo],
    ) -> None:
        """Place the snapshot's tasks on ``node_set`` (from ``node_set``): ``placed`` and
        ``nominated`` as ``NodeSet.place_all`` takes them; ``made``, those of them this
        snapshot made anew; ``kept_jobs``, the jobs it kept unchanged (by unit)."""
        last, placed_before = self._last, self._placed
        if last is None or placed_before is None or not self.places_again(node_set):
            node_set.place_all(placed, nominated, self._by_bincount)
            self._unit_nodes = _unit_nodes(placed, nominated)
            self._on_node = _by_node(len(node_set), placed, _node)
            self._kept_on_node = _by_node(len(node_set), nominated, _nominated)
        else:
            again = self._nodes_to_place_again(made, kept_jobs, last.changed)
            on_again = [task for task in placed if task.node in again]
            kept_on_again = [task for task in nominated if task.nominated in again]
            node_set.place_again(placed_before, sorted(again), on_again, kept_on_again,
                                 len(nominated), self._by_bincount)  # fmt: skip
            for node, tasks in _by_node_of(again, on_again, _node).items():
                self._on_node[node] = tasks
            for node, tasks in _by_node_of(again, kept_on_again, _nominated).items():
                self._kept_on_node[node] = tasks
        self._last, self._placed = node_set, node_set.placed_rows()
        self._kept_count = len(nominated)

    def places_again(self, node_set: NodeSet) -> bool:
        """Is ``node_set`` of the last one's nodes (``node_set`` gave it)?"""
        return self._last is not None and node_set.infos is self._last.infos

    def place_made(
        self,
        node_set: NodeSet,
        made: Sequence[TaskInfo],
        kept_jobs: Mapping[str, JobInfo],
        place_of: Callable[[str], int | None],
        not_kept: Collection[str] | None = None,
    ) -> None:
        """``place``, when the snapshot's pass walked only the pods of the jobs not kept
        unchanged (``node_set`` of the last one's nodes): ``made``, the tasks it made on nodes
        or with room kept on one; the others are the kept jobs' tasks the last
        snapshot placed. A node placed again takes both, in snapshot order (``place_of``
        a pod's key). ``not_kept``: units among which are all that ``kept_jobs`` does
        not keep, when known."""
        assert self._last is not None and self._placed is not None
        again = self._nodes_to_place_again(made, kept_jobs, self._last.changed, not_kept)
        made_on = _by_node_of(again, [t for t in made if t.nominated == NO_NODE], _node)
        kept_made = _by_node_of(again, [t for t in made if t.nominated != NO_NODE], _nominated)
        on_again: list[TaskInfo] = []
        kept_on_again: list[TaskInfo] = []
        kept_count = self._kept_count
        for node in sorted(again):
            kept_count -= len(self._kept_on_node[node])
            for lists, new, gathered in (
                (self._on_node, made_on, on_again),
                (self._kept_on_node, kept_made, kept_on_again),
            ):
                tasks = [task for task in lists[node] if task.job in kept_jobs]
                fresh = new.get(node)
                if fresh:
                    keep = self._shortcuts.task_places
                    tasks = _in_snapshot_order(tasks + fresh, place_of, keep)
                lists[node] = tasks
                gathered += tasks
            kept_count += len(self._kept_on_node[node])
        node_set.place_again(
            self._placed, sorted(again), on_again, kept_on_again, kept_count, self._by_bincount
        )
        self._last, self._placed, self._kept_count = node_set, node_set.placed_rows(), kept_count

    def _nodes_to_place_again(
        self,
        made: Sequence[TaskInfo],
        kept_jobs: Collection[str],
        changed: list[int],
        not_kept: Collection[str] | None = None,
    ) -> set[int]:
        """The nodes whose tasks may differ from the last snapshot's (the module's
        docstring); and each unit's nodes, kept for the next snapshot. ``not_kept``:
        units among which are all those of the last snapshot not in ``kept_jobs`` (but
        NO_UNIT), when known (else every unit is looked at)."""
        again = set(changed)
        unit_nodes = self._unit_nodes  # changed in place: most units are kept unchanged
        if not_kept is None or not self._shortcuts.nodes_of_known_units_only:
            left = unit_nodes.keys() - kept_jobs
        else:
            left = {u for u in (*not_kept, NO_UNIT) if u in unit_nodes and u not in kept_jobs}
        for unit in left:
            again.update(unit_nodes.pop(unit))
        for task in made:
            node = task.nominated if task.nominated != NO_NODE else task.node
            again.add(node)
            unit_nodes.setdefault(task.job, []).append(node)
        return again

    def forget(self) -> None:
        self._records, self._last, self._placed, self._unit_nodes = [], None, None, {}
        self._on_node, self._kept_on_node, self._kept_count = [], [], 0


def _unit_nodes(placed: Sequence[TaskInfo], nominated: Sequence[TaskInfo]) -> dict[str, list[int]]:
    """Each unit's nodes: those its ``placed`` tasks are on and its ``nominated`` ones
    have room kept on."""
    unit_nodes: dict[str, list[int]] = {}
    for task in placed:
        unit_nodes.setdefault(task.job, []).append(task.node)
    for task in nominated:
        unit_nodes.setdefault(task.job, []).append(task.nominated)
    return unit_nodes


def _node(task: TaskInfo) -> int:
    return task.node


def _nominated(task: TaskInfo) -> int:
    return task.nominated


def _by_node(
    count: int, tasks: Sequence[TaskInfo], node_of: Callable[[TaskInfo], int]
) -> list[list[TaskInfo]]:
    """``tasks`` on each of ``count`` nodes (``node_of`` a task), in order."""
    on_node: list[list[TaskInfo]] = [[] for _ in range(count)]
    for task in tasks:
        on_node[node_of(task)].append(task)
    return on_node


def _by_node_of(
    nodes: Collection[int], tasks: Sequence[TaskInfo], node_of: Callable[[TaskInfo], int]
) -> dict[int, list[TaskInfo]]:
    """``tasks`` (all on ``nodes``) on each of ``nodes``, in order."""
    on_node: dict[int, list[TaskInfo]] = {node: [] for node in nodes}
    for task in tasks:
        on_node[node_of(task)].append(task)
    return on_node


def _in_snapshot_order(
    tasks: list[TaskInfo], place_of: Callable[[str], int | None], keep: bool = True
) -> list[TaskInfo]:
    """``tasks`` (of pods the snapshot shows) in the order of their pods. Each task's
    place is looked up once (``TaskInfo.place``): those kept unchanged were placed before
    (not ``keep``: looked up at every sort)."""
    for task in tasks:
        if task.place < 0 or not keep:
            place = place_of(task.key)
            assert place is not None, task.uid
            task.place = place
    return sorted(tasks, key=_place)


def _place(task: TaskInfo) -> int:
    return task.place
