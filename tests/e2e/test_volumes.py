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
  controller makes, then binds the pod and selects its node (1.21 on);
- a claim of the ReadWriteOncePod access mode (1.22 on): a gang whose pods share one
  is not admitted, told why (it could never start), and a pod waits while another uses
  its claim, then is bound;
- CSI attach limits: nodes whose CSINodes (made here, as a CSI node plugin would
  register them) let them attach one volume of a driver take one pod with a volume of
  it each; the third waits, told why, until a CSINode lets its node attach two.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster_backend import exists, poll
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

    def volume(
        self,
        name: str,
        storage_class: str,
        zone: str,
        claim: str | None = None,
        modes: tuple[str, ...] = ("ReadWriteOnce",),
        driver: str = "",
    ) -> str:
        """A local disk of ``zone`` (or, of a CSI ``driver``, a volume any node reaches)."""
        full = f"{name}-{self.corner.suffix}"
        affinity = {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
        spec: Json = {
            "storageClassName": storage_class,
            "capacity": {"storage": "1Gi"},
            "accessModes": list(modes),
            "local": {"path": "/mnt/disk"},
            "nodeAffinity": {"required": {"nodeSelectorTerms": [affinity]}},
        }
        if driver:
            del spec["local"], spec["nodeAffinity"]
            spec["csi"] = {"driver": driver, "volumeHandle": full}
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

    def claim(
        self, name: str, storage_class: str, modes: tuple[str, ...] = ("ReadWriteOnce",)
    ) -> Json:
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": self.corner.namespace},
            "spec": {
                "storageClassName": storage_class,
                "accessModes": list(modes),
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        made: Json = request(self.api, "POST", f"{self.claims}", body)
        return made

    def csi_node(self, node: str, driver: str, count: int) -> None:
        """The node's CSINode, as the CSI node plugin of ``driver`` registers it: it may
        attach ``count`` volumes of it (made, or its count replaced)."""
        path = "/apis/storage.k8s.io/v1/csinodes"
        entry = {"name": driver, "nodeID": node, "allocatable": {"count": count}}
        body = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": node},
            "spec": {"drivers": [entry]},
        }
        if f"{path}/{node}" in self.made:
            request(self.api, "DELETE", f"{path}/{node}")  # (its drivers may not be patched)
            poll("the CSINode gone", lambda: not exists(self.api, f"{path}/{node}"), 30)
        else:
            self.made.append(f"{path}/{node}")
        request(self.api, "POST", path, body)

    def bound_claim(self, name: str, storage_class: str, **volume: Any) -> None:
        """A claim bound by the PV controller (its class Immediate) to a volume made for it."""
        modes = volume.get("modes", ("ReadWriteOnce",))
        self.volume(f"for-{name}", storage_class, "a", claim=name, **volume)
        self.claim(name, storage_class, modes)
        poll(
            f"the PV controller binds claim {name}",
            lambda: self.read_claim(name)["status"].get("phase") == "Bound",
            60,
        )

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


SINGLE_POD = "ReadWriteOncePod"
SINGLE_POD_WORDS = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)


def single_pod_claim(volumes: Volumes, name: str) -> None:
    """A claim of the ReadWriteOncePod access mode, bound; skipped where not served."""
    now = volumes.storage_class(name, "kubernetes.io/no-provisioner", "Immediate")
    try:
        volumes.bound_claim(name, now, modes=(SINGLE_POD,))
    except ApiError as exc:  # (a server before 1.22 refuses the access mode)
        if exc.status != 422 or SINGLE_POD not in str(exc):
            raise
        pytest.skip("e2e: the server does not serve the ReadWriteOncePod access mode (1.22 on)")


def test_a_gang_sharing_a_single_pod_claim_is_not_admitted_saying_why(
    corner: Corner, volumes: Volumes, kbatch_runs: Any
) -> None:
    volumes.zoned_nodes("a", "a")
    single_pod_claim(volumes, "only")
    corner.add_group("g", 2)
    corner.add_pods([volumes.pod("p0", "only", "g"), volumes.pod("p1", "only", "g")])
    run = corner.start_kbatch(kbatch_runs, "single-pod-gang")
    try:
        told = poll(
            "a gang member told why it waits",
            lambda: (c := corner.pod_condition("p0", "PodScheduled")) and "Once" in c["message"],
            30,
        )
        assert told
        message = corner.pod_condition("p0", "PodScheduled")["message"]  # type: ignore[index]
        # (it could never start: not admitted, so it holds no room)
        assert "one at a time: they share a ReadWriteOncePod claim" in message, message
        assert placed(corner) == {}
        assert run.alive
    finally:
        run.stop()


def test_a_pod_waits_while_another_uses_its_single_pod_claim(
    corner: Corner, volumes: Volumes, kbatch_runs: Any
) -> None:
    volumes.zoned_nodes("a", "a")
    single_pod_claim(volumes, "only")
    corner.add_pods([volumes.pod("first", "only")])
    run = corner.start_kbatch(kbatch_runs, "single-pod")
    try:
        poll("the first pod bound", lambda: "first" in placed(corner), 60)
        corner.add_pods([volumes.pod("second", "only")])
        poll(
            "the second pod told why it waits",
            lambda: (
                (c := corner.pod_condition("second", "PodScheduled"))
                and SINGLE_POD_WORDS in c["message"]
            ),
            30,
        )
        assert "second" not in placed(corner)
        path = f"/api/v1/namespaces/{corner.namespace}/pods/first"
        request(corner.api, "DELETE", path, {"gracePeriodSeconds": 0})  # (no kubelet to wait)
        poll("the second pod bound once the first is gone", lambda: "second" in placed(corner), 60)
        assert run.alive
    finally:
        run.stop()


def test_nodes_at_their_attach_limit_take_no_pod_more(
    corner: Corner, volumes: Volumes, kbatch_runs: Any
) -> None:
    a, b = volumes.zoned_nodes("a", "a")
    driver = f"e2e-{corner.suffix}.csi.example.com"
    for name in (a, b):
        volumes.csi_node(name, driver, 1)
    now = volumes.storage_class("csi", "kubernetes.io/no-provisioner", "Immediate")
    for i in range(3):
        volumes.bound_claim(f"d{i}", now, driver=driver)
    corner.add_pods([volumes.pod(f"p{i}", f"d{i}") for i in range(3)])
    run = corner.start_kbatch(kbatch_runs, "attach-limits")
    try:
        poll("two pods bound", lambda: len(placed(corner)) == 2, 60)
        assert sorted(placed(corner).values()) == sorted([a, b])  # one a node
        (waiting,) = {"p0", "p1", "p2"} - set(placed(corner))
        told = poll(
            "the third told why it waits",
            lambda: (
                (c := corner.pod_condition(waiting, "PodScheduled"))
                and "max volume count" in c["message"]
                and c
            ),
            30,
        )
        assert "2 node(s) exceed max volume count" in told["message"], told["message"]
        volumes.csi_node(a, driver, 2)
        poll("the third bound where it may attach two", lambda: len(placed(corner)) == 3, 60)
        assert placed(corner)[waiting] == a
        assert run.alive
    finally:
        run.stop()
