"""Fixtures for the e2e tests: one control plane per session, or a skip saying why.

``control_plane`` yields a :class:`e2e.controlplane.Cluster`: ``.kubeconfig`` is
the path of a kubeconfig for the cluster, ``.api_client()`` makes a
``kubernetes.client.ApiClient``. ``api_client`` is a per-test client, closed after.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from e2e.controlplane import Cluster, Unavailable, discover


@pytest.fixture(scope="session")
def control_plane() -> Iterator[Cluster]:
    try:
        source = discover()
    except Unavailable as why:
        pytest.skip(f"e2e: no control plane: {why}")
    if isinstance(source, Cluster):
        yield source
        return
    with source as cluster:
        yield cluster


@pytest.fixture
def api_client(control_plane: Cluster) -> Iterator[Any]:
    with control_plane.api_client() as client:
        yield client
