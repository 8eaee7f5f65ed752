"""Pending pods' PodScheduled condition (DESIGN §13): what autoscalers read."""

from typing import Any

from kbatch.sim import run
from scenarios.objects import conf_map, node, pod, pod_group, queue


def scheduled_condition(outcome: Any, name: str) -> dict[str, Any] | None:
    obj = outcome.cluster.state.get("Pod", "default", name)
    found = [c for c in obj["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    return found[0] if found else None


def test_a_pod_no_node_takes_is_unschedulable_in_kube_schedulers_words() -> None:
    outcome = run(documents=[node("n1", cpu="2"), pod("big", cpu="4")], until="30s")
    condition = scheduled_condition(outcome, "big")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert condition["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert condition["lastTransitionTime"] == "1970-01-01T00:00:00Z", "written once, at 0 s"


def test_a_bound_pod_is_scheduled() -> None:
    outcome = run(documents=[node("n1"), pod("small")], until="10s")
    condition = scheduled_condition(outcome, "small")
    assert condition is not None and condition["status"] == "True"


def test_a_gang_the_cluster_cannot_hold_yet_is_unschedulable_for_the_autoscaler() -> None:
    """Not admitted because the cluster lacks room: one more node would help."""
    docs: list[Any] = [node("n1", cpu="2"), pod_group("g", min_member=3)]
    docs += [pod(f"g-{i}", group="g") for i in range(3)]
    outcome = run(documents=docs, until="30s")
    condition = scheduled_condition(outcome, "g-0")
    assert condition is not None and condition["reason"] == "Unschedulable"
    assert condition["message"].endswith(
        "not admitted: 3 pods of cpu 1 never fit on the nodes, even empty: they hold 2 of them"
    )


CAPPED = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def test_a_pod_its_queue_holds_is_queue_limited_which_autoscalers_ignore() -> None:
    """Queue a may take 1 cpu (capability); its second 1-cpu pod waits for the queue,
    on an 8-cpu node with room: a new node would not help."""
    capped = queue("a")
    capped["spec"]["capability"] = {"cpu": "1"}
    docs: list[Any] = [conf_map(CAPPED), node("n1", cpu="8"), capped]
    for name in ("first", "second"):
        docs += [pod_group(name, queue="a"), pod(name, group=name)]
    outcome = run(documents=docs, until="30s")
    condition = scheduled_condition(outcome, "second")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "kbatch.io/QueueLimited")
    assert "capability" in condition["message"]
    assert "more nodes would not help" in condition["message"]
