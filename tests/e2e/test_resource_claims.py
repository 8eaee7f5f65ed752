"""Dynamic resource allocation on a real API server: kbatch allocates no resource
claims, so it binds no pod that has any (bound with its claims unallocated, a pod
never starts on its node); the pod's PodScheduled condition says why, in words; the
pod beside it without claims is bound."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_ha import Corner
from kbatch.kubeapi import request

pytestmark = pytest.mark.e2e


def scheduled_condition(corner: Corner, name: str) -> dict[str, Any] | None:
    path = f"/api/v1/namespaces/{corner.namespace}/pods/{name}"
    conditions = (request(corner.api, "GET", path).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodScheduled"), None)


def test_a_pod_with_resource_claims_is_not_bound_and_says_why(
    corner: Corner, kbatch_runs: Any
) -> None:
    corner.add_nodes(1, "2")
    claiming = corner.pod("claims", "1")
    claiming["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "some-gpu"}]
    corner.add_pods([claiming, corner.pod("plain", "1")])
    path = f"/api/v1/namespaces/{corner.namespace}/pods/claims"
    if not request(corner.api, "GET", path)["spec"].get("resourceClaims"):
        pytest.skip("e2e: the server drops spec.resourceClaims (before Kubernetes 1.26)")
    run = kbatch_runs.start(
        f"claims-{corner.suffix}", scheduler_names=(corner.scheduler_name,), leader_elect=False
    )
    try:
        poll("the plain pod bound", lambda: [p["metadata"]["name"] for p in corner.bound()], 60)
        told = poll("the claiming pod told why", lambda: scheduled_condition(corner, "claims"), 30)
        assert run.alive
    finally:
        run.stop()
    assert [p["metadata"]["name"] for p in corner.bound()] == ["plain"]
    assert (told["status"], told["reason"]) == ("False", "Unschedulable")
    assert "which kbatch does not allocate" in told["message"], told["message"]
