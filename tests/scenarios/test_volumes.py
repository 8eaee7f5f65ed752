"""Pods with persistent volumes (DESIGN §15): a pod goes where its claims' volumes can
follow it; its bind first binds or selects a node for its claims bound on first use,
and the simulated PV controller binds and provisions them (``kbatch.sim.volume_controller``),
so that the simulator says what kbatch and a real cluster would."""

from typing import Any

from kbatch.sim import run
from scenarios.objects import Obj, conf_map, node, pod, pod_group
from scenarios.volume_objects import (
    NO_PROVISIONER,
    ZONE,
    claim,
    claim_spec,
    mounting,
    on_node,
    storage_class,
    volume,
    zoned,
)


def placed(outcome: Any) -> dict[str, str | None]:
    """Each pod's node (None: not bound)."""
    pods = outcome.cluster.state.list("Pod")
    return {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}


def got(outcome: Any, kind: str, name: str) -> Obj:
    """The object of ``kind`` named ``name`` (in ``default`` if namespaced)."""
    namespace = "" if kind in ("PersistentVolume", "StorageClass") else "default"
    found = outcome.cluster.state.get(kind, namespace, name)
    assert found is not None, f"no {kind} {name}"
    return dict(found)


def test_a_gang_mounting_claims_bound_on_first_use_starts_with_volumes_provisioned() -> None:
    docs = [storage_class(), zoned("n1", "a"), zoned("n2", "b"), pod_group("g", 3)]
    docs += [mounting(pod(f"g-{i}", cpu="3", group="g"), f"data-{i}") for i in range(3)]
    docs += [claim(f"data-{i}") for i in range(3)]
    docs.append(zoned("n3", "a"))
    outcome = run(documents=docs, until="1m")
    nodes = placed(outcome)
    assert sorted(nodes.values()) == ["n1", "n2", "n3"]  # (3 cpu each: one a node)
    for i in range(3):
        made = got(outcome, "PersistentVolumeClaim", f"data-{i}")
        assert made["status"]["phase"] == "Bound"
        assert (
            made["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == nodes[f"g-{i}"]
        )
        pv = got(outcome, "PersistentVolume", made["spec"]["volumeName"])
        assert pv["status"]["phase"] == "Bound"
        assert pv["spec"]["claimRef"]["name"] == f"data-{i}"
        assert pv["spec"]["claimRef"]["uid"] == made["metadata"]["uid"]
        zone = "b" if nodes[f"g-{i}"] == "n2" else "a"
        (term,) = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert term["matchExpressions"] == [{"key": ZONE, "operator": "In", "values": [zone]}]


def test_a_bound_volume_with_zone_affinity_keeps_its_pod_in_that_zone() -> None:
    docs = [storage_class("zonal"), zoned("n1", "a", cpu="8"), zoned("n2", "b")]
    bound = volume("pv-b", "zonal", nodeAffinity=on_node("pv-b", "b", key=ZONE))
    bound["spec"]["claimRef"] = {"namespace": "default", "name": "data"}
    docs += [bound, claim("data", "zonal"), mounting(pod("user"), "data")]
    outcome = run(documents=docs, until="1m")
    assert placed(outcome)["user"] == "n2"  # (n1 has more room, but the volume is in b)
    made = got(outcome, "PersistentVolumeClaim", "data")
    assert (made["spec"]["volumeName"], made["status"]["phase"]) == ("pv-b", "Bound")


def test_static_local_volumes_one_per_node_are_never_taken_twice() -> None:
    docs: list[Any] = [storage_class("local", NO_PROVISIONER)]
    docs += [zoned(f"n{i}", "a") for i in range(3)]
    docs += [volume(f"pv-{i}", nodeAffinity=on_node(f"pv-{i}", f"n{i}")) for i in (0, 1)]
    docs += [claim(f"data-{i}", "local") for i in range(3)]
    docs += [mounting(pod(f"p-{i}"), f"data-{i}") for i in range(3)]
    outcome = run(documents=docs, until="1m")
    nodes = placed(outcome)
    started = {name: where for name, where in nodes.items() if where}
    assert len(started) == 2 and set(started.values()) == {"n0", "n1"}
    volumes = {}
    for name in started:
        made = got(outcome, "PersistentVolumeClaim", f"data-{name[-1]}")
        assert made["status"]["phase"] == "Bound"
        volumes[name] = made["spec"]["volumeName"]
        assert volumes[name] == f"pv-{started[name][-1]}"  # (the volume on its node)
    assert len(set(volumes.values())) == 2
    (waiting,) = set(nodes) - set(started)
    assert "status" not in got(outcome, "PersistentVolumeClaim", f"data-{waiting[-1]}")
    told = {e.message for e in outcome.cluster.event_log if e.name == waiting}
    assert (
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
        in told
    )


def test_a_pod_whose_claim_is_missing_waits_and_says_so() -> None:
    outcome = run(documents=[node("n1"), mounting(pod("lonely"), "nowhere")], until="30s")
    assert placed(outcome) == {"lonely": None}
    obj = outcome.cluster.state.get("Pod", "default", "lonely")
    (condition,) = [c for c in obj["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert condition["status"] == "False"
    assert condition["message"] == (
        '0/1 nodes are available: 1 persistentvolumeclaim "nowhere" not found.'
    )


def test_a_pod_with_a_generic_ephemeral_volume_starts() -> None:
    ephemeral = pod("scratch")
    template = {"metadata": {"labels": {"app": "scratch"}}, "spec": claim_spec()}
    ephemeral["spec"]["volumes"] = [
        {"name": "work", "ephemeral": {"volumeClaimTemplate": template}}
    ]
    outcome = run(documents=[storage_class(), zoned("n1", "a"), ephemeral], until="30s")
    assert placed(outcome) == {"scratch": "n1"}
    made = got(outcome, "PersistentVolumeClaim", "scratch-work")
    assert made["metadata"]["labels"] == {"app": "scratch"}
    (owner,) = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("Pod", "scratch")
    assert made["status"]["phase"] == "Bound"


def test_an_immediate_claim_is_bound_by_the_pv_controller_then_its_pod_starts() -> None:
    docs = [storage_class("standard", mode="Immediate", default=True), node("n1")]
    docs += [claim("data", storage_class=None), mounting(pod("user"), "data")]
    outcome = run(documents=docs, until="30s")
    assert placed(outcome) == {"user": "n1"}
    made = got(outcome, "PersistentVolumeClaim", "data")
    assert made["spec"]["storageClassName"] == "standard"  # (the default class)
    assert made["status"]["phase"] == "Bound"
    pv = got(outcome, "PersistentVolume", made["spec"]["volumeName"])
    assert pv["spec"]["capacity"] == {"storage": "1Gi"}
    assert "nodeAffinity" not in pv["spec"]


def shared_gang(cpu: str) -> list[dict]:
    """A gang of two whose pods share one claim bound on first use, on two 2-cpu nodes."""
    shared = claim("shared")
    shared["spec"]["accessModes"] = ["ReadWriteMany"]
    docs = [storage_class(), zoned("n1", "a", cpu="2"), zoned("n2", "b", cpu="2"), shared]
    docs += [pod_group("g", 2)]
    docs += [mounting(pod(f"g-{i}", cpu=cpu, group="g"), "shared") for i in range(2)]
    return docs


def test_a_gang_that_shares_a_claim_starts_where_its_volume_is_made() -> None:
    outcome = run(documents=shared_gang("1"), until="30s")
    nodes = placed(outcome)
    (where,) = set(nodes.values())
    assert set(nodes) == {"g-0", "g-1"} and where
    made = got(outcome, "PersistentVolumeClaim", "shared")
    assert made["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == where
    pv = got(outcome, "PersistentVolume", made["spec"]["volumeName"])
    (term,) = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["a" if where == "n1" else "b"]


def test_a_gang_that_shares_a_claim_no_node_holds_waits_whole() -> None:
    """Its volume would be made for one node, which holds one of its pods: neither is
    bound (once, a session placed them apart and the second bind was refused: a gang
    half bound), and nothing is provisioned."""
    # (without enqueue, which would not admit it: ``test_..._is_not_admitted_to_hold_room``)
    tiers = "tiers:\n- plugins: [{name: gang}, {name: predicates}, {name: nodeorder}]\n"
    conf = conf_map(f"actions: 'allocate, backfill'\n{tiers}")
    outcome = run(documents=[conf, *shared_gang("2")], until="30s")
    assert not any(placed(outcome).values())
    made = got(outcome, "PersistentVolumeClaim", "shared")
    assert "volume.kubernetes.io/selected-node" not in (made["metadata"].get("annotations") or {})
    told = {e.message for e in outcome.cluster.event_log if e.name == "g-0"}
    assert any("didn't find available persistent volumes to bind" in m for m in told), told


def test_a_gang_that_shares_a_claim_no_node_holds_is_not_admitted_to_hold_room() -> None:
    """Its pods must share one node, which no node can hold: it is told so and holds no
    room, so the gang after it, which fits, runs (it waited behind it for ever)."""
    docs = [*shared_gang("2"), pod_group("h", 2)]
    docs += [pod(f"h-{i}", cpu="2", group="h") for i in range(2)]
    outcome = run(documents=docs, until="30s")
    nodes = placed(outcome)
    assert (nodes["g-0"], nodes["g-1"]) == (None, None)
    assert {nodes["h-0"], nodes["h-1"]} == {"n1", "n2"}
    (group,) = [g for g in outcome.cluster.state.list("PodGroup") if g["metadata"]["name"] == "g"]
    assert group["status"]["phase"] == "Pending"
    (condition,) = group["status"]["conditions"]
    assert "all on one node, where the volume of a claim they share is made" in condition["message"]
