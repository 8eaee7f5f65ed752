"""The snapshot's ``Delta`` says what changed since the snapshot before it: none for the
first; after nothing, every job kept unchanged, the nodes unchanged and no queue
changed; after a write, exactly the job, node or queue written."""

from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.delta import Delta
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from unit.cluster.test_snapshot_reuse import QUEUE, RUNNING, group, node, pod


def _delta(snap: Snapshot) -> Delta:
    assert snap.delta is not None
    return snap.delta


def _state() -> ClusterState:
    state = ClusterState()
    state.apply(QUEUE)
    state.apply(node("n1"))
    state.apply(group("g", minMember=1))
    state.apply(pod("p", "g", status=RUNNING, spec={"nodeName": "n1"}))
    state.apply(group("h", minMember=1))
    return state


def test_the_first_snapshot_has_no_delta_and_the_next_follows_it() -> None:
    state = _state()
    first = state.snapshot()
    assert first.delta is None
    second = _delta(state.snapshot())
    third = _delta(state.snapshot())
    assert third.follows(second.generation) and not second.follows(third.generation)
    assert not third.follows(None)
    other = _state()
    other.snapshot()
    assert not _delta(other.snapshot()).follows(second.generation)  # another maker's line


def test_nothing_written_keeps_every_job_node_and_queue() -> None:
    state = _state()
    first = state.snapshot()
    delta = _delta(state.snapshot())
    assert set(delta.unchanged_jobs) == set(first.jobs) == {"ns/g", "ns/h"}
    assert delta.unchanged("ns/g") and not delta.changed_jobs(first.jobs)
    assert delta.nodes_unchanged and delta.changed_queues == frozenset()


def test_a_write_changes_exactly_what_it_wrote() -> None:
    state = _state()
    state.snapshot()
    state.snapshot()
    state.apply(group("g", minMember=1, queue="default", minResources={"cpu": "1"}))
    delta = _delta(state.snapshot())
    assert not delta.unchanged("ns/g") and delta.unchanged("ns/h")
    assert delta.nodes_unchanged and delta.changed_queues == frozenset()
    state.apply(node("n1", cpu="16"))
    state.apply({**QUEUE, "spec": {"weight": 2}})
    delta = _delta(state.snapshot())
    assert not delta.nodes_unchanged and delta.changed_queues == frozenset({"default"})
    state.delete("Queue", "", "default")
    state.delete("PodGroup", "ns", "h")
    now = state.snapshot()
    delta = _delta(now)
    assert delta.changed_queues == frozenset({"default"})
    kept = {"ns/g": 1, "ns/h": 2}
    assert list(delta.gone_jobs(kept, now.jobs, delta.changed_jobs(now.jobs))) == ["ns/h"]
