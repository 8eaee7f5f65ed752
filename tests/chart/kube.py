"""Helpers for the tests that run things against a real API server: the chart's
install test and the Prometheus e2e test.

``poll`` waits for a condition with a deadline (never a fixed sleep);
``Process`` is a subprocess logging to a file; ``ensure``/``ensure_crds``
create objects that may exist already; ``mark_bound_pods_running`` does what a
kubelet would for the pods of one namespace.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from e2e.controlplane import Cluster, _die_with_parent, tail

from kbatch.kubeapi import ApiError, request

KBATCH = Path(sys.executable).with_name("kbatch")
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
MERGE = "application/merge-patch+json"

T = TypeVar("T")


@dataclass(frozen=True)
class Plane:
    """A cluster for the chart's tests (tests/chart/conftest.py)."""

    cluster: Cluster
    audit_log: Path | None  # None: an external cluster, not ours to audit

    def kubeconfig_args(self) -> list[str]:
        return ["--kubeconfig", str(self.cluster.kubeconfig)]


def poll(
    what: str,
    check: Callable[[], T | None],
    timeout: float = 60.0,
    details: Callable[[], str] = str,
) -> T:
    """Call ``check`` until it returns a truthy value; fail saying ``what`` (and
    ``details()``) after ``timeout``."""
    deadline = time.monotonic() + timeout
    delay = 0.1
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{details()}")
        time.sleep(delay)
        delay = min(delay * 1.5, 1.0)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            response.read()
            return bool(response.status == 200)
    except (OSError, urllib.error.URLError):
        return False


@dataclass
class Process:
    """A subprocess whose output goes to ``log``; it dies with the test process."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @classmethod
    def start(cls, name: str, argv: list[str], log: Path) -> Process:
        with log.open("ab") as handle:
            handle.write(f"$ {' '.join(argv)}\n".encode())
            handle.flush()
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        return cls(name, popen, log)

    def wait_until(self, what: str, ready: Callable[[], bool], timeout: float = 60.0) -> None:
        def check() -> bool:
            if self.popen.poll() is not None:
                pytest.fail(f"{self.name} exited ({self.popen.returncode}):\n{tail(self.log)}")
            return ready()

        poll(f"{self.name}: {what}", check, timeout, lambda: f"{self.log}:\n{tail(self.log)}")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)


def get(api: Any, path: str) -> dict[str, Any] | None:
    """The object at ``path``, or None if there is none."""
    try:
        return request(api, "GET", path)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def ensure(api: Any, path: str, body: dict[str, Any]) -> None:
    """POST ``body`` to ``path``; an object that exists already is fine."""
    try:
        request(api, "POST", path, body)
    except ApiError as exc:
        if exc.status != 409:
            raise


def delete(api: Any, *paths: str) -> None:
    for path in paths:
        with contextlib.suppress(ApiError):
            request(api, "DELETE", path, {"gracePeriodSeconds": 0})


def ensure_crds(api: Any, folder: Path) -> None:
    """The CRDs of ``folder`` exist and are Established."""
    names = []
    for path in sorted(folder.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        names.append(crd["metadata"]["name"])
        ensure(api, CRD_PATH, crd)

    def established() -> bool:
        for name in names:
            status = request(api, "GET", f"{CRD_PATH}/{name}").get("status", {})
            if not any(
                c["type"] == "Established" and c["status"] == "True"
                for c in status.get("conditions") or []
            ):
                return False
        return True

    poll("the CRDs established", established, 30)


def ready_node(api: Any, name: str, allocatable: dict[str, str], taints: list[Any]) -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints},
    }
    ensure(api, "/api/v1/nodes", node)
    status = {
        "capacity": allocatable,
        "allocatable": allocatable,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
    }
    request(api, "PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, MERGE)


def mark_bound_pods_running(api: Any, namespace: str) -> int:
    """What a kubelet would do: the namespace's bound pods become Running.
    Returns how many bound pods there are (being deleted ones left out)."""
    pods = request(api, "GET", f"/api/v1/namespaces/{namespace}/pods")["items"]
    bound = 0
    for pod in pods:
        if not pod["spec"].get("nodeName") or pod["metadata"].get("deletionTimestamp"):
            continue
        bound += 1
        if pod.get("status", {}).get("phase") == "Running":
            continue
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {
            "phase": "Running",
            "startTime": now,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        }
        name = pod["metadata"]["name"]
        with contextlib.suppress(ApiError):  # deleted meanwhile
            request(
                api, "PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                {"status": status}, MERGE,
            )  # fmt: skip
    return bound
