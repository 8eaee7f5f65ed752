"""On a real API server, kbatch's pending pods carry the PodScheduled condition that
cluster-autoscaler reads (DESIGN §13): Unschedulable when no node takes them,
kbatch.io/QueueLimited when their queue holds them; bound ones True."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from scenarios.objects import conf_map, node, pod, pod_group, queue
from scenarios.runner import run

pytestmark = pytest.mark.e2e

CAPPED = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def test_pending_pods_tell_autoscalers_why(cluster_backend: Any, tmp_path: Path) -> None:
    capped = queue("capped")
    capped["spec"]["capability"] = {"cpu": "1"}
    docs: list[Any] = [conf_map(CAPPED), node("n1", cpu="4"), capped, pod("big", cpu="8")]
    for name in ("first", "second"):
        docs += [pod_group(name, queue="capped"), pod(name, group=name)]
    path = tmp_path / "conditions.yaml"
    path.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    run(path, backend=cluster_backend, until="6s")
    conditions = {
        p["metadata"]["name"]: next(
            (c for c in p["status"].get("conditions", []) if c["type"] == "PodScheduled"), None
        )
        for p in cluster_backend.last_pods
    }
    big, second, first = conditions["big"], conditions["second"], conditions["first"]
    assert big is not None and (big["status"], big["reason"]) == ("False", "Unschedulable")
    assert big["message"] == "0/1 nodes are available: 1 Insufficient cpu."
    assert second is not None
    assert (second["status"], second["reason"]) == ("False", "kbatch.io/QueueLimited")
    assert first is not None and first["status"] == "True"
