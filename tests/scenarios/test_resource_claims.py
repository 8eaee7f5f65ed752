"""Pods with resource claims (Dynamic Resource Allocation, ``spec.resourceClaims``) in the
simulator, which takes DeviceClasses, ResourceSlices and ResourceClaims from its input:
a gang whose pods each want a GPU is bound to the nodes that have them, each claim
allocated and reserved for its pod; a pod wanting a GPU none has free waits, told so
in kube-scheduler's words; a pod whose claim is not made waits, and a gang with one is
not admitted, holding no room; the rest of the cluster goes on."""

from typing import Any

from kbatch.sim import simulate
from scenarios.objects import Obj, node, pod, pod_group
from unit.cluster.test_dra_records import device_class, gpu, resource_claim, resource_slice

WAITING = 'waiting for resourceclaim of pod claim "gpu" to be created'


def claiming(obj: Obj, claim: str = "", template: str = "one-gpu") -> Obj:
    source = {"resourceClaimName": claim} if claim else {"resourceClaimTemplateName": template}
    obj["spec"]["resourceClaims"] = [{"name": "gpu", **source}]
    return obj


def gpu_cluster() -> list[Any]:
    return [
        node("n1"),
        node("n2"),
        device_class(),
        resource_slice("n1", gpu("gpu-0")),
        resource_slice("n2", gpu("gpu-0")),
        *(resource_claim(f"c{i}") for i in range(3)),
    ]


def test_a_gang_is_bound_where_its_devices_are_and_its_claims_allocated() -> None:
    docs = [*gpu_cluster(), pod_group("g", 2)]
    docs += [claiming(pod(f"g-{i}", group="g"), f"c{i}") for i in range(2)]
    result = simulate(documents=docs, until="1m")
    assert sorted(p["node"] for p in result["pods"]) == ["n1", "n2"]


def test_a_pod_wanting_a_gpu_none_has_free_waits_told_why() -> None:
    docs = [*gpu_cluster(), pod_group("g", 2)]
    docs += [claiming(pod(f"g-{i}", group="g"), f"c{i}") for i in range(2)]
    docs.append(claiming(pod("late", duration="10m"), "c2"))
    result = simulate(documents=docs, until="1m")
    assert {p["name"]: p["node"] for p in result["pods"]}["late"] is None
    told = {e["message"] for e in result["events"] if e["name"] == "late"}
    assert "0/2 nodes are available: 2 cannot allocate all claims." in told


def test_a_pod_whose_claim_is_not_made_is_not_bound_and_told_why() -> None:
    docs: list[Any] = [node("n1"), node("n2"), claiming(pod("claims")), pod("plain")]
    result = simulate(documents=docs, until="1m")
    assert {p["name"]: p["node"] for p in result["pods"]} == {"claims": None, "plain": "n1"}
    (told,) = {e["message"] for e in result["events"] if e["name"] == "claims"}
    assert told == f"0/2 nodes are available: 2 {WAITING}."


def test_a_gang_with_a_pod_whose_claim_waits_is_not_admitted() -> None:
    docs: list[Any] = [node("n1"), pod_group("g", 2), pod("g-0", group="g")]
    docs.append(claiming(pod("g-1", group="g")))
    result = simulate(documents=docs, until="1m")
    assert not [p for p in result["pods"] if p["node"]]
    (group,) = result["podGroups"]
    assert group["phase"] == "Pending"
    assert WAITING in group["conditions"][0]["message"]
