"""Dynamic Resource Allocation on a real API server (resource.k8s.io/v1, 1.34 on; an
older server serves none: skipped, saying so): a DeviceClass, a ResourceSlice that
gives one fake node one GPU (as a DRA driver would publish it: no driver or kubelet
needed), and two claims each for one GPU. The first pod is bound to the node with the
GPU, its claim allocated (the device, the node's selector) and reserved for it before
the bind; the second waits, its PodScheduled condition saying why in kube-scheduler's
words; a pod without claims beside them is bound."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_ha import Corner
from kbatch.kubeapi import ApiError, request

pytestmark = pytest.mark.e2e

Json = dict[str, Any]
DRA = "/apis/resource.k8s.io/v1"
DRIVER = "gpu.e2e.example.com"


class Devices:
    """A corner's DeviceClass, ResourceSlices and ResourceClaims (the cluster-scoped ones
    removed after)."""

    def __init__(self, corner: Corner) -> None:
        self.corner = corner
        self.api = corner.api
        self.made: list[str] = []
        self.device_class = f"gpu-{corner.suffix}"

    def served(self) -> bool:
        try:
            resources = request(self.api, "GET", DRA).get("resources") or []
        except ApiError:
            return False
        return any(r.get("name") == "resourceclaims" for r in resources)

    def make(self, path: str, body: Json) -> None:
        request(self.api, "POST", path, body)
        if "/namespaces/" not in path:
            self.made.append(f"{path}/{body['metadata']['name']}")

    def add_class(self) -> None:
        selector = {"cel": {"expression": f'device.driver == "{DRIVER}"'}}
        self.make(f"{DRA}/deviceclasses", {
            "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": self.device_class}, "spec": {"selectors": [selector]},
        })  # fmt: skip

    def add_slice(self, node: str, *devices: str) -> None:
        self.make(f"{DRA}/resourceslices", {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": d, "attributes": {"model": {"string": "a100"}}}
                                 for d in devices]},
        })  # fmt: skip

    def add_claim(self, name: str) -> None:
        selector = {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "a100"'}}
        exactly = {"deviceClassName": self.device_class, "selectors": [selector]}
        self.make(self.claims, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": self.corner.namespace},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        })  # fmt: skip

    @property
    def claims(self) -> str:
        return f"{DRA}/namespaces/{self.corner.namespace}/resourceclaims"

    def read_claim(self, name: str) -> Json:
        return request(self.api, "GET", f"{self.claims}/{name}")

    def pod(self, name: str, claim: str) -> Json:
        made = self.corner.pod(name, "1")
        made["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
        return made

    def close(self) -> None:
        for path in reversed(self.made):
            try:
                request(self.api, "DELETE", path)
            except ApiError as exc:
                if exc.status != 404:
                    raise


@pytest.fixture
def devices(corner: Corner) -> Iterator[Devices]:
    made = Devices(corner)
    if not made.served():
        pytest.skip("e2e: the server does not serve resource.k8s.io/v1 (DRA: Kubernetes 1.34 on)")
    try:
        yield made
    finally:
        made.close()


def test_a_pod_gets_the_node_s_device_its_claim_allocated_and_the_next_waits(
    corner: Corner, devices: Devices, kbatch_runs: Any
) -> None:
    gpu_node, plain_node = f"dra-{corner.suffix}-0", f"dra-{corner.suffix}-1"
    corner.add_node(gpu_node, "4")
    corner.add_node(plain_node, "4")
    devices.add_class()
    devices.add_slice(gpu_node, "gpu-0")
    devices.add_claim("first")
    devices.add_claim("second")
    corner.add_pods([devices.pod("first", "first")])
    run = corner.start_kbatch(kbatch_runs, "dra")
    try:
        poll("the first pod bound", lambda: corner.bound(), 60)
        corner.add_pods([devices.pod("second", "second"), corner.pod("plain", "1")])
        poll("the plain pod bound", lambda: len(corner.bound()) == 2, 60)
        told = poll(
            "the second told why", lambda: corner.pod_condition("second", "PodScheduled"), 30
        )
        assert run.alive
    finally:
        run.stop()
    placed = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in corner.bound()}
    assert placed["first"] == gpu_node and "second" not in placed
    status = devices.read_claim("first")["status"]
    (result,) = status["allocation"]["devices"]["results"]
    assert (result["driver"], result["pool"], result["device"]) == (DRIVER, gpu_node, "gpu-0")
    (term,) = status["allocation"]["nodeSelector"]["nodeSelectorTerms"]
    assert term["matchFields"][0]["values"] == [gpu_node]
    (reserved,) = status["reservedFor"]
    assert (reserved["resource"], reserved["name"]) == ("pods", "first")
    assert not (devices.read_claim("second").get("status") or {}).get("allocation")
    assert (told["status"], told["reason"]) == ("False", "Unschedulable")
    assert "0/2 nodes are available: 2 cannot allocate all claims." in told["message"], told
