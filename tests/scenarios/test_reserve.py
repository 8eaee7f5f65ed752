"""The reserve action (DESIGN §11): a whole-node job beside a flood of small ones."""

from typing import Any

from kbatch.sim import simulate
from scenarios.objects import at, conf_map, job, node, pod, pod_group, queue
from scenarios.runner import Outcome

PLACING = "enqueue, allocate, backfill"
TIERS = """
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
SMALL_RUNTIME = 60.0  # the longest small job: 50 s + 7 × 1.5 s, rounded up


def flood_and_big(actions: str) -> Outcome:
    """Two 4-cpu nodes kept full by queue a's eight streams of 1-cpu jobs of staggered
    lengths; at 30 s queue b (within its share) asks for a whole node."""
    group = pod_group("flood", queue="a")
    streams = []
    for i in range(8):
        stream = job(f"flood-{i}", completions=40, group="flood", duration=f"{50 + 1.5 * i}s")
        streams.append(stream)
    big_group = at(pod_group("big", queue="b"), "30s")
    big = at(pod("big", cpu="4", group="big"), "30s")
    conf = conf_map(f"actions: {actions!r}\n{TIERS}")
    docs: list[Any] = [conf, node("n1"), node("n2"), queue("a"), queue("b"), group]
    return Outcome(simulate(documents=[*docs, *streams, big_group, big], until="20m"))


def started(outcome: Outcome, name: str) -> float | None:
    times = [e["time"] for e in outcome.events("Scheduled") if e["name"] == name]
    return times[0] if times else None


def test_without_reserve_the_whole_node_job_waits_for_the_flood() -> None:
    """kube-batch's behaviour: a's jobs refill a core whenever a dips below its share, on
    either node, so neither drains (the issue measured 73 minutes on Armada's workload)."""
    waited = started(flood_and_big(PLACING), "big")
    assert waited is None or waited - 30.0 > 5 * SMALL_RUNTIME


def test_with_reserve_it_starts_within_one_small_job_runtime() -> None:
    outcome = flood_and_big(f"{PLACING}, reserve")
    at_start = started(outcome, "big")
    assert at_start is not None and at_start - 30.0 <= SMALL_RUNTIME + 5.0, at_start
    assert outcome.summary["evictions"] == 0, "a drain, not an eviction"


def test_the_condition_says_which_node_drains() -> None:
    outcome = flood_and_big(f"{PLACING}, reserve")
    said = [
        e["message"]
        for e in outcome.events("Unschedulable")
        if e["name"] == "big" and "to drain" in e["message"]
    ]
    assert said, outcome.events("Unschedulable")
    assert said[0].startswith("1/1 tasks in gang unschedulable: waiting for 1 node to drain: n")
    assert "cpu still in use)" in said[0]
