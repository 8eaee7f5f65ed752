"""Upstream's gang API (KEP-4671) on a real API server that serves it: pods with kbatch's
scheduler name that name a ``scheduling.k8s.io/v1alpha3`` PodGroup in
``spec.schedulingGroup`` are scheduled as one gang, and the group's
``PodGroupInitiallyScheduled`` condition says so; a gang that does not fit has no pod
bound and its condition says ``Unschedulable``, and why."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_ha import Corner
from kbatch.kubeapi import ApiError, request

pytestmark = pytest.mark.e2e

UPSTREAM = "/apis/scheduling.k8s.io/v1alpha3"
HOSTNAME = "kubernetes.io/hostname"


@pytest.fixture
def served(session_api: Any) -> None:
    try:
        resources = request(session_api, "GET", UPSTREAM).get("resources") or []
    except ApiError:
        resources = []
    if not any(r.get("name") == "podgroups" for r in resources):
        pytest.skip("e2e: the server does not serve scheduling.k8s.io/v1alpha3 PodGroups")


def make_group(corner: Corner, name: str, min_count: int) -> None:
    body = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": corner.namespace},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }
    request(corner.api, "POST", f"{UPSTREAM}/namespaces/{corner.namespace}/podgroups", body)


def member(corner: Corner, name: str, group: str, cpu: str) -> dict[str, Any]:
    """A pod of ``group`` that only the corner's nodes take."""
    pod = corner.pod(name, cpu)
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    term = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": corner.nodes}]}
    pod["spec"]["affinity"] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [term]
        }}
    }  # fmt: skip
    return pod


def condition(corner: Corner, group: str) -> dict[str, Any] | None:
    """The group's PodGroupInitiallyScheduled condition as the server has it now."""
    path = f"{UPSTREAM}/namespaces/{corner.namespace}/podgroups/{group}"
    conditions = (request(corner.api, "GET", path).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "PodGroupInitiallyScheduled"), None)


def test_a_gang_of_three_is_bound_together_and_told_scheduled(
    served: None, corner: Corner, kbatch_runs: Any
) -> None:
    corner.add_nodes(2, "2")
    make_group(corner, "trio", 3)
    run = corner.start_kbatch(kbatch_runs, "upstream-trio")
    try:
        corner.add_pods([member(corner, f"trio-{i}", "trio", "1") for i in range(3)])
        poll("the gang's three pods bound", lambda: len(corner.bound()) == 3, 60)
        told = poll("the group told scheduled", lambda: condition(corner, "trio"), 30)
    finally:
        run.stop()
    assert (told["status"], told["reason"]) == ("True", "Scheduled")
    assert told["lastTransitionTime"]
    corner.assert_bound_once()


def test_a_gang_that_does_not_fit_is_not_half_bound_and_says_why(
    served: None, corner: Corner, kbatch_runs: Any
) -> None:
    corner.add_nodes(2, "2")  # room for two of the three
    make_group(corner, "too-big", 3)
    run = corner.start_kbatch(kbatch_runs, "upstream-too-big")
    try:
        corner.add_pods([member(corner, f"too-big-{i}", "too-big", "2") for i in range(3)])
        told = poll("the group told unschedulable", lambda: condition(corner, "too-big"), 60)
        assert run.alive
    finally:
        run.stop()
    assert (told["status"], told["reason"]) == ("False", "Unschedulable")
    assert "3" in told["message"], told["message"]
    assert corner.bound() == [], "no pod of a gang that does not fit is bound"
