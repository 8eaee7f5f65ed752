"""Pod-level resources (``spec.resources``, on by default from Kubernetes 1.34) on a real
API server: what kbatch reads a pod to request is the same for the pod as written (the
simulator reads it so) and as the API server serves it, its requests defaulted."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.test_ha import Corner
from kbatch.cluster.podspec import pod_request
from kbatch.kubeapi import request

pytestmark = pytest.mark.e2e

CASES = {
    "requests": {"requests": {"cpu": "3", "memory": "2Gi"}},
    "limits-only": {"limits": {"cpu": "2", "memory": "4Gi"}},
    "cpu-request-memory-limit": {"requests": {"cpu": "1500m"}, "limits": {"memory": "1Gi"}},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_pod_s_own_request_reads_the_same_written_and_served(corner: Corner, case: str) -> None:
    pod: dict[str, Any] = corner.pod(f"pod-level-{case}", "500m")
    pod["spec"]["containers"].append(
        {"name": "d", "image": "x", "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}}}
    )
    pod["spec"]["resources"] = CASES[case]
    path = f"/api/v1/namespaces/{corner.namespace}/pods"
    served = request(corner.api, "POST", path, pod)
    if not served["spec"].get("resources"):  # (an older server drops what it does not know)
        pytest.skip("e2e: the server drops spec.resources (PodLevelResources off)")
    assert pod_request(served["spec"]) == pod_request(pod["spec"]), served["spec"]["resources"]
