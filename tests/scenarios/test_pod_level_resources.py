"""A pod's own requests (``spec.resources``, Kubernetes 1.34 on) are what it takes of a
node, not its containers' sum: two pods of 1 cpu in containers but 3 as pods do not
share a 4-cpu node, and the one left says why."""

from typing import Any

from kbatch.sim import simulate
from scenarios.objects import node, pod


def test_pods_take_their_own_requests_of_a_node() -> None:
    docs: list[Any] = [node("n1", cpu="4")]
    for name in ("first", "second"):
        doc = pod(name, cpu="1")
        doc["spec"]["resources"] = {"requests": {"cpu": "3"}}
        docs.append(doc)
    result = simulate(documents=docs, until="1m")
    assert {p["name"]: p["node"] for p in result["pods"]} == {"first": "n1", "second": None}
    (told,) = {e["message"] for e in result["events"] if e["name"] == "second"}
    assert told == "0/1 nodes are available: 1 Insufficient cpu."
