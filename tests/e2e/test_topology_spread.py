"""Pod topology spread on a real API server: a gang whose pods must spread over two
zones (``maxSkew: 1``) is bound two and two, where kbatch's scoring alone would put three
in the zone of two nodes; a pod whose constraint names a key no node carries waits,
its PodScheduled condition saying why in kube-scheduler's words. The zone key is the
test's own, so other tests' nodes are no domain of it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_ha import MERGE, Corner
from kbatch.kubeapi import request

pytestmark = pytest.mark.e2e

Json = dict[str, Any]


def spread_pod(corner: Corner, name: str, key: str, group: str | None = None) -> Json:
    made = corner.pod(name, "1", group)
    made["metadata"]["labels"] = {"app": f"spread-{corner.suffix}"}
    made["spec"]["topologySpreadConstraints"] = [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": made["metadata"]["labels"]},
        }
    ]
    return made


def zoned(corner: Corner, key: str, zones: list[str]) -> dict[str, str]:
    """Nodes of 4 cpu, one per entry of ``zones``: node -> zone."""
    found = {}
    for i, zone in enumerate(zones):
        name = f"spread-{corner.suffix}-{i}"
        corner.add_node(name, "4")
        body = {"metadata": {"labels": {key: zone}}}
        request(corner.api, "PATCH", f"/api/v1/nodes/{name}", body, MERGE)
        found[name] = zone
    return found


def test_a_gang_is_spread_over_zones_and_a_missing_key_is_told(
    corner: Corner, kbatch_runs: Any
) -> None:
    key = f"e2e.kbatch.io/zone-{corner.suffix}"
    zone_of = zoned(corner, key, ["a", "a", "b"])
    corner.add_group("g", 4)
    run = corner.start_kbatch(kbatch_runs, "spread")
    try:
        corner.add_pods([spread_pod(corner, f"g-{i}", key, "g") for i in range(4)])
        path = f"/api/v1/namespaces/{corner.namespace}/pods/g-0"
        served = request(corner.api, "GET", path)["spec"]["topologySpreadConstraints"]
        assert served[0]["topologyKey"] == key
        poll("the gang bound", lambda: len(corner.bound()) == 4, 60)
        zones = Counter(zone_of[p["spec"]["nodeName"]] for p in corner.bound())
        assert zones == {"a": 2, "b": 2}
        corner.add_pods([spread_pod(corner, "nowhere", f"{key}-none")])
        told = poll(
            "the pod told why it waits",
            lambda: (
                (c := corner.pod_condition("nowhere", "PodScheduled"))
                and "missing required label" in c.get("message", "")
                and c
            ),
            30,
        )
        assert told["status"] == "False" and told["reason"] == "Unschedulable"
        assert "didn't match pod topology spread constraints" in told["message"]
        assert run.alive
    finally:
        run.stop()
