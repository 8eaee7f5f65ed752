"""A claim only one pod may use (ReadWriteOncePod) and nodes' CSI attach limits in the
simulator (DESIGN §15, ``kbatch.cluster.volume_use``): a pod waits, told why in
kube-scheduler's words, while another pod uses its claim, and starts once that pod is
done; a gang whose pods share such a claim waits whole; a node at its limit sends the
pod to another, or it waits; CSINodes are read from the input and refused when bad."""

import re
from typing import Any

import pytest

from kbatch.sim import run, simulate
from scenarios.objects import Obj, conf_map, node, pod, pod_group
from scenarios.test_volumes import got, placed
from scenarios.volume_objects import claim, mounting, storage_class, zoned

DRIVER = "csi.example.com"  # (the provisioner of ``storage_class()``)
RWOP_WORDS = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)


def single_pod_claim(name: str) -> Obj:
    made = claim(name)
    made["spec"]["accessModes"] = ["ReadWriteOncePod"]
    return made


def csi_node(name: str, count: int | None) -> Obj:
    driver: Obj = {"name": DRIVER, "nodeID": name}
    if count is not None:
        driver["allocatable"] = {"count": count}
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [driver]},
    }


def told(outcome: Any, name: str) -> set[str]:
    return {e.message for e in outcome.cluster.event_log if e.name == name}


def condition(outcome: Any, name: str) -> str:
    obj = outcome.cluster.state.get("Pod", "default", name)
    (found,) = [c for c in obj["status"]["conditions"] if c["type"] == "PodScheduled"]
    return str(found["message"])


def test_a_pod_waits_for_the_pod_using_its_single_pod_claim_then_starts() -> None:
    docs = [storage_class(), zoned("n1", "a"), zoned("n2", "b"), single_pod_claim("data")]
    docs += [mounting(pod("first", duration="40s"), "data")]
    later = mounting(pod("second", duration="10s"), "data")
    later["metadata"]["annotations"]["kbatch.io/sim-submit-at"] = "10s"
    docs.append(later)
    waiting = run(documents=docs, until="35s")  # (first runs until 40s)
    assert placed(waiting)["first"] is not None and placed(waiting)["second"] is None
    assert condition(waiting, "second") == f"0/2 nodes are available: 2 {RWOP_WORDS}."
    assert placed(run(documents=docs, until="45s"))["second"] is not None


@pytest.mark.parametrize("enqueue", [True, False])
def test_a_gang_whose_pods_share_a_single_pod_claim_waits_whole_saying_why(
    enqueue: bool,
) -> None:
    """It can never start: not admitted (it would hold the room admitted for it); tried
    all the same (no enqueue), never half bound."""
    docs = [storage_class(), zoned("n1", "a"), zoned("n2", "b"), single_pod_claim("shared")]
    docs += [pod_group("g", 2)]
    docs += [mounting(pod(f"g-{i}", group="g"), "shared") for i in range(2)]
    if not enqueue:
        tiers = "tiers:\n- plugins: [{name: gang}, {name: predicates}, {name: nodeorder}]\n"
        docs.append(conf_map(f"actions: 'allocate, backfill'\n{tiers}"))
    outcome = run(documents=docs, until="1m")
    assert placed(outcome) == {"g-0": None, "g-1": None}
    words = RWOP_WORDS if not enqueue else "one at a time: they share a ReadWriteOncePod claim"
    assert any(words in m for m in told(outcome, "g-0") | told(outcome, "g-1"))
    made = got(outcome, "PersistentVolumeClaim", "shared")  # (nothing bound for it)
    assert "volume.kubernetes.io/selected-node" not in (made["metadata"].get("annotations") or {})


def limited_cluster(n1: int | None, n2: int | None, pods: int) -> list[Obj]:
    """Two nodes whose CSINodes let them attach ``n1`` and ``n2`` volumes of the class's
    driver, and ``pods`` pods of a claim each (each claim's volume provisioned)."""
    docs = [storage_class(), zoned("n1", "a", cpu="8"), zoned("n2", "b", cpu="8")]
    docs += [csi_node("n1", n1), csi_node("n2", n2)]
    docs += [claim(f"data-{i}") for i in range(pods)]
    docs += [mounting(pod(f"p-{i}", duration="30s"), f"data-{i}") for i in range(pods)]
    return docs


def test_a_node_at_its_attach_limit_sends_the_pod_to_another() -> None:
    outcome = run(documents=limited_cluster(1, 3, 3), until="20s")
    nodes = placed(outcome)
    assert sorted(nodes.values()) == ["n1", "n2", "n2"]  # (the scores alone would spread them)
    for i in range(3):  # (volumes of the driver: the count stands once they are bound)
        made = got(outcome, "PersistentVolumeClaim", f"data-{i}")
        pv = got(outcome, "PersistentVolume", made["spec"]["volumeName"])
        assert pv["spec"]["csi"]["driver"] == DRIVER


def test_a_pod_waits_while_every_node_is_at_its_attach_limit() -> None:
    docs = limited_cluster(1, 1, 3)
    early = run(documents=docs, until="20s")
    nodes = placed(early)
    assert sorted(n for n in nodes.values() if n) == ["n1", "n2"]
    (waiting,) = [name for name, where in nodes.items() if where is None]
    assert (
        condition(early, waiting) == "0/2 nodes are available: 2 node(s) exceed max volume count."
    )
    assert placed(run(documents=docs, until="2m"))[waiting] is not None  # (once one is done)


def test_a_node_without_a_count_for_the_driver_is_not_limited() -> None:
    outcome = run(documents=limited_cluster(0, None, 2), until="20s")
    assert placed(outcome) == {"p-0": "n2", "p-1": "n2"}


def test_csinodes_are_read_and_refused_when_bad_naming_the_field() -> None:
    bad = csi_node("n1", 1)
    bad["spec"]["drivers"][0]["allocatable"]["count"] = -2
    no_id = csi_node("n2", 1)
    del no_id["spec"]["drivers"][0]["nodeID"]
    notes: list[str] = []
    result = simulate(documents=[node("n1"), node("n2"), pod("ok"), bad, no_id], warn=notes.append)
    messages = {(w["kind"], w["name"]): w["message"] for w in result["warnings"]}
    assert messages == {
        ("CSINode", "n1"): "spec.drivers[0].allocatable.count: must be >= 0, not -2",
        ("CSINode", "n2"): "spec.drivers[0].nodeID: required",
    }
    assert any(re.match(r"CSINode n1 refused: spec\.drivers\[0\]", n) for n in notes)
    assert [p["node"] for p in result["pods"] if p["name"] == "ok"] != [None]
