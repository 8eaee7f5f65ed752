"""A victim gets the DisruptionTarget condition before its DELETE, where the server's Jobs
read it (batch/v1 JobSpec has podFailurePolicy in the OpenAPI it serves), against a
scripted API: the PATCH and its body, the order, a pod gone meanwhile, a refusal, no
answer, and a server without the condition (nothing but the DELETE, as ever)."""

import threading
import time
from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.kubeapi import ApiError, Unreachable
from kbatch.operators.scheduler.core.framework.info import TaskInfo, TaskStatus
from kbatch.operators.scheduler.runtime.disruption import jobs_read_disruption
from kbatch.operators.scheduler.runtime.kube_backend import KubeBackend

WHY = "kbatch: preempting to accommodate pod default/high-0 of PodGroup default/high"
BATCH_DOC = "/openapi/v3/apis/batch/v1"
INDEX = {"paths": {"apis/batch/v1": {"serverRelativeURL": f"{BATCH_DOC}?hash=ABC"}}}
STATUS = "/api/v1/namespaces/default/pods/victim/status"
POD = "/api/v1/namespaces/default/pods/victim"


def batch_doc(*fields: str) -> dict[str, Any]:
    properties = {name: {"type": "object"} for name in ("template", "parallelism", *fields)}
    return {"components": {"schemas": {"io.k8s.api.batch.v1.JobSpec": {"properties": properties}}}}


NEWEST = {"/openapi/v3": INDEX, BATCH_DOC: batch_doc("podFailurePolicy", "suspend")}
BEFORE_POD_FAILURE_POLICY = {"/openapi/v3": INDEX, BATCH_DOC: batch_doc("suspend")}
OLDEST: dict[str, Any] = {}  # Kubernetes 1.20: no /openapi/v3 at all (404)


class FakeApi:
    """Answers GETs from ``served`` (404 for what is not there), records every request
    in order with its content type and query; ``refuse`` maps (method, path) to an
    exception."""

    def __init__(self, served: dict[str, Any]) -> None:
        self.served = served
        self.refuse: dict[tuple[str, str], Exception] = {}
        self.sent: list[tuple[str, str, Any, str, dict[str, str] | None]] = []
        self.lock = threading.Lock()

    def __call__(
        self,
        _api: Any,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = kubeapi.JSON,
        timeout: Any = None,
        query: dict[str, str] | None = None,
    ) -> Any:
        with self.lock:
            self.sent.append((method, path, body, content_type, query))
        if (method, path) in self.refuse:
            raise self.refuse[method, path]
        if method == "GET":
            if path not in self.served:
                raise ApiError(404, "the server could not find the requested resource")
            return self.served[path]
        return {}

    def requests(self) -> list[tuple[str, str]]:
        with self.lock:
            return [(m, p) for m, p, *_ in self.sent]

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.requests() if m != "GET"]


def fake(monkeypatch: pytest.MonkeyPatch, served: dict[str, Any]) -> FakeApi:
    api = FakeApi(served)
    monkeypatch.setattr(kubeapi.client, "request", api)
    return api


