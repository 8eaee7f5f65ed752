"""Smoke test of the e2e control plane: the API server answers, Nodes can be faked
(status written through the status subresource, as a kubelet would), and a Pod
bound through pods/binding (as a scheduler would) shows its node."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from e2e import smoke
from e2e.controlplane import FRONT_PROXY_CLIENT, Cluster, accepts, host_ipv4, when_accepted

pytestmark = pytest.mark.e2e

T = TypeVar("T")


def eventually(probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    """Poll ``probe`` until it returns something other than None."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout:.0f}s: {probe.__doc__ or probe}")
        time.sleep(0.1)


@pytest.fixture
def core(api_client: Any) -> Any:
    """CoreV1Api, typed loosely: the tests pass plain dicts as bodies."""
    return client.CoreV1Api(api_client)


@pytest.fixture
def names(core: Any) -> Iterator[dict[str, str]]:
    """A fresh namespace and node name; both deleted afterwards (the cluster may be shared)."""
    suffix = secrets.token_hex(3)
    made = {"namespace": f"e2e-smoke-{suffix}", "node": f"e2e-node-{suffix}"}
    yield made
    for delete, name in (
        (core.delete_node, made["node"]),
        (core.delete_namespace, made["namespace"]),
    ):
        try:
            delete(name)
        except ApiException as exc:
            if exc.status != 404:
                raise


def test_server_answers(control_plane: Cluster, api_client: Any) -> None:
    assert control_plane.kubeconfig.is_file()
    version = client.VersionApi(api_client).get_code()
    assert version.major == "1", version
    # authenticated as a cluster admin: RBAC lets us list cluster-scoped objects
    core: Any = client.CoreV1Api(api_client)
    names = [ns.metadata.name for ns in core.list_namespace().items]
    assert "default" in names


def test_node_status_and_pod_binding(core: Any, names: dict[str, str]) -> None:
    ns, node = names["namespace"], names["node"]
    core.create_namespace({"metadata": {"name": ns}})
    assert core.read_namespace(ns).status.phase == "Active"

    core.create_node({"metadata": {"name": node, "labels": {"kbatch.io/e2e": "true"}}})
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    resources = {"cpu": "4", "memory": "16Gi", "pods": "110"}
    core.patch_node_status(
        node,
        {
            "status": {
                "capacity": resources,
                "allocatable": resources,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "e2e fake node",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
            }
        },
    )
    status = core.read_node_status(node).status
    assert status.allocatable == resources
    assert [(c.type, c.status) for c in status.conditions] == [("Ready", "True")]
    # No admission plugin or controller has tainted the fake node.
    assert not core.read_node(node).spec.taints

    pod = {
        "metadata": {"name": "p0"},
        "spec": {
            "schedulerName": "kbatch",
            "containers": [
                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
            ],
        },
    }
    core.create_namespaced_pod(ns, pod)
    assert core.read_namespaced_pod("p0", ns).spec.node_name is None

    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p0"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    # The server answers a Status, which the generated V1Binding model refuses
    # to deserialize: read the raw response instead.
    response = core.create_namespaced_pod_binding("p0", ns, binding, _preload_content=False)
    assert json.loads(response.data)["status"] == "Success"
    assert core.read_namespaced_pod("p0", ns).spec.node_name == node


def test_controllers_run(control_plane: Cluster, core: Any, names: dict[str, str]) -> None:
    if not control_plane.controllers:
        pytest.skip("e2e: started without kube-controller-manager")
    ns = names["namespace"]
    core.create_namespace({"metadata": {"name": ns}})

    def default_account() -> str | None:
        """the service-account controller made the namespace's default account"""
        accounts = core.list_namespaced_service_account(ns).items
        return next((a.metadata.name for a in accounts if a.metadata.name == "default"), None)

    assert eventually(default_account) == "default"


