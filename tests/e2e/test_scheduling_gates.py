"""Scheduling gates (``spec.schedulingGates``, GA in Kubernetes 1.30) on a real API
server: a gang that needs a gated pod has no pod bound while the gate stands (the API
server refuses a gated pod's binding), its PodGroup names the gate, the gated pod keeps
the API server's own SchedulingGated condition; once the gate is removed the gang is
bound whole, each pod once."""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_ha import Corner
from kbatch.api import GROUP, VERSION
from kbatch.kubeapi import request

pytestmark = pytest.mark.e2e

GATE = "example.com/data-staged"


def group_condition(corner: Corner, name: str) -> dict[str, Any] | None:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{corner.namespace}/podgroups/{name}"
    conditions = (request(corner.api, "GET", path).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Unschedulable"), None)


def waiting(corner: Corner) -> dict[str, Any] | None:
    """The trio's condition once it says the gate holds it; no pod of it may be bound
    meanwhile (before gates were read, two were, and the gated one taken for bound)."""
    assert corner.bound() == [], "no pod of a gang held by a gate is bound"
    told = group_condition(corner, "trio")
    return told if told is not None and told["reason"] == "SchedulingGated" else None


def test_a_gang_waits_whole_for_its_gated_pod_and_binds_once_the_gate_is_removed(
    corner: Corner, kbatch_runs: Any
) -> None:
    corner.add_nodes(2, "2")
    corner.add_group("trio", 3)
    pods = [corner.pod(f"trio-{i}", "1", group="trio") for i in range(3)]
    pods[2]["spec"]["schedulingGates"] = [{"name": GATE}]
    corner.add_pods(pods)
    corner.skip_unless_served("trio-2", "schedulingGates")
    run = corner.start_kbatch(kbatch_runs, "gates")
    try:
        told = poll("the group told it waits for the gate", lambda: waiting(corner), 60)
        time.sleep(2)  # sessions go on: still nothing bound
        waiting(corner)
        gated = corner.pod_condition("trio-2", "PodScheduled")
        assert gated is not None and gated["reason"] == "SchedulingGated"  # the API server's
        patch = [{"op": "remove", "path": "/spec/schedulingGates"}]
        gated_pod = f"/api/v1/namespaces/{corner.namespace}/pods/trio-2"
        request(corner.api, "PATCH", gated_pod, patch, "application/json-patch+json")
        poll("the gang bound once its gate is removed", lambda: len(corner.bound()) == 3, 60)
        assert run.alive
    finally:
        run.stop()
    assert GATE in told["message"], told["message"]
    corner.assert_bound_once()
