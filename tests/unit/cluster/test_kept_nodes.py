"""The nodes handed from one snapshot to the next (``kbatch.cluster.reuse.kept_nodes``): they
are (the same NodeInfo objects, only some nodes placed again), each snapshot is still
field by field what a new builder makes (``test_kept_jobs`` compares, sessions in
between), a simulated trace comes out the same with them switched off (and with every
pod walked by every snapshot: ``Shortcuts.pods_of_changed_units_only``), and what they
rest on holds: a session changes a node's tasks and rows only through the NodeSet's
methods, which log the node in ``NodeSet.changed``."""

import json
from collections.abc import Callable, Sequence

import pytest

from kbatch.cluster.reuse import kept_nodes
from kbatch.cluster.reuse.pod_units import ShownPods
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.nodes import NodeSet, PlacedRows
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.sim import manifests, output, trace
from kbatch.sim.runner import Options, Simulation
from unit.cluster.test_kept_jobs import CONFS, QUIET_STEPS, session
from unit.cluster.test_snapshot_reuse import Ignoring, node

Placed = list[tuple[list[int], int]]  # per place_again: the nodes placed again, of all


def recording_place_again(monkeypatch: pytest.MonkeyPatch) -> Placed:
    """Record the nodes each ``place_again`` places again (and how many nodes there are)."""
    calls: Placed = []
    place_again = NodeSet.place_again

    def recorded(
        self: NodeSet,
        placed_before: PlacedRows,
        nodes: Sequence[int],
        placed: Sequence[TaskInfo],
        reserved: Sequence[TaskInfo],
        kept: int,
        by_bincount: bool = True,
    ) -> None:
        calls.append((list(nodes), len(self)))
        place_again(self, placed_before, nodes, placed, reserved, kept, by_bincount)

    monkeypatch.setattr(NodeSet, "place_again", recorded)
    return calls


def test_a_snapshot_of_the_same_nodes_places_only_some_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = recording_place_again(monkeypatch)
    state = ClusterState()
    same_infos = 0
    last = None
    for step in QUIET_STEPS:
        step(state)
        snap = state.snapshot()
        same_infos += last is not None and snap.nodes.infos is last
        last = snap.nodes.infos
        session(snap, "every action")
    assert same_infos >= 10 and len(calls) == same_infos
    assert any(len(nodes) < size for nodes, size in calls)  # not every node placed again


def test_switched_off_every_snapshot_makes_its_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = recording_place_again(monkeypatch)
    state = ClusterState(shortcuts=Shortcuts().without("unchanged_nodes"))
    infos = []
    for step in QUIET_STEPS[:6]:
        step(state)
        infos.append(state.snapshot().nodes.infos)
    assert not calls and len({id(i) for i in infos}) == len(infos)


@pytest.mark.parametrize("conf_name", sorted(CONFS))
def test_a_session_changes_nodes_only_through_what_logs_them(conf_name: str) -> None:
    state = ClusterState()
    for step in QUIET_STEPS:
        step(state)
        snap = state.snapshot()
        nodes = snap.nodes
        before = [
            (list(info.tasks), *(m[i].tobytes() for m in nodes.placed_rows().matrices))
            for i, info in enumerate(nodes.infos)
        ]
        conf = CONFS[conf_name]
        runner.Scheduler(Ignoring(snap), conf, lambda: 0.0, lambda: "s").run_once()
        after = [
            (list(info.tasks), *(m[i].tobytes() for m in nodes.placed_rows().matrices))
            for i, info in enumerate(nodes.infos)
        ]
        changed = {i for i, (was, now) in enumerate(zip(before, after, strict=True)) if was != now}
        assert changed <= set(nodes.changed)


def _trace_json(shortcuts: Shortcuts = ALL) -> str:
    spec = trace.TraceSpec(nodes=10, hours=1.5, seed=3)
    loaded = manifests.load_documents(trace.trace_objects(spec), "<trace>")
    options = Options(until=spec.seconds, shortcuts=shortcuts)
    outcome = Simulation(loaded, runner.default_conf(), options).run()
    return json.dumps(output.to_json(outcome), sort_keys=True, default=str)


@pytest.mark.parametrize(
    "shortcut", ["unchanged_nodes", "pods_of_changed_units_only", "task_places"]
)
def test_a_trace_comes_out_the_same_the_long_way(
    shortcut: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With its nodes made anew and every pod walked by every snapshot, in turn."""
    calls = recording_place_again(monkeypatch)
    quick = _trace_json()
    assert calls and any(len(nodes) < size for nodes, size in calls)
    assert _trace_json(Shortcuts().without(shortcut)) == quick


def test_a_task_kept_unchanged_is_put_in_order_by_the_place_it_was_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A node placed again with new tasks puts its tasks in snapshot order; those handed
    on keep the place looked up for them before, so a trace looks up far fewer places
    than the long way (and comes out the same: above), each the pod's own."""
    looked_up: list[str] = []
    place = ShownPods.place

    def counted(self: ShownPods, key: str) -> int | None:
        looked_up.append(key)
        return place(self, key)

    monkeypatch.setattr(ShownPods, "place", counted)
    sorted_tasks: list[TaskInfo] = []
    in_order = kept_nodes._in_snapshot_order

    def sorting(
        tasks: list[TaskInfo], place_of: Callable[[str], int | None], keep: bool
    ) -> list[TaskInfo]:
        ordered = in_order(tasks, place_of, keep)
        sorted_tasks.extend(ordered)
        assert all(task.place == place_of(task.key) for task in ordered)
        return ordered

    monkeypatch.setattr(kept_nodes, "_in_snapshot_order", sorting)
    extra = []  # per run: the look-ups beyond the assertion's own (one per task sorted)
    for keep in (True, False):
        looked_up.clear()
        sorted_tasks.clear()
        _trace_json(Shortcuts(task_places=keep))
        extra.append(len(looked_up) - len(sorted_tasks))
    assert sorted_tasks and extra[1] == len(sorted_tasks), "the long way looks each up"
    assert extra[0] < extra[1] * 0.6


def test_the_nodes_capacity_is_added_up_once_per_node_set_made() -> None:
    """A snapshot of the same nodes keeps the capacity the last one added up (every
    session reads it); a node set made anew adds it up again; nothing may write it."""
    state = ClusterState()
    for step in QUIET_STEPS[:2]:
        step(state)
    first = state.snapshot()
    session(first, "every action")
    capacity = first.nodes.capacity
    second = state.snapshot()
    assert second.nodes.infos is first.nodes.infos  # (of the same nodes)
    assert second.nodes.capacity is capacity
    assert capacity.tolist() == second.nodes.allocatable.sum(axis=0).tolist()
    with pytest.raises(ValueError):
        capacity[0] = 0.0
    state.apply(node("n-added", cpu="3"))
    third = state.snapshot()
    assert third.nodes.capacity is not capacity
    assert third.nodes.capacity.tolist() == third.nodes.allocatable.sum(axis=0).tolist()
    assert third.nodes.capacity[third.dims.index["cpu"]] == capacity[first.dims.index["cpu"]] + 3000
