"""A segment's checkpoint builds the state the records before it build, the binds and
evictions still assumed included: a replay that starts there sees a pod whose bind was
in flight as bound, as the replay from the start does."""

from typing import Any

from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.record.store.checkpoint import Checkpoint
from tests.unit.cluster.test_state import node, pod, the_task


class Told:
    """The state's observer, telling a checkpoint what the recorder's writer would."""

    def __init__(self, clock: list[float]) -> None:
        self.clock = clock
        self.checkpoint = Checkpoint()

    def applied(self, kind: str, key: str, obj: dict[str, Any]) -> None:
        self.checkpoint.applied(kind, key, obj)

    def refused(self, obj: dict[str, Any]) -> None:
        pass

    def dropped_object(self, kind: str, key: str) -> None:
        self.checkpoint.dropped(kind, key)

    def assumed(self, op: str, key: str, value: str | float | None = None) -> None:
        self.checkpoint.assumed(op, self.clock[0], key, value)

    def snapshotted(self) -> None:
        pass


def rebuilt(records: list[dict[str, Any]], clock: list[float]) -> ClusterState:
    """A state given ``records`` as a replay gives them."""
    state = ClusterState(clock=lambda: clock[0])
    for record in records:
        op = record["op"]
        namespace, _, name = str(record.get("key", "")).rpartition("/")
        if op == "a":
            state.apply(record["o"])
        elif op == "as":
            state.assume_bound(namespace, name, record["node"])
        elif op == "ar":
            state.assume_releasing(namespace, name)
        elif op == "c":
            state.confirmed(namespace, name)
        elif op == "k":
            state.keep_assumed(namespace, name, record["s"])
    return state


PODS = ("in-flight", "confirmed", "shown", "failed", "no-answer", "recreated", "gone")


def test_a_checkpoint_keeps_what_is_assumed_as_the_state_does() -> None:
    clock = [100.0]
    state = ClusterState(clock=lambda: clock[0])
    told = Told(clock)
    state.observer = told
    state.apply(node("n1"))
    for name in (*PODS, "running"):
        state.apply(pod(name))
    state.apply(pod("running", nodeName="n1"))
    for name in PODS:
        state.assume_bound("default", name, "n1")
    state.assume_releasing("default", "running")  # an eviction sent
    state.confirmed("default", "confirmed")
    state.apply(pod("shown", nodeName="n1"))  # the watch shows the bind
    state.forget("default", "failed")
    state.keep_assumed("default", "no-answer", 5.0)
    recreated = pod("recreated")
    recreated["metadata"]["uid"] = "uid-other"  # another pod of that name
    state.apply(recreated)
    state.delete("Pod", "default", "gone")
    state.apply(pod("gone"))
    clock[0] = 102.0
    copy = rebuilt(list(told.checkpoint.records(clock[0])), clock)
    for now in (102.0, 104.0, 106.0):  # the unanswered bind's back-off ends at 105
        clock[0] = now
        for name in (*PODS, "running"):
            seen = state.waits_for_a_node("default", name, state.pod_record("default", name).uid)
            again = copy.waits_for_a_node("default", name, copy.pod_record("default", name).uid)
            assert seen == again, (name, now)
        assert state.has_work() == copy.has_work()
    assert not copy.waits_for_a_node("default", "confirmed", "uid-confirmed")
    assert copy.waits_for_a_node("default", "no-answer", "uid-no-answer"), "expired at 105"
    assert copy.waits_for_a_node("default", "failed", "uid-failed")
    assert the_task(copy, "running")[0] is TaskStatus.RELEASING, "the eviction sent"
    assert the_task(copy, "in-flight") == the_task(state, "in-flight")


def test_a_checkpoint_at_a_time_writes_a_back_off_that_has_ended_no_more() -> None:
    checkpoint = Checkpoint()
    checkpoint.applied("Pod", "default/p", pod("p"))
    checkpoint.assumed("as", 10.0, "default/p", "n1")
    checkpoint.assumed("k", 10.0, "default/p", 3.0)
    assert [r["op"] for r in checkpoint.records(12.0) if r["op"] != "a"] == ["as", "k"]
    assert [r["s"] for r in checkpoint.records(12.0) if r["op"] == "k"] == [1.0]
    assert [r["op"] for r in checkpoint.records(13.0)] == ["a"]
    checkpoint.assumed("c", 14.0, "default/p", None)  # answered at last
    assert [r["op"] for r in checkpoint.records(20.0)] == ["a", "as", "c"]
    checkpoint.dropped("Pod", "default/p")
    assert list(checkpoint.records(20.0)) == []
