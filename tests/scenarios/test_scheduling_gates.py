"""Pods held by scheduling gates (Kubernetes' spec.schedulingGates, GA in 1.30) are not
scheduled: a gang that needs one waits whole, says which gates hold it, and takes no
room; the rest of the cluster goes on."""

from typing import Any

from kbatch.sim import simulate
from scenarios.objects import Obj, node, pod, pod_group


def gated(obj: Obj, *gates: str) -> Obj:
    obj["spec"]["schedulingGates"] = [{"name": gate} for gate in gates]
    return obj


def bound(result: dict[str, Any]) -> list[str]:
    return sorted(p["name"] for p in result["pods"] if p["node"])


def test_a_gang_with_a_gated_pod_binds_none_and_says_why() -> None:
    docs: list[Any] = [node("n1", cpu="4"), pod_group("held", 3), pod_group("free", 2)]
    docs += [pod(f"held-{i}", group="held") for i in range(2)]
    docs.append(gated(pod("held-2", group="held"), "example.com/quota"))
    docs += [pod(f"free-{i}", group="free") for i in range(2)]
    result = simulate(documents=docs, until="1m")
    assert bound(result) == ["free-0", "free-1"]
    (held,) = [g for g in result["podGroups"] if g["name"] == "held"]
    assert held["phase"] == "Pending"  # not admitted: it holds no room in its queue
    (condition,) = held["conditions"]
    assert condition["reason"] == "SchedulingGated"
    assert condition["message"].endswith(
        "1 pod waits for scheduling gates to be removed: example.com/quota"
    )


def test_an_elastic_gang_runs_its_pods_that_are_not_gated() -> None:
    docs: list[Any] = [node("n1", cpu="4"), pod_group("g", 2)]
    docs += [pod(f"g-{i}", group="g") for i in range(2)]
    docs.append(gated(pod("g-2", group="g"), "a", "b"))
    result = simulate(documents=docs, until="1m")
    assert bound(result) == ["g-0", "g-1"]


def test_a_gated_pod_of_its_own_waits_without_a_word_of_kbatch() -> None:
    """The API server marks it (PodScheduled False, SchedulingGated); kbatch writes no
    condition or event of its own over that, and binds nothing."""
    docs: list[Any] = [node("n1", cpu="4"), gated(pod("solo"), "x"), pod("other")]
    result = simulate(documents=docs, until="1m")
    assert bound(result) == ["other"]
    assert not [e for e in result["events"] if "solo" in str(e)]
