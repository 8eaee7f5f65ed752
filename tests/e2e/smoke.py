"""The smoke set: the e2e and chart tests that CI also runs on the oldest supported
Kubernetes (1.20), where the whole suite runs on the newest. ``pytest -m smoke``
selects them; ``mark`` (called by the e2e and chart conftests at collection) marks
them. Each entry names a test file, a test, or one case of a parametrized test,
from the repository's root.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest

SMOKE: dict[str, tuple[str, ...]] = {
    "the control plane itself": ("tests/e2e/test_controlplane.py",),
    "installs: the CRDs' schemas, the chart with helm, its RBAC audited": (
        "tests/e2e/test_schema.py",
        "tests/chart/test_install.py",
        "tests/chart/test_rbac.py",
    ),
    "gangs: all or nothing, and not admitted when the cluster cannot hold them": (
        "tests/e2e/test_scenarios_both.py::test_scenario[cluster-gangs]",
        "tests/e2e/test_scenarios_both.py::test_scenario[cluster-full]",
        "tests/e2e/test_scenarios_both.py::test_both_backends_tell_the_user_the_same",
    ),
    "queues: reclaim between them, preemption inside one": (
        "tests/e2e/test_kube_batch_cluster.py::test_kube_batch_case_on_a_cluster"
        "[reclaim-two-queues-one-overused-proportion]",
        "tests/e2e/test_kube_batch_cluster.py::test_kube_batch_case_on_a_cluster"
        "[preempt-two-jobs-one-node]",
    ),
    "webhooks: validation, minResources, delayed pod creation or why it is off": (
        "tests/e2e/test_webhooks.py",
    ),
    "volumes: where a PV lets a pod go; claims bound or provisioned before the bind; "
    "CSI attach limits (ReadWriteOncePod skips: 1.22 on)": ("tests/e2e/test_volumes.py",),
    "topology spread: a gang spread over zones; a missing key told": (
        "tests/e2e/test_topology_spread.py",
    ),
    "image locality: a pod goes to the node holding its image; a pull is seen": (
        "tests/e2e/test_image_locality.py",
    ),
    "failover: a second replica takes the lead and goes on": (
        "tests/e2e/test_ha.py::test_leader_failover",
    ),
}


def entries() -> list[str]:
    return [entry for group in SMOKE.values() for entry in group]


def in_smoke_set(nodeid: str) -> bool:
    """Whether the test ``nodeid`` (pytest's, from the root) is in the smoke set."""
    return any(
        nodeid == entry or nodeid.startswith((f"{entry}::", f"{entry}[")) for entry in entries()
    )


def mark(items: Iterable[pytest.Item]) -> None:
    for item in items:
        if in_smoke_set(item.nodeid) and item.get_closest_marker("smoke") is None:
            item.add_marker(pytest.mark.smoke)