def running_victim() -> tuple[ClusterState, TaskInfo]:
    state = ClusterState()
    state.apply({"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {}}})
    state.apply(
        {
            "kind": "Pod",
            "metadata": {"name": "victim", "namespace": "default", "uid": "uid-victim"},
            "spec": {"schedulerName": "kbatch", "nodeName": "n1", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"},
        }
    )
    (task,) = [t for j in state.snapshot().jobs.values() for t in j.tasks.values()]
    return state, task


def evict(api: FakeApi, writes: int = 2) -> KubeBackend:
    state, victim = running_victim()
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    cluster.evict(victim, "preempted for default/high-0", WHY)
    deadline = time.monotonic() + 10
    while len(api.writes()) < writes:
        assert time.monotonic() < deadline, f"{writes} writes: {api.requests()}"
        time.sleep(0.01)
    cluster.shutdown()
    return cluster


def test_the_condition_is_patched_in_before_the_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    api = fake(monkeypatch, NEWEST)
    evict(api)
    assert api.writes() == [("PATCH", STATUS), ("DELETE", POD)]
    (patch,) = [s for s in api.sent if s[0] == "PATCH"]
    _, _, body, content_type, query = patch
    assert content_type == kubeapi.STRATEGIC_MERGE_PATCH  # merged into the list by type
    assert query == {"fieldManager": "kbatch"}
    assert body["metadata"] == {"uid": "uid-victim"}  # never another pod of that name
    (condition,) = body["status"]["conditions"]
    stamp = condition.pop("lastTransitionTime")
    assert stamp.endswith("Z") and "T" in stamp
    assert condition == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": WHY,
    }


def test_the_openapi_document_is_asked_for_once_with_its_hash(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = fake(monkeypatch, NEWEST)
    state, victim = running_victim()
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    for _ in range(3):
        cluster.evictor.send(victim.namespace, victim.name, victim.uid, WHY)
    gets = [s for s in api.sent if s[0] == "GET"]
    assert [(p, q) for _, p, _, _, q in gets] == [
        ("/openapi/v3", None),
        (BATCH_DOC, {"hash": "ABC"}),
    ]
    assert api.writes() == [("PATCH", STATUS), ("DELETE", POD)] * 3


@pytest.mark.parametrize(
    "served", [OLDEST, BEFORE_POD_FAILURE_POLICY, {"/openapi/v3": {"paths": {}}}]
)
def test_a_server_whose_jobs_do_not_read_the_condition_gets_the_delete_alone(
    monkeypatch: pytest.MonkeyPatch, served: dict[str, Any]
) -> None:
    api = fake(monkeypatch, served)
    evict(api, writes=1)
    assert api.writes() == [("DELETE", POD)]


@pytest.mark.parametrize("status", [404, 409, 422, 403, 500])
def test_a_refused_patch_never_keeps_the_pod_from_its_delete(
    monkeypatch: pytest.MonkeyPatch, status: int
) -> None:
    """404: gone; 409 / 422: another pod of the name now (its uid); 403: a role without
    pods/status; 500: the server's trouble. The DELETE, with its own uid precondition,
    decides whether anything is evicted."""
    api = fake(monkeypatch, NEWEST)
    api.refuse["PATCH", STATUS] = ApiError(status, "refused")
    evict(api)
    assert api.writes() == [("PATCH", STATUS), ("DELETE", POD)]


def test_a_pod_gone_before_its_patch_is_no_failed_eviction(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = fake(monkeypatch, NEWEST)
    api.refuse["PATCH", STATUS] = ApiError(404, 'pods "victim" not found')
    api.refuse["DELETE", POD] = ApiError(404, 'pods "victim" not found')
    state, victim = running_victim()
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    assert cluster.evictor.send(victim.namespace, victim.name, victim.uid, WHY) is False
    cluster.shutdown()
    assert [p for m, p in api.writes() if p.endswith("/events")] == [], "no FailedEviction"


def test_no_answer_to_the_patch_holds_the_pod_as_a_delete_without_one_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = fake(monkeypatch, NEWEST)
    api.refuse["PATCH", STATUS] = Unreachable("connection refused")
    state, victim = running_victim()
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    state.assume_releasing(victim.namespace, victim.name)
    assert cluster.evictor.send(victim.namespace, victim.name, victim.uid, WHY) is False
    cluster.shutdown()
    assert ("DELETE", POD) not in api.writes()
    (held,) = [t for j in state.snapshot().jobs.values() for t in j.tasks.values()]
    assert held.status is TaskStatus.RELEASING, "held for its back-off, as after a DELETE"


def test_a_discovery_refused_is_asked_again_and_the_eviction_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = fake(monkeypatch, NEWEST)
    api.refuse["GET", "/openapi/v3"] = ApiError(503, "the server is shutting down")
    state, victim = running_victim()
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    cluster.evictor.send(victim.namespace, victim.name, victim.uid, WHY)
    assert api.writes() == [("DELETE", POD)]
    del api.refuse["GET", "/openapi/v3"]
    cluster.evictor.send(victim.namespace, victim.name, victim.uid, WHY)
    cluster.shutdown()
    assert api.writes() == [("DELETE", POD), ("PATCH", STATUS), ("DELETE", POD)]


def test_jobs_read_disruption_from_the_job_spec_served(monkeypatch: pytest.MonkeyPatch) -> None:
    fake(monkeypatch, NEWEST)
    assert jobs_read_disruption(None) is True  # type: ignore[arg-type]
    fake(monkeypatch, BEFORE_POD_FAILURE_POLICY)
    assert jobs_read_disruption(None) is False  # type: ignore[arg-type]
    fake(monkeypatch, OLDEST)
    assert jobs_read_disruption(None) is False  # type: ignore[arg-type]
