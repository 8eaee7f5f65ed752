"""Pod anti-affinity across namespaces on a real API server: a term's
``namespaceSelector`` picks the namespaces whose pods it counts by their labels (1.21
on; the field was ignored, and the pod placed beside the very pod it must avoid). A
pod of another namespace, labelled for the term's selector, runs on the roomier node;
the incoming pod is bound to the other one."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.cluster_backend import delete, poll
from e2e.test_ha import MERGE, Corner
from kbatch.kubeapi import request

pytestmark = pytest.mark.e2e

HOSTNAME = "kubernetes.io/hostname"


def test_anti_affinity_keeps_away_from_pods_of_the_namespaces_it_selects(
    corner: Corner, kbatch_runs: Any
) -> None:
    team = f"noisy-{corner.suffix}"
    other = f"e2e-other-{corner.suffix}"
    body = {"metadata": {"name": other, "labels": {"e2e-team": team}}}
    request(corner.api, "POST", "/api/v1/namespaces", body)
    try:
        roomy, plain = f"ns-{corner.suffix}-roomy", f"ns-{corner.suffix}-plain"
        corner.add_node(roomy, "16")
        corner.add_node(plain, "4")
        noisy = corner.pod("noisy", "1")
        noisy["metadata"].update(namespace=other, labels={"app": team})
        noisy["spec"].update(nodeName=roomy, schedulerName="default-scheduler")
        request(corner.api, "POST", f"/api/v1/namespaces/{other}/pods", noisy)
        term = {
            "topologyKey": HOSTNAME,
            "labelSelector": {"matchLabels": {"app": team}},
            "namespaceSelector": {"matchLabels": {"e2e-team": team}},
        }
        quiet = corner.pod("quiet", "1")
        rule = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        quiet["spec"]["affinity"] = {"podAntiAffinity": rule}
        for name in (roomy, plain):
            patch = {"metadata": {"labels": {HOSTNAME: name}}}
            request(corner.api, "PATCH", f"/api/v1/nodes/{name}", patch, MERGE)
        corner.add_pods([quiet])
        path = f"/api/v1/namespaces/{corner.namespace}/pods/quiet"
        served = request(corner.api, "GET", path)["spec"]["affinity"]["podAntiAffinity"]
        (served_term,) = served["requiredDuringSchedulingIgnoredDuringExecution"]
        if "namespaceSelector" not in served_term:
            pytest.skip("e2e: the server drops namespaceSelector (before 1.21)")
        run = corner.start_kbatch(kbatch_runs, "ns-affinity")
        try:
            poll("the quiet pod bound", lambda: len(corner.bound()) == 1, 60)
            (bound,) = corner.bound()
            assert bound["spec"]["nodeName"] == plain
            assert run.alive
        finally:
            run.stop()
    finally:
        delete(corner.api, f"/api/v1/namespaces/{other}", {"gracePeriodSeconds": 0})
