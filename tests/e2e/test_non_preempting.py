"""Non-preempting priority on a real API server: its priority admission copies a
PriorityClass's ``preemptionPolicy: Never`` into the pod; with the preempt action on,
kbatch evicts nobody for such a pod, while a pod of the same value whose class may
preempt does evict a lower one (so preemption was on all along)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_disruption import PREEMPT
from e2e.test_ha import Corner
from kbatch.kubeapi import request

pytestmark = pytest.mark.e2e

CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def test_a_non_preempting_pod_evicts_nobody_and_a_preempting_one_does(
    corner: Corner, kbatch_runs: Any, tmp_path: Path
) -> None:
    classes = {"low": (10, None), "never": (1000, "Never"), "high": (1000, None)}
    names = {key: f"e2e-{key}-{corner.suffix}" for key in classes}
    for key, (value, policy) in classes.items():
        body: dict[str, Any] = {"metadata": {"name": names[key]}, "value": value}
        if policy:
            body["preemptionPolicy"] = policy
        request(corner.api, "POST", CLASSES, body)
    conf = tmp_path / "preempt.yaml"
    conf.write_text(PREEMPT, encoding="utf-8")
    corner.add_nodes(1, "2")

    def pod(name: str, key: str) -> dict[str, Any]:
        made = corner.pod(name, "1")
        made["spec"]["priorityClassName"] = names[key]
        return made

    run = corner.start_kbatch(kbatch_runs, "never", conf)
    try:
        corner.add_pods([pod("low-0", "low"), pod("low-1", "low")])
        poll("the low pods bound", lambda: len(corner.bound()) == 2, 60)
        corner.add_pods([pod("never", "never")])
        served = request(corner.api, "GET", f"/api/v1/namespaces/{corner.namespace}/pods/never")
        assert served["spec"].get("preemptionPolicy") == "Never"  # the admission's copy
        told = poll(
            "the never pod told it waits", lambda: corner.pod_condition("never", "PodScheduled"), 30
        )
        assert told["status"] == "False"
        time.sleep(3)  # sessions go on: an eviction would have been sent by now
        assert not [p for p in corner.pods() if p["metadata"].get("deletionTimestamp")]
        assert sorted(p["metadata"]["name"] for p in corner.pods()) == ["low-0", "low-1", "never"]
        corner.add_pods([pod("high", "high")])
        poll("a low pod evicted for the high one", lambda: len(corner.pods()) < 4, 60)
        assert run.alive
    finally:
        run.stop()
        for name in names.values():
            request(corner.api, "DELETE", f"{CLASSES}/{name}")
    assert "never" in [p["metadata"]["name"] for p in corner.pods()]
