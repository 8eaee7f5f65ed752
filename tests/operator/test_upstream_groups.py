"""Upstream's PodGroups in the live runtime, against a scripted API: their informer asks
discovery first (nothing listed, yet synced, where the server does not serve them or
kbatch may not list them), puts them in the state as kbatch's gangs and drops them
again; a session binds a gang of them whole and writes upstream's condition to the
upstream object's status (True once placed; False, Unschedulable, saying why, while
it waits), never on a group whose pods are another scheduler's."""

import itertools
import json
import threading
from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.api.podgroup import ConditionType, PodGroupPhase, PodGroupStatus
from kbatch.cluster import upstream_groups
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.podgroup_status import condition as condition_of
from kbatch.operators.scheduler.runtime import informer as informers
from kbatch.operators.scheduler.runtime.informer import UPSTREAM_POD_GROUPS, Informer
from kbatch.operators.scheduler.runtime.kube_backend import KubeBackend
from kbatch.operators.scheduler.runtime.upstream import UpstreamGroups

STATUS = "/apis/scheduling.k8s.io/v1alpha3/namespaces/default/podgroups/{}/status"
DISCOVERY = {"resources": [{"name": "podgroups"}, {"name": "podgroups/status"}]}


def group(name: str, min_count: int = 3, uid: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    }


def pod(name: str, group_name: str, cpu: str = "1", scheduler: str = "kbatch") -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulerName": scheduler,
            "schedulingGroup": {"podGroupName": group_name},
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        },
        "status": {"phase": "Pending"},
    }


def node(name: str, cpu: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": cpu, "pods": "10"}},
    }


class Api:
    """Answers discovery (``served``), lists (``lists``, in turn; then blocks like an idle
    watch) and records every other request."""

    def __init__(
        self, served: bool = True, lists: list[Any] | None = None, version: str = "v1alpha3"
    ) -> None:
        self.served = served
        self.version = version  # the one served
        self.paths: list[str] = []  # of the lists and watches
        self.lists = list(lists or [])
        self.sent: list[tuple[str, str, Any, str]] = []
        self.lock = threading.Lock()
        self.listed = threading.Event()

    def request(
        self, _api: Any, method: str, path: str, body: Any = None, content_type: str = ""
    ) -> Any:
        if method == "GET" and path.startswith("/apis/scheduling.k8s.io/v1"):
            if not self.served or not path.endswith(self.version):
                raise kubeapi.ApiError(404, "the server could not find the requested resource")
            return DISCOVERY
        with self.lock:
            self.sent.append((method, path, body, content_type))
        return {}

    def raw_get(self, _api: Any, path: str, query: dict[str, str], _timeout: Any) -> Any:
        self.paths.append(path)
        if not self.lists:
            self.listed.set()
            threading.Event().wait(5)
            raise ConnectionError("stopped")
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return Response(answer)

    def patches(self) -> list[tuple[str, Any, str]]:
        with self.lock:
            return [(p, b, c) for m, p, b, c in self.sent if m == "PATCH"]

    def binds(self) -> list[str]:
        with self.lock:
            return sorted(p.split("/")[-2] for m, p, _, _ in self.sent if p.endswith("/binding"))


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


def listed(*items: dict[str, Any], version: str = "1") -> dict[str, Any]:
    return {"list": {"metadata": {"resourceVersion": version}, "items": list(items)}}


def fake(monkeypatch: pytest.MonkeyPatch, api: Api) -> Api:
    monkeypatch.setattr(kubeapi.client, "request", api.request)
    monkeypatch.setattr(kubeapi.client, "raw_get", api.raw_get)
    return api


def run_informer(state: ClusterState, api: Api, wait: threading.Event | None = None) -> Informer:
    informer = Informer(object(), UPSTREAM_POD_GROUPS, UpstreamGroups(state))  # type: ignore[arg-type]
    informer.start()
    assert (wait or informer.synced).wait(10)
    return informer


def test_where_the_server_does_not_serve_them_nothing_is_listed_and_all_is_synced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = fake(monkeypatch, Api(served=False, lists=[listed(group("g"))]))
    state = ClusterState()
    informer = run_informer(state, api)
    informer.stop()
    assert state.pod_groups() == {}
    assert len(api.lists) == 1, "no list asked"


def test_where_kbatch_may_not_list_them_it_runs_without_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = fake(monkeypatch, Api(lists=[kubeapi.ApiError(403, "forbidden")]))
    state = ClusterState()
    informer = run_informer(state, api)
    informer.stop()
    assert informer.synced.is_set() and state.pod_groups() == {}


