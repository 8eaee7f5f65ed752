"""The API server the chart's install tests use: the e2e suite's control plane
(tests/e2e/controlplane.py), started here once for tests/chart with

- its audit log on, so that tests see every request kbatch makes.

Like every control plane of controlplane.py, it calls a webhook Service (and an
APIService's) at its Endpoints (there is no kube-proxy), with a front proxy: a
test can put kbatch, run locally, behind the chart's webhook Service.

It is separate from tests/e2e's control plane on purpose: the chart's webhook
configurations (failurePolicy Fail) stay out of the other e2e tests' cluster.
With ``KBATCH_E2E_KUBECONFIG`` the cluster named there is used instead (no audit
log, no routing: the tests that need them skip).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from e2e import smoke
from e2e.controlplane import Cluster, ControlPlane, Unavailable, discover

from chart.kube import Plane

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
"""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests CI also runs on the oldest Kubernetes get the ``smoke`` marker."""
    smoke.mark(items)


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    try:
        source = discover()
    except Unavailable as why:
        pytest.skip(f"e2e: no control plane: {why}")
    if isinstance(source, Cluster):
        yield Plane(source, None)
        return
    work = tmp_path_factory.mktemp("chart-plane")
    (work / "audit-policy.yaml").write_text(AUDIT_POLICY)
    audit_log = work / "audit.log"
    audited = ControlPlane(
        source.binaries,
        extra_apiserver_args=[
            f"--audit-policy-file={work / 'audit-policy.yaml'}",
            f"--audit-log-path={audit_log}",
        ],
        workdir=work / "plane",
    )
    with audited as cluster:
        yield Plane(cluster, audit_log)
