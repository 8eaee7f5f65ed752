"""Core policy through the simulator (gangs, priority, resource names): each file's
header says what must happen."""

from scenarios.runner import run


def test_a_gang_mixing_pods_with_and_without_requests_runs_whole() -> None:
    outcome = run("policy/mixed-gang.yaml")
    assert sorted(p["name"] for p in outcome.running(group="mpi")) == [
        "launcher",
        "worker-0",
        "worker-1",
    ]
    bound_at = {e["time"] for e in outcome.events("Scheduled") if e["kind"] == "Pod"}
    assert len(bound_at) == 1, "the gang was bound in one session"
    assert outcome.group("mpi")["phase"] == "Running"


def test_pods_without_a_group_are_ordered_by_their_priority() -> None:
    outcome = run("policy/plain-pods-by-priority.yaml")
    assert outcome.pod("b-high")["node"] == "n1"
    assert outcome.pod("a-low")["node"] is None


def test_a_lower_priority_gang_does_not_preempt_a_plain_pod() -> None:
    outcome = run("policy/plain-pod-priority-shields.yaml")
    assert outcome.summary["evictions"] == 0
    assert outcome.pod("vip")["phase"] == "Running"
    assert outcome.bound(group="gang") == []


def test_a_group_asking_a_resource_no_node_has_stays_pending() -> None:
    outcome = run("policy/min-resources-unknown-name.yaml")
    assert outcome.group("train")["phase"] == "Pending"
    assert outcome.bound(group="train") == []
    waiting = outcome.condition("train", "Unschedulable")
    assert waiting is not None and "nvidia.com/gpu" in waiting["message"]