def test_listed_groups_are_kbatch_gangs_and_deleted_ones_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mine = {"apiVersion": "scheduling.incubator.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "taken", "namespace": "default"}}  # fmt: skip
    events = {"events": [{"type": "DELETED", "object": group("b")}]}
    api = fake(monkeypatch, Api(lists=[listed(group("a"), group("b"), group("taken")), events]))
    state = ClusterState()
    state.apply(mine)
    informer = run_informer(state, api, api.listed)
    informer.stop()
    groups = state.pod_groups()
    assert sorted(groups) == ["default/a", "default/taken"]
    assert groups["default/a"].spec.min_member == 3
    assert not upstream_groups.is_upstream(state.get("PodGroup", "default", "taken"))


def session(state: ClusterState, upstream: UpstreamGroups) -> KubeBackend:
    cluster = KubeBackend(None, state, upstream=upstream)  # type: ignore[arg-type]
    ids = (str(i) for i in itertools.count())
    runner.Scheduler(cluster, runner.default_conf(), lambda: 1000.0, lambda: next(ids)).run_once()
    return cluster


def world(*objects: dict[str, Any]) -> tuple[ClusterState, UpstreamGroups]:
    state = ClusterState()
    state.apply({"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}})
    upstream = UpstreamGroups(state)
    for obj in objects:
        if obj["kind"] == "PodGroup":
            upstream.apply(obj)
        else:
            state.apply(obj)
    return state, upstream


def test_a_gang_of_three_is_bound_whole_and_told_scheduled(monkeypatch: pytest.MonkeyPatch) -> None:
    api = fake(monkeypatch, Api())
    pods = [pod(f"p{i}", "g") for i in range(3)]
    state, upstream = world(node("n1", "2"), node("n2", "2"), group("g"), *pods)
    session(state, upstream).shutdown()
    assert api.binds() == ["p0", "p1", "p2"]
    written = [(b, c) for p, b, c in api.patches() if p == STATUS.format("g")]
    assert len(written) == 1
    condition = written[0][0]["status"]["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodGroupInitiallyScheduled", "True", "Scheduled",
    )  # fmt: skip
    assert written[0][1] == kubeapi.STRATEGIC_MERGE_PATCH
    assert not any("incubator.k8s.io/v1alpha1/namespaces" in p for p, _, _ in api.patches())
    assert state.pod_group("default/g").status.phase.value == "Running"  # type: ignore[union-attr]


def test_a_gang_that_does_not_fit_is_not_half_bound_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = fake(monkeypatch, Api())
    pods = [pod(f"p{i}", "g", cpu="2") for i in range(3)]
    state, upstream = world(node("n1", "2"), node("n2", "2"), group("g"), *pods)
    session(state, upstream).shutdown()
    assert api.binds() == []
    written = [b for p, b, _ in api.patches() if p == STATUS.format("g")]
    assert len(written) == 1
    condition = written[0]["status"]["conditions"][0]
    assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
    assert "3" in condition["message"], condition["message"]
    # the next version of the object (its condition echoed) keeps kbatch's status
    kept = state.pod_group("default/g")
    echoed = {**group("g"), "status": {"conditions": [condition]}}
    upstream.apply(echoed)
    assert state.pod_group("default/g").status == kept.status  # type: ignore[union-attr]


def test_a_group_of_another_schedulers_pods_is_not_written(monkeypatch: pytest.MonkeyPatch) -> None:
    api = fake(monkeypatch, Api())
    pods = [pod(f"p{i}", "g", cpu="2", scheduler="default-scheduler") for i in range(3)]
    state, upstream = world(node("n1", "2"), group("g"), group("empty"), *pods)
    session(state, upstream).shutdown()
    assert api.binds() == []
    assert [p for p, _, _ in api.patches() if "podgroups" in p or "/pods/" in p] == []


def test_the_beta_version_is_preferred_where_served(monkeypatch: pytest.MonkeyPatch) -> None:
    beta = {**group("g", 1), "apiVersion": None}  # (a list's items come without it)
    api = fake(monkeypatch, Api(lists=[listed(beta)], version="v1beta1"))
    state = ClusterState()
    informer = run_informer(state, api, api.listed)
    informer.stop()
    assert api.paths[0] == "/apis/scheduling.k8s.io/v1beta1/podgroups"
    held = state.get("PodGroup", "default", "g")
    assert upstream_groups.origin_of(held) == "scheduling.k8s.io/v1beta1"
    state.apply(pod("p0", "g"))
    cluster = KubeBackend(None, state, upstream=UpstreamGroups(state))  # type: ignore[arg-type]
    cluster.upstream.apply({**group("g", 1), "apiVersion": "scheduling.k8s.io/v1beta1"})  # type: ignore[union-attr]
    waiting = PodGroupStatus(
        phase=PodGroupPhase.INQUEUE,
        conditions=(condition_of(ConditionType.UNSCHEDULABLE, True, "x", "no room"),),
    )
    cluster.update_pod_group("default", "g", waiting)
    cluster.shutdown()
    written = [p for p, _, _ in api.patches()]
    assert written == ["/apis/scheduling.k8s.io/v1beta1/namespaces/default/podgroups/g/status"]


def test_a_watches_set_has_an_informer_of_them() -> None:
    assert UPSTREAM_POD_GROUPS.group_versions == (
        "scheduling.k8s.io/v1beta1",
        "scheduling.k8s.io/v1alpha3",
    )
    assert UPSTREAM_POD_GROUPS.plural == "podgroups"
    assert UPSTREAM_POD_GROUPS not in informers.RESOURCES


def test_a_group_whose_pods_kbatch_evicts_is_told_once(monkeypatch: pytest.MonkeyPatch) -> None:
    api = fake(monkeypatch, Api())
    running = [{**pod(f"p{i}", "g"), "status": {"phase": "Running"}} for i in range(2)]
    for member in running:
        member["spec"]["nodeName"] = "n1"
    state, upstream = world(node("n1", "2"), group("g", 2), *running)
    cluster = KubeBackend(None, state, upstream=upstream)  # type: ignore[arg-type]
    tasks = [t for job in state.snapshot().jobs.values() for t in job.tasks.values()]
    for victim in sorted(tasks, key=lambda t: t.name):
        cluster.evict(victim, "reclaimed", "kbatch: queue q2 reclaims its share")
    cluster.shutdown()
    written = [b for p, b, _ in api.patches() if p == STATUS.format("g")]
    assert len(written) == 1, "once, not per pod"
    told = written[0]["status"]["conditions"][0]
    assert (told["type"], told["status"], told["reason"]) == (
        "DisruptionTarget", "True", "PreemptionByScheduler",
    )  # fmt: skip
    assert told["message"] == "kbatch evicts pod default/p0: kbatch: queue q2 reclaims its share"
