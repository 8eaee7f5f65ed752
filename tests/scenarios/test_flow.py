"""Fairness with memory (DESIGN §11, the flow plugin): a queue that had the cluster to
itself for an hour gives way to one that had nothing, until their flows meet.

Two 8-cpu nodes. Queue a runs sixteen streams of 1-cpu jobs alone for an hour (5 to 10
minutes each, so that its last ones end one by one over the next minutes); at 60 m
queues a and b (weight 1 each) both submit an hour of the same work: sixteen streams of
1-cpu jobs of 2 to 4 minutes. As a's old jobs end and jobs turn over, the freed cores go
to the queue whose flow over its fair share is smallest.
"""

import math
from typing import Any

import pytest

from kbatch.api.times import rfc3339_seconds
from kbatch.sim import run
from kbatch.sim.runner import Outcome
from scenarios.objects import at, conf_map, job, node, pod_group, queue

TIERS = """
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, %s, {name: nodeorder}]
"""
FLOW = "{name: flow, arguments: {halfLife: 10m}}"
PROPORTION = "{name: proportion}"  # kube-batch's rule: each deserves half
CORES = 16
START = 3600.0  # both queues submit their backlogs
TURNED = 3780.0  # 63 m: a's oldest jobs have ended and the cores begin to turn over
MEET = 4020.0  # 67 m: the flows have met (measured: at 66 m 40 s)
SETTLED = (4200.0, 4800.0)  # 70 m to 80 m


def streams(prefix: str, group: str, shortest: int, step: int) -> list[dict[str, Any]]:
    """Sixteen streams of 1-cpu jobs, stream i of ``shortest + i × step`` seconds each,
    running one after another for an hour."""
    out = []
    for i in range(CORES):
        seconds = shortest + step * i
        completions = math.ceil(3600 / seconds)
        out.append(
            job(f"{prefix}-{i}", completions=completions, group=group, duration=f"{seconds}s")
        )
    return out


def a_alone_then_both(fair: str, until: str = "80m") -> Outcome:
    docs: list[Any] = [
        conf_map('actions: "enqueue, allocate, backfill"\n' + TIERS % fair),
        node("n1", cpu="8"),
        node("n2", cpu="8"),
        queue("a"),
        queue("b"),
        pod_group("a", queue="a"),
        *streams("alone", "a", 300, 20),
        at(pod_group("b", queue="b"), "60m"),
        *[at(obj, "60m") for obj in streams("a-more", "a", 120, 7)],
        *[at(obj, "60m") for obj in streams("b-more", "b", 120, 7)],
    ]
    return run(documents=docs, until=until)


def held_by_b(outcome: Outcome, since: float, until: float) -> list[float]:
    """Cores queue b held, at each change between ``since`` and ``until``."""
    samples = outcome.timeline.samples
    return [s.queues.get("b", (0.0, 0.0))[0] for s in samples if since <= s.time <= until]


def share_of_b(outcome: Outcome, since: float, until: float) -> float:
    """b's part of the core-seconds a and b held between ``since`` and ``until``."""
    held = {"a": 0.0, "b": 0.0}
    samples = outcome.timeline.samples
    for sample, following in zip(samples, [*samples[1:], None], strict=True):
        begin = max(sample.time, since)
        end = min(following.time if following is not None else until, until)
        for name in held:
            held[name] += sample.queues.get(name, (0.0, 0.0))[0] * max(end - begin, 0.0)
    return held["b"] / (held["a"] + held["b"])


@pytest.fixture(scope="module")
def with_flow() -> Outcome:
    return a_alone_then_both(FLOW)


@pytest.fixture(scope="module")
def with_proportion() -> Outcome:
    return a_alone_then_both(PROPORTION)


def test_with_flow_b_gets_more_than_half_until_the_flows_meet(with_flow: Outcome) -> None:
    """a's flow starts at the whole cluster and decays (half-life 10 m) as a's usage falls;
    b's is its usage. b takes what is freed until its usage reaches a's flow: at least
    three quarters of the cluster (measured: 13 of 16 cores at 65 m), and from 63 m to
    67 m at least 65% of the core-seconds (measured: 71%)."""
    assert max(held_by_b(with_flow, START, MEET)) >= 0.75 * CORES
    assert share_of_b(with_flow, TURNED, MEET) >= 0.65


def test_without_flow_b_gets_half(with_proportion: Outcome) -> None:
    """Proportion's overused test stops b at its deserved half (a queue *at* its share may
    take one job more, kube-batch's test: never more than 9 of 16; measured: 8)."""
    held = held_by_b(with_proportion, START, MEET)
    assert max(held) <= CORES / 2 + 1
    assert held[-1] >= CORES / 2
    assert share_of_b(with_proportion, TURNED, MEET) == pytest.approx(0.5, abs=0.02)


def test_once_the_flows_have_met_the_queues_share_evenly(with_flow: Outcome) -> None:
    """Measured: 50% of the core-seconds from 70 m to 80 m."""
    assert share_of_b(with_flow, *SETTLED) == pytest.approx(0.5, abs=0.05)


def test_the_flow_is_kept_in_the_queue_status_on_simulated_time(with_flow: Outcome) -> None:
    """Each queue's flow is in its status, measured lately on the simulator's clock (a
    flow that is not 0 is written again at least every twentieth of the half-life), and
    the two are about equal: they have met."""
    statuses = {q: with_flow.cluster.state.get("Queue", "", q)["status"] for q in ("a", "b")}
    for status in statuses.values():
        assert with_flow.time - rfc3339_seconds(status["flowUpdated"]) <= 600 / 20 + 1
    assert statuses["a"]["flow"] == pytest.approx(statuses["b"]["flow"], abs=1.0)


def test_without_flow_no_flow_is_written(with_proportion: Outcome) -> None:
    for name in ("a", "b"):
        status = with_proportion.cluster.state.get("Queue", "", name).get("status") or {}
        assert status.get("flow") is None and status.get("flowUpdated") is None
