"""The simulated PV controller (``kbatch.sim.volume_controller``): what it binds, what it
provisions and where the provisioned volume may be reached from, and what it leaves."""

from typing import Any

from kbatch.cluster.state import ClusterState
from kbatch.sim import clock, volume_controller
from kbatch.sim.backend import SimBackend
from scenarios.volume_objects import ZONE, claim, storage_class, volume, zoned

Obj = dict[str, Any]
ZONES = [{"matchLabelExpressions": [{"key": ZONE, "values": ["a", "b"]}]}]


def cluster_of(*objects: Obj) -> SimBackend:
    made = SimBackend(ClusterState(), clock.SimClock())
    for obj in objects:
        made.create(obj)
    return made


def got(cluster: SimBackend, kind: str, name: str) -> Obj:
    namespace = "default" if kind == "PersistentVolumeClaim" else ""
    found = cluster.state.get(kind, namespace, name)
    assert found is not None
    return found


def selected(obj: Obj, node: str) -> Obj:
    obj["metadata"]["annotations"] = {"volume.kubernetes.io/selected-node": node}
    return obj


def terms_of(pv: Obj) -> Any:
    return pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]


def test_an_immediate_claim_takes_the_smallest_free_volume_that_fits() -> None:
    cluster = cluster_of(
        storage_class("slow", "kubernetes.io/no-provisioner", "Immediate"),
        volume("big", "slow", "5Gi"),
        volume("small", "slow", "2Gi"),
        volume("tiny", "slow", "512Mi"),
        claim("c", "slow"),
    )
    volume_controller.reconcile(cluster)
    made = got(cluster, "PersistentVolumeClaim", "c")
    assert (made["spec"]["volumeName"], made["status"]["phase"]) == ("small", "Bound")
    assert made["status"]["capacity"] == {"storage": "2Gi"}
    pv = got(cluster, "PersistentVolume", "small")
    assert pv["status"]["phase"] == "Bound"
    assert pv["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] == "yes"
    assert pv["spec"]["claimRef"]["uid"] == made["metadata"]["uid"]


def test_an_immediate_claim_without_a_volume_waits_for_one() -> None:
    cluster = cluster_of(
        storage_class("slow", "kubernetes.io/no-provisioner", "Immediate"), claim("c", "slow")
    )
    volume_controller.reconcile(cluster)
    assert "volumeName" not in got(cluster, "PersistentVolumeClaim", "c")["spec"]
    cluster.create(volume("late", "slow"))
    volume_controller.reconcile(cluster)
    assert got(cluster, "PersistentVolumeClaim", "c")["spec"]["volumeName"] == "late"


def test_an_immediate_class_provisions_within_its_allowed_topologies() -> None:
    cls = {**storage_class("zonal", mode="Immediate"), "allowedTopologies": ZONES}
    cluster = cluster_of(cls, claim("c", "zonal"))
    volume_controller.reconcile(cluster)
    made = got(cluster, "PersistentVolumeClaim", "c")
    pv = got(cluster, "PersistentVolume", made["spec"]["volumeName"])
    assert pv["metadata"]["name"] == f"pvc-{made['metadata']['uid']}"
    assert (pv["spec"]["storageClassName"], pv["spec"]["capacity"]) == ("zonal", {"storage": "1Gi"})
    assert terms_of(pv) == [
        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a", "b"]}]}
    ]


def test_a_claim_bound_on_first_use_waits_for_its_pods_bind() -> None:
    cluster = cluster_of(storage_class(), zoned("n1", "a"), claim("c"))
    volume_controller.reconcile(cluster)
    assert "status" not in got(cluster, "PersistentVolumeClaim", "c")
    before = cluster.changes
    volume_controller.reconcile(cluster)
    assert cluster.changes == before and not cluster.touched.volumes  # (nothing to look at)


def test_a_selected_node_pins_the_volume_to_the_class_topology_keys_else_its_zone() -> None:
    pinned = {**storage_class("zonal"), "allowedTopologies": ZONES}
    cluster = cluster_of(
        pinned, storage_class("any"), zoned("n1", "b"), selected(claim("c", "zonal"), "n1")
    )
    cluster.create(selected(claim("d", "any"), "n1"))
    cluster.create(selected(claim("e", "any"), "bare"))
    cluster.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}})
    volume_controller.reconcile(cluster)
    in_b = [{"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["b"]}]}]
    for name in ("c", "d"):
        made = got(cluster, "PersistentVolumeClaim", name)
        assert terms_of(got(cluster, "PersistentVolume", made["spec"]["volumeName"])) == in_b
    made = got(cluster, "PersistentVolumeClaim", "e")
    assert (
        "nodeAffinity" not in got(cluster, "PersistentVolume", made["spec"]["volumeName"])["spec"]
    )


def test_a_claim_a_bind_gave_a_volume_is_bound_to_it() -> None:
    cluster = cluster_of(
        storage_class("local", "kubernetes.io/no-provisioner"), claim("c", "local")
    )
    uid = got(cluster, "PersistentVolumeClaim", "c")["metadata"]["uid"]
    ref = {"namespace": "default", "name": "c", "uid": uid}
    cluster.create({**volume("pv", "local"), "spec": {**volume("pv")["spec"], "claimRef": ref}})
    volume_controller.reconcile(cluster)
    made = got(cluster, "PersistentVolumeClaim", "c")
    assert (made["spec"]["volumeName"], made["status"]["phase"]) == ("pv", "Bound")
