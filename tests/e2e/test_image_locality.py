"""Image locality on a real API server: of two equal nodes, a pod goes to the one whose
status lists its image (kube-scheduler's ImageLocality, on in kbatch's default conf);
after that node pulls another image (its status alone written, as a kubelet writes
it), a pod of the new image goes there too, though the other node is emptier. The
nodes are large, so that one pod of 1 cpu changes the other scores little; without
image locality both pods would go to the first node by name. The images are 30 GiB
(as large training images are): an image one node of many holds counts its size over
the number of nodes, and the API server holds other tests' nodes too."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_ha import MERGE, Corner
from kbatch.kubeapi import request

pytestmark = pytest.mark.e2e

Json = dict[str, Any]
SIZE = 30 * 2**30


def list_images(corner: Corner, node: str, *images: str) -> None:
    listed = [{"names": [image], "sizeBytes": SIZE} for image in images]
    body = {"status": {"images": listed}}
    request(corner.api, "PATCH", f"/api/v1/nodes/{node}/status", body, MERGE)


def image_pod(corner: Corner, name: str, image: str, key: str) -> Json:
    made = corner.pod(name, "1")
    made["spec"]["containers"][0]["image"] = image
    made["spec"]["nodeSelector"] = {key: "yes"}
    return made


def node_of(corner: Corner, name: str) -> str | None:
    path = f"/api/v1/namespaces/{corner.namespace}/pods/{name}"
    return request(corner.api, "GET", path)["spec"].get("nodeName")


def test_a_pod_goes_to_the_node_holding_its_image_and_a_pull_is_seen(
    corner: Corner, kbatch_runs: Any
) -> None:
    key = f"e2e.kbatch.io/images-{corner.suffix}"
    first, second = f"img-{corner.suffix}-a", f"img-{corner.suffix}-b"
    for node in (first, second):
        corner.add_node(node, "64")
        body = {"metadata": {"labels": {key: "yes"}}}
        request(corner.api, "PATCH", f"/api/v1/nodes/{node}", body, MERGE)
    train, serve = f"reg.example/train-{corner.suffix}:v1", f"reg.example/serve-{corner.suffix}:v1"
    list_images(corner, second, train)
    run = corner.start_kbatch(kbatch_runs, "images")
    try:
        corner.add_pods([image_pod(corner, "train", train, key)])
        assert poll("the pod bound", lambda: node_of(corner, "train"), 60) == second
        list_images(corner, second, serve)  # (pulled one, dropped the other)
        corner.add_pods([image_pod(corner, "serve", serve, key)])
        assert poll("the pod bound", lambda: node_of(corner, "serve"), 60) == second
        corner.add_pods([image_pod(corner, "again", train, key)])
        assert poll("the pod bound", lambda: node_of(corner, "again"), 60) == first
        assert run.alive
    finally:
        run.stop()
