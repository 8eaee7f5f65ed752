"""The live scheduler and Dynamic Resource Allocation: the informers of ResourceClaims,
DeviceClasses and ResourceSlices (where kbatch may not list them it runs without them),
and the binder's writes before a pod's bind: each claim's allocation and the pod among
those it is reserved for, in its status; a claim that cannot be had fails the bind with
an event, its devices free again."""

from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.kubeapi import ApiError
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.runtime.informer import RESOURCES, Informer
from tests.operator.test_csinode_informer import StorageApi
from tests.operator.test_kube import FakeApi, bind, node, task
from tests.operator.test_upstream_groups import fake, listed
from tests.unit.cluster.test_devices import claiming
from tests.unit.cluster.test_dra_records import (
    DRIVER,
    device_class,
    gpu,
    resource_claim,
    resource_slice,
)

CLAIMS = next(r for r in RESOURCES if r.kind == "ResourceClaim")
CLAIM_PATH = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"


class ClaimsApi(FakeApi):
    """``FakeApi`` whose GET of a claim answers with the state's."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__()
        self.state = state

    def __call__(
        self, _api: Any, method: str, path: str, body: Any = None, *a: Any, **k: Any
    ) -> Any:
        answer = super().__call__(_api, method, path, body, *a, **k)
        if method == "GET" and path.startswith(CLAIM_PATH):
            return dict(self.state.get("ResourceClaim", "default", path.rpartition("/")[2]) or {})
        return answer


def world(*objects: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    for obj in (node("n1"), device_class(), resource_slice("n1", gpu("gpu-0")), *objects):
        state.apply(obj)
    return state


def installed(monkeypatch: pytest.MonkeyPatch, state: ClusterState) -> ClaimsApi:
    api = ClaimsApi(state)
    monkeypatch.setattr(kubeapi.client, "request", api)
    return api


def test_a_bind_first_allocates_its_claim_and_reserves_it(monkeypatch: pytest.MonkeyPatch) -> None:
    state = world(resource_claim("c"), claiming("p", "c"))
    api = installed(monkeypatch, state)
    bind(state, "p")
    (get, put, post) = api.sent[:3]
    assert get[:2] == ("GET", f"{CLAIM_PATH}/c")
    assert put[:2] == ("PUT", f"{CLAIM_PATH}/c/status")
    status = put[2]["status"]
    assert status["allocation"] == {
        "devices": {
            "results": [{"request": "gpus", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]
        },
    }
    assert status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert post[:2] == ("POST", "/api/v1/namespaces/default/pods/p/binding")


def test_a_claim_write_refused_fails_the_bind_and_frees_the_devices(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = world(resource_claim("c"), claiming("p", "c"))
    api = installed(monkeypatch, state)
    api.answers[("PUT", "/resourceclaims/c/status")] = ApiError(403, "forbidden")
    bind(state, "p")
    assert not [p for p in api.paths("POST") if p.endswith("/binding")]
    assert task(state, "p").status is TaskStatus.PENDING
    (event,) = [e for e in api.events() if e["reason"] == "FailedScheduling"]
    assert 'resourceclaim "c"' in event["message"] and "forbidden" in event["message"]
    assert state._devices.assumed == {}


def test_two_pods_for_one_device_bound_at_once_the_second_fails_saying_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = world(resource_claim("c"), resource_claim("d"), claiming("p", "c"), claiming("q", "d"))
    api = installed(monkeypatch, state)
    bind(state, "p", "q")
    bound = [p for p in api.paths("POST") if p.endswith("/binding")]
    assert len(bound) == 1
    (event,) = [e for e in api.events() if e["reason"] == "FailedScheduling"]
    assert "cannot allocate all claims on n1" in event["message"]


def run_informer(state: ClusterState) -> None:
    informer = Informer(object(), CLAIMS, state)  # type: ignore[arg-type]
    informer.start()
    assert informer.synced.wait(10)
    informer.stop()


class ResourceApi(StorageApi):
    """``StorageApi``, whose discovery serves resource.k8s.io/v1 too."""

    def request(
        self, _api: Any, method: str, path: str, body: Any = None, content_type: str = ""
    ) -> Any:
        if method == "GET" and path == "/apis/resource.k8s.io/v1":
            return {"resources": [{"name": "resourceclaims"}, {"name": "resourceslices"}]}
        return super().request(_api, method, path, body, content_type)


def test_listed_claims_reach_the_state_a_bad_one_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = resource_claim("bad", 0)
    fake(monkeypatch, ResourceApi(lists=[listed(resource_claim("c"), bad)]))
    state = ClusterState()
    run_informer(state)
    assert [obj["metadata"]["name"] for obj in state.list("ResourceClaim")] == ["c"]
    assert state.refusal("ResourceClaim", "default", "bad") == (
        "spec.devices.requests[0].exactly.count: must be greater than zero"
    )


def test_where_kbatch_may_not_list_claims_it_runs_without_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake(monkeypatch, ResourceApi(lists=[kubeapi.ApiError(403, "forbidden")]))
    state = ClusterState()
    run_informer(state)
    assert state.list("ResourceClaim") == []
