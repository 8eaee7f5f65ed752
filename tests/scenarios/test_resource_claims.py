"""Pods with resource claims (dynamic resource allocation, ``spec.resourceClaims``):
kbatch allocates no claims, so no node takes such a pod, and it says so in
kube-scheduler's words; a gang that needs one is not admitted, and holds no room;
the rest of the cluster goes on."""

from typing import Any

from kbatch.sim import simulate
from scenarios.objects import Obj, node, pod, pod_group

WORDS = "pod has resource claims (spec.resourceClaims), which kbatch does not allocate"


def claiming(obj: Obj) -> Obj:
    obj["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    return obj


def test_a_pod_with_resource_claims_is_not_bound_and_told_why() -> None:
    docs: list[Any] = [node("n1"), node("n2"), claiming(pod("claims")), pod("plain")]
    result = simulate(documents=docs, until="1m")
    assert {p["name"]: p["node"] for p in result["pods"]} == {"claims": None, "plain": "n1"}
    (told,) = {e["message"] for e in result["events"] if e["name"] == "claims"}
    assert told == f"0/2 nodes are available: 2 {WORDS}."


def test_a_gang_with_a_claiming_pod_is_not_admitted() -> None:
    docs: list[Any] = [node("n1"), pod_group("g", 2), pod("g-0", group="g")]
    docs.append(claiming(pod("g-1", group="g")))
    result = simulate(documents=docs, until="1m")
    assert not [p for p in result["pods"] if p["node"]]
    (group,) = result["podGroups"]
    assert group["phase"] == "Pending"
    assert WORDS in group["conditions"][0]["message"]
