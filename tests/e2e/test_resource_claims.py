"""Dynamic resource allocation on a real API server: kbatch allocates no resource
claims, so it binds no pod that has any (bound with its claims unallocated, a pod
never starts on its node); the pod's PodScheduled condition says why, in words; the
pod beside it without claims is bound."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_ha import Corner

pytestmark = pytest.mark.e2e


def test_a_pod_with_resource_claims_is_not_bound_and_says_why(
    corner: Corner, kbatch_runs: Any
) -> None:
    corner.add_nodes(1, "2")
    claiming = corner.pod("claims", "1")
    claiming["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "some-gpu"}]
    corner.add_pods([claiming, corner.pod("plain", "1")])
    corner.skip_unless_served("claims", "resourceClaims")
    run = corner.start_kbatch(kbatch_runs, "claims")
    try:
        poll("the plain pod bound", lambda: [p["metadata"]["name"] for p in corner.bound()], 60)
        told = poll(
            "the claiming pod told why", lambda: corner.pod_condition("claims", "PodScheduled"), 30
        )
        assert run.alive
    finally:
        run.stop()
    assert [p["metadata"]["name"] for p in corner.bound()] == ["plain"]
    assert (told["status"], told["reason"]) == ("False", "Unschedulable")
    assert "which kbatch does not allocate" in told["message"], told["message"]
