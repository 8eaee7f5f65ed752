"""Persistent volumes on a real API server, with kube-controller-manager's PV controller:

- a gang whose pods claim a local PV (bound on first use, in one zone only) and a
  volume to be provisioned is bound whole, the first pod in that zone; before the binds, kbatch binds the PV
  to its claim (which the PV controller completes) and selects the node for the
  provisioner (played here: it makes the PV, the PV controller binds it);
- a pod whose claim does not exist waits, its PodScheduled condition saying so; once
  the claim is made and bound by the PV controller (Immediate), the pod is bound;
- a pod whose claim is bound to a PV of one zone is bound there, not to the roomier
  node beside it;
- a pod's generic ephemeral volume: kbatch waits for the claim the ephemeral-volume
  controller makes, then binds the pod and selects its node (1.21 on).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_ha import MERGE, Corner
from kbatch.kubeapi import ApiError, request

pytestmark = pytest.mark.e2e

Json = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
SELECTED_NODE = "volume.kubernetes.io/selected-node"


class Volumes:
    """A corner's StorageClasses, PVs and claims (cluster-scoped ones removed after)."""

    def __init__(self, corner: Corner) -> None:
        self.corner = corner
        self.api = corner.api
        self.made: list[str] = []  # cluster-scoped paths, deleted at the end

    def zoned_nodes(self, *zones: str, cpu: str = "4") -> list[str]:
        names = []
        for i, zone in enumerate(zones):
            name = f"vol-{self.corner.suffix}-{i}"
            self.corner.add_node(name, cpu)
            labels = {ZONE: zone, "kubernetes.io/hostname": name}
            request(
                self.api, "PATCH", f"/api/v1/nodes/{name}", {"metadata": {"labels": labels}}, MERGE
            )
            names.append(name)
        return names

    def storage_class(self, name: str, provisioner: str, mode: str) -> str:
        full = f"{name}-{self.corner.suffix}"
        body = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": full},
            "provisioner": provisioner,
            "volumeBindingMode": mode,
        }
        request(self.api, "POST", "/apis/storage.k8s.io/v1/storageclasses", body)
        self.made.append(f"/apis/storage.k8s.io/v1/storageclasses/{full}")
        return full

    def volume(self, name: str, storage_class: str, zone: str, claim: str | None = None) -> str:
        full = f"{name}-{self.corner.suffix}"
        affinity = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
        spec: Json = {
            "storageClassName": storage_class,
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "local": {"path": "/mnt/disk"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [affinity]}},
        }
        if claim is not None:
            spec["claimRef"] = {"namespace": self.corner.namespace, "name": claim}
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": full},
            "spec": spec,
        }
        request(self.api, "POST", "/api/v1/persistentvolumes", body)
        self.made.append(f"/api/v1/persistentvolumes/{full}")
        return full

    def claim(self, name: str, storage_class: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": self.corner.namespace},
            "spec": {
                "storageClassName": storage_class,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        request(self.api, "POST", f"{self.claims}", body)

    @property
    def claims(self) -> str:
        return f"/api/v1/namespaces/{self.corner.namespace}/persistentvolumeclaims"

    def read_claim(self, name: str) -> Json:
        return request(self.api, "GET", f"{self.claims}/{name}")

    def pod(self, name: str, claim: str, group: str | None = None) -> Json:
        made = self.corner.pod(name, "1", group)
        made["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        return made

    def close(self) -> None:
        for path in reversed(self.made):
            try:
                request(self.api, "DELETE", path, {"gracePeriodSeconds": 0})
            except ApiError as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
def volumes(corner: Corner, control_plane: Any) -> Iterator[Volumes]:
    if not control_plane.controllers:
        pytest.skip("e2e: no kube-controller-manager: no PV controller to bind claims")
    made = Volumes(corner)
    try:
        yield made
    finally:
        made.close()


def placed(corner: Corner) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in corner.bound()}


def test_a_gang_s_claims_are_bound_and_provisioned_where_it_goes(
    corner: Corner, volumes: Volumes, kbatch_runs: Any
) -> None:
    a, b = volumes.zoned_nodes("a", "b")
    local = volumes.storage_class("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer")
    made = volumes.storage_class("made", "example.com/e2e-disks", "WaitForFirstConsumer")
    disk = volumes.volume("disk-b", local, "b")
    volumes.claim("scratch", local)
    volumes.claim("results", made)
    corner.add_group("g", 2)
    corner.add_pods([volumes.pod("p0", "scratch", "g"), volumes.pod("p1", "results", "g")])
    run = corner.start_kbatch(kbatch_runs, "volumes")
    try:
        where = poll("the gang bound", lambda: len(placed(corner)) == 2 and placed(corner), 60)
        assert where["p0"] == b  # where the local disk is; p1's volume may be made anywhere
        scratch = poll(
            "the PV controller binds the local disk's claim",
            lambda: (c := volumes.read_claim("scratch"))["status"].get("phase") == "Bound" and c,
            60,
        )
        assert scratch["spec"]["volumeName"] == disk
        results = volumes.read_claim("results")
        assert results["metadata"]["annotations"][SELECTED_NODE] == where["p1"]
        # the provisioner, played: a volume where the selected node reaches it
        volumes.volume("provisioned", made, "a" if where["p1"] == a else "b", claim="results")
        poll(
            "the PV controller binds the provisioned claim",
            lambda: volumes.read_claim("results")["status"].get("phase") == "Bound",
            60,
        )
        assert run.alive
    finally:
        run.stop()


def test_a_pod_waits_for_its_claim_then_is_bound(
    corner: Corner, volumes: Volumes, kbatch_runs: Any
) -> None:
    volumes.zoned_nodes("a")
    now = volumes.storage_class("now", "kubernetes.io/no-provisioner", "Immediate")
    corner.add_pods([volumes.pod("p", "later")])
    run = corner.start_kbatch(kbatch_runs, "claim-waits")
    try:
        told = poll(
            "the pod told why it waits",
            lambda: (
                (c := corner.pod_condition("p", "PodScheduled")) and "later" in c["message"] and c
            ),
            30,
        )
        assert 'persistentvolumeclaim "later" not found' in told["message"], told["message"]
        volumes.volume("for-later", now, "a")
        volumes.claim("later", now)  # bound by the PV controller (Immediate), then the pod
        poll("the pod bound", lambda: placed(corner), 60)
        assert run.alive
    finally:
        run.stop()
    assert volumes.read_claim("later")["status"]["phase"] == "Bound"


def test_a_pod_goes_where_its_bound_volume_is(
    corner: Corner, volumes: Volumes, kbatch_runs: Any
) -> None:
    a, _b = volumes.zoned_nodes("a", "b")
    corner.add_pods([corner.pod("filler", "3")])  # zone a's node is fuller, if anything
    now = volumes.storage_class("now", "kubernetes.io/no-provisioner", "Immediate")
    volumes.volume("disk-a", now, "a")
    volumes.claim("data", now)
    poll(
        "the PV controller binds the claim",
        lambda: volumes.read_claim("data")["spec"].get("volumeName"),
        60,
    )
    corner.add_pods([volumes.pod("p", "data")])
    run = corner.start_kbatch(kbatch_runs, "bound-volume")
    try:
        poll("the pod bound", lambda: "p" in placed(corner), 60)
        assert run.alive
    finally:
        run.stop()
    assert placed(corner)["p"] == a


def test_a_pod_s_ephemeral_volume_is_provisioned_where_it_goes(
    corner: Corner, volumes: Volumes, kbatch_runs: Any
) -> None:
    """The ephemeral-volume controller makes the pod's claim (pod-volume); kbatch waits
    for it, then binds the pod and selects its node for the provisioner."""
    volumes.zoned_nodes("a")
    made = volumes.storage_class("made", "example.com/e2e-disks", "WaitForFirstConsumer")
    scratch = corner.pod("scratch", "1")
    template = {
        "spec": {
            "storageClassName": made,
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }
    }
    scratch["spec"]["volumes"] = [{"name": "work", "ephemeral": {"volumeClaimTemplate": template}}]
    try:
        corner.add_pods([scratch])
    except ApiError as exc:  # 1.20 drops the field (its feature gate is off), then refuses
        if exc.status != 422 or "must specify a volume type" not in str(exc):
            raise
        pytest.skip("e2e: the server does not serve generic ephemeral volumes (before 1.21)")
    run = corner.start_kbatch(kbatch_runs, "ephemeral")
    try:
        (where,) = poll("the pod bound", lambda: list(placed(corner).values()), 60)
        claim = volumes.read_claim("scratch-work")  # made by the ephemeral-volume controller
        assert claim["metadata"]["annotations"][SELECTED_NODE] == where
        assert claim["metadata"]["ownerReferences"][0]["name"] == "scratch"
        assert run.alive
    finally:
        run.stop()
