"""An API server outage while ``kbatch run`` binds: its own control plane, whose
kube-apiserver is killed for 15 s just as a burst of binds begins, then started again.
No pod is lost, none is bound twice, every pod ends bound; the log of ``kbatch run``
during the outage stays short (no line per request), and binds resume within seconds of
the API server's return. The figures are printed (``pytest -s``)."""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.conftest import CRD_PATH, REPO, KbatchRuns
from e2e.controlplane import ControlPlane, Unavailable, discover
from kbatch import kubeapi
from kbatch.kubeapi import ApiError, request

pytestmark = pytest.mark.e2e

OUTAGE = 15.0
PODS = 120
MERGE = "application/merge-patch+json"
SCHEDULER = "kbatch-outage"


def _own_control_plane() -> ControlPlane:
    try:
        source = discover()
    except Unavailable as why:
        pytest.skip(f"e2e: no control plane: {why}")
    if not isinstance(source, ControlPlane):
        pytest.skip("e2e: stops its API server, so needs a control plane of its own")
    return source


def _create_crds(api: Any) -> None:
    import yaml

    for path in sorted((REPO / "crds").glob("*.yaml")):
        request(api, "POST", CRD_PATH, yaml.safe_load(path.read_text(encoding="utf-8")))

    def established() -> bool:
        listed = request(api, "GET", CRD_PATH)["items"]
        return all(
            any(
                c["type"] == "Established"
                for c in (crd.get("status") or {}).get("conditions") or []
            )
            for crd in listed
        )

    poll("the CRDs established", established, 30)


def _add_node(api: Any, name: str) -> None:
    request(api, "POST", "/api/v1/nodes", {"metadata": {"name": name}})
    resources = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    status = {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "E2E"}],
    }
    request(api, "PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, MERGE)


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "schedulerName": SCHEDULER,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def _pods(api: Any) -> list[dict[str, Any]]:
    try:
        return list(request(api, "GET", "/api/v1/namespaces/default/pods")["items"])
    except ApiError:
        return []


def _bound(api: Any) -> int:
    return sum(1 for p in _pods(api) if p["spec"].get("nodeName"))


def _seconds_to_first_bind(api: Any) -> float:
    """Poll every 50 ms: how long after the API server answered again the first pod was
    bound (none can be bound while it is down)."""
    deadline = time.monotonic() + 120
    up_at = None
    while time.monotonic() < deadline:
        try:
            bound = sum(
                1
                for p in request(api, "GET", "/api/v1/namespaces/default/pods")["items"]
                if p["spec"].get("nodeName")
            )
        except kubeapi.ApiError:  # Unreachable too
            time.sleep(0.05)
            continue
        up_at = up_at or time.monotonic()
        if bound:
            return time.monotonic() - up_at
        time.sleep(0.05)
    raise AssertionError("no bind within 120 s of restarting the API server")


def test_an_outage_loses_nothing_binds_nothing_twice_and_is_told_briefly(tmp_path: Path) -> None:
    plane = _own_control_plane()
    with plane as cluster:
        api = kubeapi.api_client(str(cluster.kubeconfig))
        _create_crds(api)
        for i in range(PODS):  # no node yet: they wait
            request(api, "POST", "/api/v1/namespaces/default/pods", _pod(f"p-{i}"))
        runs = KbatchRuns(cluster.kubeconfig, tmp_path)
        run = runs.start("outage", scheduler_names=(SCHEDULER,), leader_elect=False)
        try:
            time.sleep(3.0)  # its caches hold every pod, it has nowhere to put them
            apiserver = next(p for p in plane._procs if p.name == "kube-apiserver")
            for n in range(4):
                _add_node(api, f"n-{n}")  # room for all: the burst of binds begins
            time.sleep(0.05)
            os.killpg(apiserver.popen.pid, signal.SIGKILL)
            apiserver.popen.wait(10)
            log_at_down = run.log.stat().st_size
            time.sleep(OUTAGE)
            log_at_up = run.log.stat().st_size
            plane._spawn("kube-apiserver", list(apiserver.popen.args))  # type: ignore[arg-type]
            first_bind = _seconds_to_first_bind(api)
            log_at_bind = run.log.stat().st_size
            poll("every pod bound", lambda: _bound(api) == PODS, 60, 0.2)
        finally:
            run.stop()
        text = run.log.read_bytes()
        during = text[log_at_down:log_at_up].decode(errors="replace").splitlines()
        until_bind = text[log_at_down:log_at_bind].decode(errors="replace").splitlines()
        pods = _pods(api)
        events = request(api, "GET", "/api/v1/namespaces/default/events")["items"]
        scheduled = Counter(
            e["involvedObject"]["uid"] for e in events if e.get("reason") == "Scheduled"
        )
        print(
            f"\noutage {OUTAGE:.0f}s: {len(during)} log lines during it; "
            f"first bind {first_bind:.2f}s after its return; "
            f"{len(until_bind)} log lines from the outage to that bind"
        )
        ours = [line for line in during if " kbatch." in line]
        print(f"of which {len(ours)} from kbatch's own loggers (the rest kopf's):")
        print("\n".join(line[:220] for line in ours))
        assert len(pods) == PODS, "no pod lost"
        assert all(p["spec"].get("nodeName") for p in pods)
        assert max(scheduled.values(), default=0) <= 1, "no pod bound twice"
        assert len(ours) <= 30, "the outage is told briefly"
        assert first_bind < 10.0
