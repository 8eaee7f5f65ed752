"""Pods with ``spec.activeDeadlineSeconds``: the simulated kubelet stops them at their
deadline, as a real one does (phase Failed, reason DeadlineExceeded)."""

from typing import Any

from kbatch.sim import simulate
from scenarios.objects import at, node, pod

Json = dict[str, Any]


def phases(until: str) -> dict[str, Json]:
    """Three pods on one node: one that would run 60 s with a 30 s deadline, one that
    ends in 20 s within its 30 s deadline, one with a 45 s deadline and no runtime
    (it would run for ever), and one made at 10 s with a 30 s deadline."""
    docs = [
        node("n1"),
        pod("past-it", duration="60s", activeDeadlineSeconds=30),
        pod("within-it", duration="20s", activeDeadlineSeconds=30),
        pod("endless", activeDeadlineSeconds=45),
        at(pod("later", duration="1h", activeDeadlineSeconds=30), "10s"),
    ]
    run = simulate(documents=docs, until=until)
    return {p["name"]: p for p in run["pods"]}


def test_a_pod_past_its_deadline_fails_then_and_one_within_it_succeeds() -> None:
    before = phases("29s")
    assert {name: p["phase"] for name, p in before.items()} == {
        "past-it": "Running",
        "within-it": "Succeeded",
        "endless": "Running",
        "later": "Running",
    }
    after = phases("50s")
    assert {name: p["phase"] for name, p in after.items()} == {
        "past-it": "Failed",
        "within-it": "Succeeded",
        "endless": "Failed",
        "later": "Failed",  # made at 10 s: its deadline counts from its start, 40 s
    }
    assert phases("39s")["later"]["phase"] == "Running"