def test_the_api_server_publishes_its_front_proxy_for_aggregated_apis(
    control_plane: Cluster, core: Any
) -> None:
    """What an aggregated API server (kbatch's visibility API) reads to trust the API
    server's proxied requests: the front-proxy CA and the client names it allows."""

    def published() -> dict[str, str] | None:
        """kube-system/extension-apiserver-authentication names a front-proxy CA"""
        try:
            config = core.read_namespaced_config_map(
                "extension-apiserver-authentication", "kube-system"
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            return None
        data = config.data or {}
        return data if data.get("requestheader-client-ca-file") else None

    data = eventually(published)
    assert "BEGIN CERTIFICATE" in data["requestheader-client-ca-file"]
    assert "requestheader-allowed-names" in data
    if control_plane.front_proxy_ca is None:
        return  # a cluster we did not start: its own front proxy
    assert json.loads(data["requestheader-allowed-names"]) == [FRONT_PROXY_CLIENT]
    assert data["requestheader-client-ca-file"].strip() == (
        control_plane.front_proxy_ca.read_text().strip()
    )
    assert json.loads(data["requestheader-username-headers"]) == ["X-Remote-User"]
    assert json.loads(data["requestheader-group-headers"]) == ["X-Remote-Group"]


def test_the_front_proxy_client_certificate_is_signed_by_the_published_ca(
    control_plane: Cluster,
) -> None:
    if control_plane.front_proxy_ca is None:
        pytest.skip("e2e: a cluster we did not start")
    folder = control_plane.front_proxy_ca.parent
    verified = subprocess.run(
        ["openssl", "verify", "-purpose", "sslclient", "-CAfile",
         str(control_plane.front_proxy_ca), str(folder / "client.crt")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert verified.returncode == 0, verified.stderr
    subject = subprocess.run(
        ["openssl", "x509", "-noout", "-subject", "-in", str(folder / "client.crt")],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert subject.strip().endswith(f"CN = {FRONT_PROXY_CLIENT}"), subject


def test_this_machines_address_can_be_an_endpoint(core: Any, names: dict[str, str]) -> None:
    """The API server reaches a local process behind a Service at host_ipv4(): an
    Endpoints' address may not be loopback, that one is taken."""
    address = host_ipv4()
    if address is None:
        pytest.skip("e2e: this machine has no IPv4 address but loopback")
    ns = names["namespace"]
    core.create_namespace({"metadata": {"name": ns}})
    endpoints = {
        "metadata": {"name": "local"},
        "subsets": [{"addresses": [{"ip": address}], "ports": [{"port": 8443}]}],
    }
    core.create_namespaced_endpoints(ns, endpoints)
    (subset,) = core.read_namespaced_endpoints("local", ns).subsets
    assert [a.ip for a in subset.addresses] == [address]
    loopback = {**endpoints, "metadata": {"name": "loopback"}}
    loopback["subsets"] = [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": 8443}]}]
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_endpoints(ns, loopback)
    assert refused.value.status == 422


# A stand-in for a Kubernetes command: it knows --secure-port and --version, and
# refuses any other flag the way cobra does (before acting on --version).
FAKE_COMMAND = """#!/bin/sh
for arg in "$@"; do
    case $arg in
    --secure-port=*|--version) ;;
    *) echo "Error: unknown flag: ${arg%%=*}" >&2; exit 1 ;;
    esac
done
echo "Kubernetes v1.99.0"
"""


def test_a_flag_is_passed_only_to_a_binary_that_takes_it(tmp_path: Path) -> None:
    binary = tmp_path / "kube-apiserver"
    binary.write_text(FAKE_COMMAND)
    binary.chmod(0o755)
    assert when_accepted(binary, "--insecure-port=0", "--secure-port=0") == ["--secure-port=0"]
    assert not accepts(tmp_path / "missing", "--secure-port=0")


REPO = Path(__file__).resolve().parents[2]


def test_the_smoke_set_names_tests_that_exist() -> None:
    """A renamed test or case would drop out of the oldest version's run unseen."""
    cases = []
    for entry in smoke.entries():
        path, _, rest = entry.partition("::")
        assert (REPO / path).is_file(), entry
        name = rest.partition("[")[0]
        if name:
            source = (REPO / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {re.escape(name)}\(", source, re.MULTILINE), entry
        if "[" in rest:
            cases.append(entry)
    listed = subprocess.run(
        # pytest's own script: ``python -m pytest`` would put the checkout's ./kbatch,
        # which is not the installed layout, first on the path.
        [str(Path(sys.executable).with_name("pytest")), "--collect-only", "-q",
         "-p", "no:cacheprovider",
         *sorted({case.partition("::")[0] for case in cases})],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.splitlines()  # fmt: skip
    assert not [case for case in cases if case not in listed]
    assert smoke.in_smoke_set(cases[0]) and not smoke.in_smoke_set(cases[0] + "x")
