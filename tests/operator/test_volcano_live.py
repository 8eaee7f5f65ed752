"""Volcano's PodGroups and Queues (scheduling.volcano.sh/v1beta1) in the live runtime,
against a scripted API: their informers ask discovery first (nothing listed, yet
synced, where Volcano's CRDs are not installed), put them in the state as kbatch's
own (a kbatch object of the same name wins) and drop them again; a session schedules
a Volcano gang in a Volcano queue and writes their status back in Volcano's fields, at
Volcano's paths."""

import itertools
import json
import threading
from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.cluster import volcano
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.runtime import informer as informers
from kbatch.operators.scheduler.runtime.informer import VOLCANO_RESOURCES, Informer
from kbatch.operators.scheduler.runtime.kube_backend import KubeBackend
from kbatch.operators.scheduler.runtime.volcano import VolcanoObjects

V1BETA1 = "scheduling.volcano.sh/v1beta1"
DISCOVERY = {"resources": [{"name": "podgroups"}, {"name": "queues"}, {"name": "queues/status"}]}


def vgroup(name: str, queue: str = "q", min_member: int = 2) -> dict[str, Any]:
    meta = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    spec = {"minMember": min_member, "queue": queue}
    return {"apiVersion": V1BETA1, "kind": "PodGroup", "metadata": meta, "spec": spec}


def vqueue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1BETA1, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def pod(name: str, group: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": "kbatch",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }


class Api:
    """Answers discovery (``served``), lists (``lists``, in turn; then blocks like an
    idle watch) and records every other request."""

    def __init__(self, served: bool = True, lists: list[Any] | None = None) -> None:
        self.served = served
        self.lists = list(lists or [])
        self.sent: list[tuple[str, str, Any]] = []
        self.lock = threading.Lock()
        self.listed = threading.Event()

    def request(
        self, _api: Any, method: str, path: str, body: Any = None, content_type: str = ""
    ) -> Any:
        if method == "GET" and path == f"/apis/{V1BETA1}":
            if not self.served:
                raise kubeapi.ApiError(404, "the server could not find the requested resource")
            return DISCOVERY
        with self.lock:
            self.sent.append((method, path, body))
        return {}

    def raw_get(self, _api: Any, path: str, query: dict[str, str], _timeout: Any) -> Any:
        if not self.lists:
            self.listed.set()
            threading.Event().wait(5)
            raise ConnectionError("stopped")
        return Response(self.lists.pop(0))

    def patches(self) -> dict[str, Any]:
        with self.lock:
            return {p: b for m, p, b in self.sent if m == "PATCH"}


class Response:
    def __init__(self, answer: dict[str, Any]) -> None:
        self.data = json.dumps(answer.get("list", {})).encode()
        self.events = answer.get("events", [])

    def stream(self, _size: int) -> Any:
        for event in self.events:
            yield json.dumps(event).encode() + b"\n"

    def release_conn(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


def listed(*items: dict[str, Any]) -> dict[str, Any]:
    return {"list": {"metadata": {"resourceVersion": "1"}, "items": list(items)}}


def fake(monkeypatch: pytest.MonkeyPatch, api: Api) -> Api:
    monkeypatch.setattr(kubeapi.client, "request", api.request)
    monkeypatch.setattr(kubeapi.client, "raw_get", api.raw_get)
    return api


def run_informer(state: ClusterState, api: Api, index: int, wait: bool = False) -> Informer:
    store = VolcanoObjects(state)
    informer = Informer(object(), VOLCANO_RESOURCES[index], store)  # type: ignore[arg-type]
    informer.start()
    assert (api.listed if wait else informer.synced).wait(10)
    return informer


def test_where_volcanos_crds_are_not_installed_nothing_is_listed_and_all_is_synced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = fake(monkeypatch, Api(served=False, lists=[listed(vgroup("g"))]))
    state = ClusterState()
    run_informer(state, api, 0).stop()
    assert state.pod_groups() == {}
    assert len(api.lists) == 1, "no list asked"


def test_listed_volcano_objects_are_kbatchs_and_deleted_ones_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mine = {"apiVersion": "scheduling.incubator.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "taken", "namespace": "default"}}  # fmt: skip
    events = {"events": [{"type": "DELETED", "object": vgroup("b")}]}
    lists = [listed(vgroup("a", min_member=3), vgroup("b"), vgroup("taken")), events]
    api = fake(monkeypatch, Api(lists=lists))
    state = ClusterState()
    state.apply(mine)
    run_informer(state, api, 0, wait=True).stop()
    groups = state.pod_groups()
    assert sorted(groups) == ["default/a", "default/taken"]
    assert groups["default/a"].spec.min_member == 3
    assert volcano.origin_of(state.get("PodGroup", "default", "a")) == V1BETA1
    assert volcano.origin_of(state.get("PodGroup", "default", "taken")) is None
    # a relist of kbatch's own PodGroups keeps the Volcano ones
    state.replace("PodGroup", [mine])
    assert sorted(state.pod_groups()) == ["default/a", "default/taken"]


def test_listed_volcano_queues_are_kbatchs_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    queues = [vqueue("team", weight=2), vqueue("leaf", parent="team", deserved={"cpu": "4"})]
    api = fake(monkeypatch, Api(lists=[listed(*queues)]))
    state = ClusterState()
    run_informer(state, api, 1, wait=True).stop()
    held = state.get("Queue", "", "leaf")
    assert held is not None and held["spec"] == {"parent": "team", "deserved": {"cpu": "4"}}
    assert volcano.origin_of(held) == V1BETA1


def test_a_volcano_gang_is_bound_and_its_statuses_written_in_volcanos_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = fake(monkeypatch, Api())
    state = ClusterState()
    objects = VolcanoObjects(state)
    objects.apply(vqueue("q", weight=1))
    objects.apply(vgroup("g"))
    state.apply({"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}})
    state.apply({"kind": "Node", "metadata": {"name": "n1"},
                 "status": {"allocatable": {"cpu": "4", "pods": "10"}}})  # fmt: skip
    for name in ("p0", "p1"):
        state.apply(pod(name, "g"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    ids = (str(i) for i in itertools.count())
    runner.Scheduler(cluster, runner.default_conf(), lambda: 1000.0, lambda: next(ids)).run_once()
    cluster.shutdown()
    patches = api.patches()
    (group_patch,) = [
        b for p, b in patches.items() if p == f"/apis/{V1BETA1}/namespaces/default/podgroups/g"
    ]
    assert group_patch[0]["value"]["phase"] in ("Inqueue", "Running")
    queue_patch = patches[f"/apis/{V1BETA1}/queues/q/status"][0]["value"]
    assert set(queue_patch) <= {"state", "pending", "inqueue", "running", "allocated"}
    assert queue_patch["state"] == "Open"
    assert queue_patch["allocated"] == {"cpu": "2"}
    assert not any("incubator.k8s.io" in p and "/g" in p for p in patches)


def test_a_watches_set_has_informers_of_them() -> None:
    assert [r.plural for r in VOLCANO_RESOURCES] == ["podgroups", "queues"]
    assert all(r.group_versions == (V1BETA1,) for r in VOLCANO_RESOURCES)
    assert not set(VOLCANO_RESOURCES) & set(informers.RESOURCES)
