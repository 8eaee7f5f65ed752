"""The scheduler's informer of CSINodes (how many volumes of each CSI driver a node may
attach: ``kbatch.cluster.volume_use``): the CSINodes listed reach the state, a bad one
is refused naming the field while the others are kept, and where kbatch may not list
them (an RBAC made for an older kbatch) it runs without the limits rather than not at
all."""

from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.runtime.informer import RESOURCES, Informer
from tests.operator.test_upstream_groups import Api, fake, listed

CSINODES = next(r for r in RESOURCES if r.kind == "CSINode")


class StorageApi(Api):
    """``Api``, whose discovery serves storage.k8s.io/v1 csinodes."""

    def request(
        self, _api: Any, method: str, path: str, body: Any = None, content_type: str = ""
    ) -> Any:
        if method == "GET" and path == "/apis/storage.k8s.io/v1":
            return {"resources": [{"name": "csinodes"}, {"name": "storageclasses"}]}
        return super().request(_api, method, path, body, content_type)


def run_informer(state: ClusterState) -> None:
    informer = Informer(object(), CSINODES, state)  # type: ignore[arg-type]
    informer.start()
    assert informer.synced.wait(10)
    informer.stop()


def csi_node(name: str, count: object) -> dict[str, Any]:
    driver = {"name": "disk.csi.example.com", "nodeID": name, "allocatable": {"count": count}}
    return {"metadata": {"name": name}, "spec": {"drivers": [driver]}}


def test_listed_csinodes_reach_the_state(monkeypatch: pytest.MonkeyPatch) -> None:
    api = fake(monkeypatch, StorageApi(lists=[listed(csi_node("a1", 3), csi_node("b1", -1))]))
    state = ClusterState()
    run_informer(state)
    assert api.paths[0] == "/apis/storage.k8s.io/v1/csinodes"
    assert [obj["metadata"]["name"] for obj in state.list("CSINode")] == ["a1"]
    assert (
        state.refusal("CSINode", "", "b1")
        == "spec.drivers[0].allocatable.count: must be >= 0, not -1"
    )


def test_where_kbatch_may_not_list_csinodes_it_runs_without_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake(monkeypatch, StorageApi(lists=[kubeapi.ApiError(403, "forbidden")]))
    state = ClusterState()
    run_informer(state)
    assert state.list("CSINode") == []
