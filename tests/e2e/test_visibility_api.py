"""kbatch's visibility API (``visibility.kbatch.io``) served by ``kbatch run`` through a
real API server's aggregation, as the chart registers it: ``kbatch explain``,
``kbatch jobs`` and ``kbatch queues`` answer with one request, the same as they compute
themselves; the API server's RBAC decides who may ask; the server takes no request but
the API server's.

``kbatch run`` runs here, not in a pod: its APIService names a Service without a
selector whose endpoint is this machine's address (the API server dials endpoints
itself: ``--enable-aggregator-routing``; an endpoint may not be a loopback address).
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster_backend import poll
from e2e.conftest import KbatchRuns
from e2e.controlplane import Cluster, free_ports, host_ipv4
from e2e.test_visibility import (
    ESTIMATED_START,
    NAMESPACE,
    QUEUE,
    SCHEDULER,
    _conditions,
    _phase,
    _pod,
    _published,
    _submit,
    own_corner,  # noqa: F401  (a fixture)
)
from kbatch.kubeapi import ApiError, request
from kbatch.visibility.served import MAX_AGE
from kbatch.webhooks.certificates import self_signed

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
API_SERVICE = "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.visibility.kbatch.io"
SERVICE = "kbatch-visibility"
ROOT = "/apis/visibility.kbatch.io/v1alpha1"
FRONT_PROXY = "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"


def _aggregates(api: Any) -> bool:
    data = request(api, "GET", FRONT_PROXY).get("data") or {}
    return bool(data.get("requestheader-client-ca-file"))


@pytest.fixture
def registered(
    own_corner: Any,  # noqa: F811
    kbatch_runs: KbatchRuns,
    tmp_path: Path,
) -> Iterator[tuple[Any, str]]:
    """``kbatch run`` serving the visibility API, registered as an APIService; yields
    the API client and the server's own URL."""
    api = own_corner
    address = host_ipv4()
    if address is None:
        pytest.skip("e2e: this machine has no address but loopback for an endpoint")
    if not _aggregates(api):
        pytest.skip("e2e: this API server has no front proxy (--requestheader-client-ca-file)")
    cert, key = self_signed([address, f"{SERVICE}.{NAMESPACE}.svc"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    (port,) = free_ports(1)
    run = kbatch_runs.start(
        "visibility-api",
        scheduler_names=(SCHEDULER,),
        lock_namespace=NAMESPACE,
        extra=("--eta-interval", "2s", "--visibility-address", f"0.0.0.0:{port}",
               "--visibility-cert-dir", str(tmp_path)),
    )  # fmt: skip
    try:
        _register(api, address, port, cert)
        poll("the APIService available", lambda: _available(api), 60, 0.5)
        yield api, f"https://{address}:{port}"
    finally:
        run.stop()
        for path in (API_SERVICE, f"/api/v1/namespaces/{NAMESPACE}/services/{SERVICE}"):
            try:
                request(api, "DELETE", path)
            except ApiError as exc:
                if exc.status != 404:
                    raise


def _register(api: Any, address: str, port: int, ca: bytes) -> None:
    import base64

    service = {"metadata": {"name": SERVICE, "namespace": NAMESPACE},
               "spec": {"ports": [{"name": "https", "port": 443, "targetPort": port}]}}  # fmt: skip
    request(api, "POST", f"/api/v1/namespaces/{NAMESPACE}/services", service)
    endpoints = {"metadata": {"name": SERVICE, "namespace": NAMESPACE},
                 "subsets": [{"addresses": [{"ip": address}],
                              "ports": [{"name": "https", "port": port}]}]}  # fmt: skip
    request(api, "POST", f"/api/v1/namespaces/{NAMESPACE}/endpoints", endpoints)
    api_service = {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": "v1alpha1.visibility.kbatch.io"},
        "spec": {
            "group": "visibility.kbatch.io",
            "version": "v1alpha1",
            "service": {"namespace": NAMESPACE, "name": SERVICE, "port": 443},
            "caBundle": base64.b64encode(ca).decode(),
            "groupPriorityMinimum": 100,
            "versionPriority": 100,
        },
    }
    request(api, "POST", "/apis/apiregistration.k8s.io/v1/apiservices", api_service)


def _available(api: Any) -> bool:
    conditions = (request(api, "GET", API_SERVICE).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)


def _kbatch(kubeconfig: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    args = [str(BIN / "kbatch"), *argv, "--kubeconfig", str(kubeconfig), "-o", "json"]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def _answer(kubeconfig: Path, *argv: str) -> Any:
    done = _kbatch(kubeconfig, *argv)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# What two answers a moment apart need not share: when they were read, the conf's name,
# the estimate (written again by the publisher meanwhile), and the place in the whole
# cluster's line (other tests' work comes and goes in it; this test's queue is its own).
MOVING = ("asOf", "schedulerConf", "eta", "position", "waitingAheadInCluster")


def _same(data: dict[str, Any]) -> dict[str, Any]:
    """What two answers a moment apart share (not ``MOVING``)."""
    kept = {k: v for k, v in data.items() if k not in MOVING}
    if "conditions" in kept:
        kept["conditions"] = [c for c in kept["conditions"] if c["type"] != ESTIMATED_START]
    for rows in ("waitingAheadInQueue", "runningInQueue"):
        if rows in kept:
            kept[rows] = [_same(row) for row in kept[rows]]
    return kept


def test_explain_jobs_and_queues_are_answered_by_kbatch_run_through_the_api_server(
    control_plane: Cluster, registered: tuple[Any, str], kubelet: Any
) -> None:
    api, _ = registered
    _submit(api, "first")
    poll("the first gang running", lambda: _phase(api, "first") == "Running", 30)
    _submit(api, "second")
    poll("second told why it waits", lambda: _conditions(api, "second"), 30)
    condition = poll("second's estimate published", lambda: _published(api, "second"), 30)
    path = f"{ROOT}/namespaces/{NAMESPACE}/podgroups/second/explanation"
    raw = poll("the answer holds the estimate", lambda: _with_estimate(api, path), 30)
    assert raw["name"] == "second" and raw["queue"] == QUEUE

    # Without --scheduler-name the command, computing itself, would not even see these pods
    # (they name a scheduler of this test's): the answer is kbatch run's.
    # The line it answers from is at most MAX_AGE old once the cluster changed.
    kubeconfig = control_plane.kubeconfig
    mine = ("--scheduler-name", SCHEDULER, "--no-ask-scheduler")
    computed = _answer(kubeconfig, "explain", f"{NAMESPACE}/second", "--eta", *mine)
    deadline = time.monotonic() + MAX_AGE + 10
    while True:
        served = _answer(kubeconfig, "explain", f"{NAMESPACE}/second", "--eta")
        if _same(served) == _same(computed) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert _same(served) == _same(computed)  # (pytest shows what differs)
    assert served["schedulerConf"] == "kbatch run's default"
    assert served["eta"]["confidence"] == "high" and served["eta"]["publishedAt"] >= _seconds(
        condition["lastTransitionTime"]
    )
    computed_jobs = _answer(kubeconfig, "jobs", "-n", NAMESPACE, *mine)
    served_jobs = _answer(kubeconfig, "jobs", "-n", NAMESPACE)
    assert [j["name"] for j in served_jobs["jobs"]] == ["second"]
    assert [_same(j) for j in served_jobs["jobs"]] == [_same(j) for j in computed_jobs["jobs"]]

    computed_queues, served_queues = _agreeing(kubeconfig, ("queues",), mine, _own_queue)
    assert _own_queue(served_queues) == _own_queue(computed_queues)  # (pytest shows how)
    assert served_queues["schedulerConf"] == "kbatch run's default"
    assert computed_queues["schedulerConf"] != served_queues["schedulerConf"]  # computed here
    groups = _own_queue(served_queues)["podGroups"]  # first runs, second waits
    assert (groups["running"], groups["pending"] + groups["inqueue"]) == (1, 1)

    # A pod of its own has no PodGroup to carry its estimate: kbatch run keeps it for the API.
    solo = _pod("solo", 0)
    solo["metadata"]["name"] = "solo"
    del solo["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
    request(api, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", solo)

    def estimated() -> Any:
        listing = _answer(kubeconfig, "jobs", "-n", NAMESPACE, "--eta")
        rows = {job["name"]: job for job in listing["jobs"]}
        return rows["solo"] if "eta" in rows.get("solo", {}) else None

    row = poll("the pod of its own's estimate, kept by kbatch run", estimated, 60, 1.0)
    assert row["kind"] == "Pod" and row["eta"]["publishedAt"] > 0


# What of a queue's row the whole cluster moves (other tests' nodes and queues come and
# go): its turn, what it deserves and so its share.
QUEUE_MOVING = ("position", "deserved", "share")


def _own_queue(data: dict[str, Any]) -> dict[str, Any]:
    """This test's queue in a ``kbatch queues`` answer, without what the cluster moves."""
    (row,) = [queue for queue in data["queues"] if queue["name"] == QUEUE]
    return {k: v for k, v in row.items() if k not in QUEUE_MOVING}


def _agreeing(
    kubeconfig: Path, argv: tuple[str, ...], mine: tuple[str, ...], view: Any
) -> tuple[Any, Any]:
    """The answer computed here (``mine``) and kbatch run's, asked again until ``view``
    sees the same in both (the line answered is at most MAX_AGE old) or for MAX_AGE + 10 s."""
    deadline = time.monotonic() + MAX_AGE + 10
    while True:
        computed = _answer(kubeconfig, *argv, *mine)
        served = _answer(kubeconfig, *argv)
        if view(served) == view(computed) or time.monotonic() > deadline:
            return computed, served
        time.sleep(0.5)


def _with_estimate(api: Any, path: str) -> dict[str, Any] | None:
    answer: dict[str, Any] = request(api, "GET", path)
    return answer if answer.get("eta") else None


def _seconds(text: str) -> float:
    from kbatch.api.times import rfc3339_seconds

    return rfc3339_seconds(text)


def test_rbac_decides_who_may_ask_and_the_server_takes_only_the_api_server(
    control_plane: Cluster, registered: tuple[Any, str], tmp_path: Path
) -> None:
    api, direct = registered
    _submit(api, "first")
    poll("first known", lambda: _conditions(api, "first") or _phase(api, "first") != "Pending", 30)
    kubeconfig = _user(api, control_plane, tmp_path, "reader")
    path = f"{ROOT}/namespaces/{NAMESPACE}/podgroups/first/explanation"

    # no leave: the API server refuses it, and the command cannot list pods either
    denied = _kbatch(kubeconfig, "explain", f"{NAMESPACE}/first")
    assert denied.returncode == 1, denied.stdout
    assert "visibility API did not answer" in denied.stderr and "403" in denied.stderr

    # leave to read explanations only: answered, although it may not list a pod
    role = {"metadata": {"name": "explain", "namespace": NAMESPACE},
            "rules": [{"apiGroups": ["visibility.kbatch.io"], "resources": ["podgroups/explanation"],
                       "verbs": ["get"]}]}  # fmt: skip
    binding = {"metadata": {"name": "explain", "namespace": NAMESPACE},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "explain"},
               "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": NAMESPACE}]}  # fmt: skip
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NAMESPACE}"
    request(api, "POST", f"{rbac}/roles", role)
    request(api, "POST", f"{rbac}/rolebindings", binding)
    answered = poll("explained to the reader", lambda: _explained(kubeconfig, NAMESPACE), 30, 0.5)
    assert answered["name"] == "first"

    # straight to kbatch run, without the API server's client certificate: refused
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(direct + path, context=context, timeout=10)
    refused.value.close()
    assert refused.value.code == 401


def _explained(kubeconfig: Path, namespace: str) -> dict[str, Any] | None:
    done = _kbatch(kubeconfig, "explain", f"{namespace}/first")
    return json.loads(done.stdout) if done.returncode == 0 else None


def _user(api: Any, control_plane: Cluster, tmp_path: Path, name: str) -> Path:
    """A kubeconfig of the ServiceAccount ``name`` of the test's namespace (a token of
    its own, no roles)."""
    accounts = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts"
    request(api, "POST", accounts, {"metadata": {"name": name}})
    token = request(api, "POST", f"{accounts}/{name}/token", {"spec": {"expirationSeconds": 3600}})
    config = yaml.safe_load(control_plane.kubeconfig.read_text())
    config["users"] = [{"name": name, "user": {"token": token["status"]["token"]}}]
    for context in config["contexts"]:
        context["context"]["user"] = name
    path = tmp_path / f"{name}.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return path
