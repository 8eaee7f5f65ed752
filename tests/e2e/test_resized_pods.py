"""A pod resized in place, on a real API server (the ``resize`` subresource, 1.33 on):
its spec's request lowered from 3 cpu to 1, the kubelet (played here) still running it
with 3, a pod of 2 cpu for that node of 4 waits, told why; once the kubelet reports the
resize done, the pod is bound. Counting the spec alone, kbatch bound it at once, and a
kubelet would have refused it (OutOfcpu)."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_ha import MERGE, Corner
from kbatch.kubeapi import ApiError, request

pytestmark = pytest.mark.e2e

Json = dict[str, Any]


def report(corner: Corner, name: str, cpu: str) -> None:
    """As a kubelet: the pod Running, its container running with ``cpu``."""
    cs = {
        "name": "c",
        "ready": True,
        "restartCount": 0,
        "image": "x",
        "imageID": "",
        "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
        "resources": {"requests": {"cpu": cpu}},
        "allocatedResources": {"cpu": cpu},
    }
    body = {"status": {"phase": "Running", "containerStatuses": [cs]}}
    path = f"/api/v1/namespaces/{corner.namespace}/pods/{name}/status"
    request(corner.api, "PATCH", path, body, MERGE)


def test_a_pod_waits_while_a_resized_pod_still_holds_its_old_requests(
    corner: Corner, kbatch_runs: Any
) -> None:
    node = f"resize-{corner.suffix}"
    corner.add_node(node, "4")
    big = corner.pod("big", "3")
    big["spec"]["nodeName"] = node
    corner.add_pods([big])
    poll("the test kubelet running it", lambda: corner.running(), 30)
    report(corner, "big", "3")  # (then as a kubelet of 1.33 on reports it)
    path = f"/api/v1/namespaces/{corner.namespace}/pods/big/resize"
    lower = {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}
    try:
        request(corner.api, "PATCH", path, lower, "application/strategic-merge-patch+json")
    except ApiError as exc:
        if exc.status == 404:
            pytest.skip("this API server serves no pods/resize subresource (1.33 on)")
        raise
    run = corner.start_kbatch(kbatch_runs, "resize")
    try:
        waiting = corner.pod("waiting", "2")
        waiting["spec"]["nodeSelector"] = {"kubernetes.io/hostname": node}
        corner.add_pods([waiting])
        told = poll(
            "the pod told why it waits",
            lambda: (c := corner.pod_condition("waiting", "PodScheduled")) and c,
            30,
        )
        assert "Insufficient cpu" in told.get("message", ""), told
        assert not any(p["metadata"]["name"] == "waiting" for p in corner.bound())
        report(corner, "big", "1")  # (the resize done)
        poll(
            "the pod bound",
            lambda: any(p["metadata"]["name"] == "waiting" for p in corner.bound()),
            60,
        )
        assert run.alive
    finally:
        run.stop()
