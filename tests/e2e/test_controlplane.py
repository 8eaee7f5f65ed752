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
from e2e.controlplane import Cluster, accepts, when_accepted

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
