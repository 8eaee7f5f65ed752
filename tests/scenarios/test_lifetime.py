"""Job lifetimes (DESIGN §11): how long a job runs protected from fair-share reclaim,
and how far a queue's non-preemptible work may go past its fair share."""

import re
from typing import Any

import pytest

from kbatch.config import ConfigError
from kbatch.sim import simulate
from scenarios.objects import at, conf_map, node, pod, pod_group, queue
from scenarios.runner import Outcome

CONF = """
actions: "enqueue, reclaim, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}, {name: lifetime%s}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def with_lifetime(obj: dict[str, Any], lifetime: str | None) -> dict[str, Any]:
    if lifetime is not None:
        obj["metadata"].setdefault("annotations", {})["kbatch.io/lifetime"] = lifetime
    return obj


def queue_a_full_then_b_asks(lifetime: str | None, arguments: str = "") -> Outcome:
    """Queue a fills the 4-cpu node with four 1-cpu jobs at 0 s; at 30 s queue b asks
    for 2 cpu, within its half of the cluster."""
    docs: list[Any] = [conf_map(CONF % arguments), node("n1"), queue("a"), queue("b")]
    for i in range(4):
        docs.append(with_lifetime(pod_group(f"a{i}", queue="a"), lifetime))
        docs.append(pod(f"a{i}", group=f"a{i}"))
    docs.append(at(pod_group("b", queue="b"), "30s"))
    docs.append(at(pod("b", cpu="2", group="b"), "30s"))
    return Outcome(simulate(documents=docs, until="5m"))


def first_eviction(outcome: Outcome) -> float | None:
    times = [e["time"] for e in outcome.events("Evict", kind="Pod")]
    return min(times) if times else None


def test_a_job_past_its_lifetime_is_reclaimed_a_younger_one_is_not() -> None:
    outcome = queue_a_full_then_b_asks("2m")
    evicted = first_eviction(outcome)
    assert evicted is not None and 120.0 <= evicted <= 125.0, evicted
    assert outcome.pod("b")["phase"] == "Running"


def test_lifetime_zero_is_preemptible_at_once() -> None:
    assert first_eviction(queue_a_full_then_b_asks("0")) == 30.0


def test_a_job_without_a_lifetime_is_never_reclaimed_for_fair_share() -> None:
    outcome = queue_a_full_then_b_asks(None)
    assert first_eviction(outcome) is None
    assert outcome.pod("b")["phase"] == "Pending"


@pytest.mark.parametrize(("factor", "running"), [("1.0", 1), ("1.5", 2), ("2.25", 3)])
def test_non_preemptible_work_stays_within_its_share_factor(factor: str, running: int) -> None:
    """Queue a's fair share is a third of the 4 cpu (queues a, b and default, weight 1
    each): its non-preemptible jobs may take that times the factor."""
    outcome = queue_a_full_then_b_asks(
        None, f", arguments: {{nonPreemptibleShareFactor: {factor}}}"
    )
    assert (
        len([p for p in outcome.json["pods"] if p["name"].startswith("a") and p["node"]]) == running
    )


def test_a_bad_lifetime_is_refused_naming_the_field() -> None:
    bad = with_lifetime(pod_group("g"), "forever")
    result = simulate(documents=[node("n1"), bad])
    (warning,) = result["warnings"]
    assert warning["message"] == (
        "metadata.annotations.kbatch.io/lifetime: 'forever' is not a duration "
        "(e.g. 0, 30s, 2m, 1h30m)"
    )


def queue_a_asks_beyond_its_share(
    budget: str, lifetime: str = "10m", duration: str | None = None
) -> Outcome:
    """Queue a (fair share 4/3 cpu: a, b and default weigh 1 each) asks for four 1-cpu
    jobs of lifetime ``lifetime`` at 0 s, on one 4-cpu node, with an excess budget."""
    arguments = f", arguments: {{excessBudget: {budget}}}"
    docs: list[Any] = [conf_map(CONF % arguments), node("n1"), queue("a"), queue("b")]
    for i in range(4):
        docs.append(with_lifetime(pod_group(f"a{i}", queue="a"), lifetime))
        docs.append(pod(f"a{i}", group=f"a{i}", duration=duration))
    return Outcome(simulate(documents=docs, until="30m"))


def started(outcome: Outcome) -> list[float]:
    return sorted(e["time"] for e in outcome.events("Scheduled", kind="Pod"))


def test_finite_lifetime_work_beyond_fair_share_spends_the_budget() -> None:
    """The first job is within the share; each next one costs 10 min × 1 cpu; a budget
    of 20 cpu-minutes pays for two of them, not three. The fourth starts when the
    charges return, at the end of the lifetimes (10 min), though the jobs still run."""
    outcome = queue_a_asks_beyond_its_share("{cpu: 20}")
    times = started(outcome)
    assert times[:3] == [0.0, 0.0, 0.0]
    assert 600.0 <= times[3] <= 605.0, times


def test_the_budget_returns_when_a_job_ends() -> None:
    outcome = queue_a_asks_beyond_its_share("{cpu: 20}", duration="2m")
    times = started(outcome)
    assert times[:3] == [0.0, 0.0, 0.0]
    assert 120.0 <= times[3] <= 125.0, times


@pytest.mark.parametrize(("budget", "at_once"), [("{cpu: 5}", 1), ("{cpu: 30}", 4)])
def test_a_budget_pays_for_what_it_can(budget: str, at_once: int) -> None:
    times = started(queue_a_asks_beyond_its_share(budget))
    assert times.count(0.0) == at_once


def test_preemptible_work_costs_nothing_and_a_budget_of_another_resource_limits_nothing() -> None:
    assert started(queue_a_asks_beyond_its_share("{cpu: 1}", lifetime="0")).count(0.0) == 4
    assert started(queue_a_asks_beyond_its_share("{memory: 1Gi}")).count(0.0) == 4


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        ("{cpu: lots}", "excessBudget.cpu: 'lots' is not a Kubernetes quantity"),
        ("600", "excessBudget must map resource names to resource-minutes"),
    ],
)
def test_a_bad_budget_is_refused_naming_the_argument(budget: str, message: str) -> None:
    """A conf that cannot be read stops the run (the live scheduler keeps its last good one)."""
    arguments = f", arguments: {{excessBudget: {budget}}}"
    with pytest.raises(ConfigError, match=re.escape(f"plugin lifetime: arguments: {message}")):
        simulate(documents=[conf_map(CONF % arguments), node("n1")])
