"""Snapshots that leave out settled jobs (``ClusterState(leave_out_settled=True)``): a
job that is over is shown to one snapshot more, then left out until it is written."""

from typing import Any

import pytest

from kbatch.cluster.reuse.settled import OrderedSubset
from kbatch.cluster.snapshot import SnapshotBuilder
from kbatch.cluster.state import ClusterState

Obj = dict[str, Any]
QUEUE = {
    "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
    "kind": "Queue",
    "metadata": {"name": "default"},
    "spec": {"weight": 1},
}
NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {
        "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    },
}


def pod(name: str, group: str | None, phase: str = "Running", gpu: bool = False) -> Obj:
    requests = {"cpu": "1", **({"nvidia.com/gpu": "1"} if gpu else {})}
    meta: Obj = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "kbatch",
            "nodeName": "n1",
            "containers": [{"name": "c", "resources": {"requests": requests}}],
        },
        "status": {"phase": phase},
    }


def group(name: str, phase: str) -> Obj:
    return {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 1, "queue": "default"},
        "status": {"phase": phase},
    }


def state_with(*objects: Obj) -> ClusterState:
    state = ClusterState(leave_out_settled=True)
    for obj in (QUEUE, NODE, *objects):
        state.apply(obj)
    return state


def shown(state: ClusterState) -> tuple[list[str], list[str]]:
    """(jobs, tasks) of a new snapshot, in its order."""
    snap = state.snapshot()
    tasks = [task.name for job in snap.jobs.values() for task in job.tasks.values()]
    return list(snap.jobs), tasks


def test_a_completed_group_is_shown_once_more_then_left_out() -> None:
    state = state_with(group("done", "Completed"), pod("done-0", "done", "Succeeded"))
    state.apply(group("runs", "Running"))
    state.apply(pod("runs-0", "runs"))
    assert shown(state) == (["default/done", "default/runs"], ["done-0", "runs-0"])
    assert shown(state) == (["default/runs"], ["runs-0"])
    assert shown(state) == (["default/runs"], ["runs-0"])


def test_a_write_to_a_settled_group_shows_it_again_in_the_states_order() -> None:
    state = state_with(group("a", "Completed"), pod("a-0", "a", "Succeeded"))
    state.apply(group("b", "Running"))
    state.apply(pod("b-0", "b"))
    shown(state)
    assert shown(state)[0] == ["default/b"]
    state.apply(pod("a-1", "a"))  # a new pod of the group: it is not over any more
    assert shown(state) == (["default/a", "default/b"], ["a-0", "a-1", "b-0"])


def test_a_status_written_after_the_last_look_delays_settling() -> None:
    state = state_with(group("g", "Running"), pod("g-0", "g", "Succeeded"))
    shown(state)  # not over yet: the group says Running
    state.apply(group("g", "Completed"))
    assert shown(state)[0] == ["default/g"], "over now, and shown to one session"
    assert shown(state)[0] == []


def test_groups_that_wait_or_run_are_never_left_out() -> None:
    state = state_with(group("pending", "Pending"), group("runs", "Running"))
    state.apply(pod("runs-0", "runs"))
    state.apply(group("inqueue", "Inqueue"))
    state.apply(pod("inqueue-0", "inqueue", "Pending"))
    for _ in range(3):
        assert shown(state)[0] == ["default/pending", "default/runs", "default/inqueue"]


def test_a_finished_pod_without_a_group_is_left_out_after_one_snapshot() -> None:
    state = state_with(pod("plain", None, "Succeeded"))
    assert shown(state)[0] == ["pod:default/plain"]
    assert shown(state)[0] == []


def test_a_queue_that_goes_shows_settled_groups_again() -> None:
    state = state_with(group("g", "Completed"), pod("g-0", "g", "Succeeded"))
    shown(state)
    assert shown(state)[0] == []
    state.delete("Queue", "", "default")
    assert shown(state)[0] == ["default/g"], "its verdict may change: seen once more"


def test_the_dimensions_count_what_was_left_out() -> None:
    state = state_with(group("g", "Completed"), pod("g-0", "g", "Succeeded", gpu=True))
    shown(state)
    snap = state.snapshot()
    assert snap.jobs == {} and "nvidia.com/gpu" in snap.dims.index
    state.delete("Pod", "default", "g-0")
    assert "nvidia.com/gpu" not in state.snapshot().dims.index


def test_without_leaving_out_every_job_is_shown() -> None:
    state = ClusterState()
    for obj in (QUEUE, NODE, group("g", "Completed"), pod("g-0", "g", "Succeeded")):
        state.apply(obj)
    for _ in range(3):
        assert list(state.snapshot().jobs) == ["default/g"]


def test_an_ordered_subset_keeps_the_order_keys_were_added_in() -> None:
    subset: OrderedSubset[str] = OrderedSubset()
    for key in "abcd":
        subset.added(key)
    subset.hide("b")
    subset.hide("a")
    subset.dropped("c")
    subset.added("c")  # dropped and added again: last
    assert subset.keys() == ["d", "c"]
    subset.show("b")
    subset.show("a")
    assert subset.keys() == ["a", "b", "d", "c"]


def test_an_ordered_subset_hands_out_each_member_with_its_last_value() -> None:
    subset: OrderedSubset[str] = OrderedSubset()
    for key in "abc":
        subset.added(key, key + "1")
    subset.added("a", "a2")  # a member added again: where it was, its new value
    subset.hide("b")
    subset.added("b", "b2")  # a hidden one added again: shown, where it was
    subset.hide("c")
    subset.show("c")  # shown again with the value it had
    assert subset.members() == {"a": "a2", "b": "b2", "c": "c1"}
    assert list(subset.members()) == ["a", "b", "c"]
    subset.dropped("a")
    subset.added("a")  # dropped: no value kept
    assert subset.members() == {"b": "b2", "c": "c1", "a": None}


def test_a_snapshot_shows_each_group_as_last_written() -> None:
    state = ClusterState(leave_out_settled=True)
    for obj in (QUEUE, NODE, group("g", "Running"), group("h", "Pending")):
        state.apply(obj)
    state.snapshot()
    state.apply(group("g", "Completed"))  # its status written: the new record shown
    snap = state.snapshot()
    assert [job.phase.value for job in snap.jobs.values()] == ["Completed", "Pending"]


def test_a_done_group_shown_to_a_snapshot_that_failed_is_shown_to_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session must see a done unit once (its last status is written then): one shown
    only to a snapshot whose build failed is shown to the next, then left out."""
    state = state_with(group("runs", "Running"), pod("runs-0", "runs"))
    assert shown(state) == (["default/runs"], ["runs-0"])
    state.apply(group("done", "Completed"))
    state.apply(pod("done-0", "done", "Succeeded"))
    with monkeypatch.context() as failing:
        failing.setattr(SnapshotBuilder, "build", lambda *args, **kwargs: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            state.snapshot()
    assert shown(state) == (["default/runs", "default/done"], ["runs-0", "done-0"])
    assert shown(state) == (["default/runs"], ["runs-0"])
