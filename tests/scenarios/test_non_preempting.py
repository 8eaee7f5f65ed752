"""Non-preempting priority (``preemptionPolicy: Never``, on the PriorityClass or the
pod): the high-priority gang of policy/preempt-priority.yaml goes first in line but
evicts nobody; it waits for room instead. With the default policy it evicts two pods
(test_policy.py)."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from kbatch.sim import simulate
from scenarios.runner import Outcome

HERE = Path(__file__).parent


def documents() -> list[dict[str, Any]]:
    text = (HERE / "policy" / "preempt-priority.yaml").read_text(encoding="utf-8")
    return [doc for doc in yaml.safe_load_all(text) if doc]


def named(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    (found,) = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


@pytest.mark.parametrize("where", ["class", "pod"])
def test_a_non_preempting_gang_evicts_nobody(where: str) -> None:
    docs = documents()
    if where == "class":
        named(docs, "PriorityClass", "high")["preemptionPolicy"] = "Never"
    else:
        named(docs, "Job", "high")["spec"]["template"]["spec"]["preemptionPolicy"] = "Never"
    outcome = Outcome(simulate(documents=docs, until="1m"))
    assert outcome.summary["evictions"] == 0
    assert outcome.running(job="high") == []
    assert len(outcome.running(job="low")) == 4


def test_a_bad_preemption_policy_is_refused_naming_the_field() -> None:
    docs = documents()
    named(docs, "PriorityClass", "high")["preemptionPolicy"] = "Sometimes"
    result = simulate(documents=docs, until="10s", warn=lambda _: None)
    (warning,) = [w for w in result["warnings"] if w["kind"] == "PriorityClass"]
    assert warning["name"] == "high" and warning["message"] == (
        "preemptionPolicy: must be 'PreemptLowerPriority' or 'Never', not 'Sometimes'"
    )
