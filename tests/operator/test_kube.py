"""KubeBackend's side effects, against a scripted API: nothing sent once the lead is lost,
evictions beside binds (not behind them) and assumed Releasing until the watch shows
them, an Evict event only for an eviction that happened, events stamped when decided."""

import threading
import time
from datetime import datetime
from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.kubeapi import ApiError
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.info import TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.operators.scheduler.runtime import binder
from kbatch.operators.scheduler.runtime.kube_backend import KubeBackend


def node(name: str) -> dict[str, Any]:
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": {"cpu": "4"}}}


def pod(name: str, node_name: str | None = None, group: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec: dict[str, Any] = {"schedulerName": "kbatch", "containers": [{"name": "c"}]}
    status = {"phase": "Pending"}
    if node_name:
        spec["nodeName"], status = node_name, {"phase": "Running"}
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": status}


class FakeApi:
    """Records every request; ``answers`` maps (method, path suffix) to an exception,
    ``gate`` holds binds until it is set, and ``entered`` is set once a bind reached it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any]] = []
        self.answers: dict[tuple[str, str], Exception] = {}
        self.gate = threading.Event()
        self.gate.set()
        self.entered = threading.Event()
        self.lock = threading.Lock()

    def __call__(
        self, _api: Any, method: str, path: str, body: Any = None, *_: Any, **__: Any
    ) -> Any:
        if path.endswith("/binding"):
            self.entered.set()
            assert self.gate.wait(10)
        with self.lock:
            self.sent.append((method, path, body))
        for (m, suffix), error in self.answers.items():
            if m == method and path.endswith(suffix):
                raise error
        return {}

    @classmethod
    def installed(cls, monkeypatch: pytest.MonkeyPatch) -> "FakeApi":
        """A new one, answering every request kbatch makes (until the test ends)."""
        fake = cls()
        monkeypatch.setattr(kubeapi.client, "request", fake)
        return fake

    def paths(self, method: str) -> list[str]:
        with self.lock:
            return [p for m, p, _ in self.sent if m == method]

    def events(self) -> list[dict[str, Any]]:
        with self.lock:
            return [b for m, p, b in self.sent if p.endswith("/events")]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    return FakeApi.installed(monkeypatch)


def world(*pods: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    state.apply(node("n1"))
    for item in pods:
        state.apply(item)
    return state


def task(state: ClusterState, name: str) -> TaskInfo:
    for job in state.snapshot().jobs.values():
        for candidate in job.tasks.values():
            if candidate.name == name:
                return candidate
    raise KeyError(name)


def wait_for(what: str, done: Any) -> None:
    deadline = time.monotonic() + 10
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def bind(state: ClusterState, *names: str) -> None:
    """Bind each pod ``names`` to n1 through a live backend, and wait for the answers."""
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    for name in names:
        cluster.bind(task(state, name), "n1")
    cluster.flush()
    wait_for("the binds answered", lambda: not cluster.binds_in_flight())
    cluster.shutdown()


def test_binds_queued_when_the_lead_is_lost_are_not_sent(api: FakeApi) -> None:
    state = world(pod("a"), pod("b"))
    leading = [True]
    cluster = KubeBackend(None, state, bind_workers=1, may_write=lambda: leading[0])  # type: ignore[arg-type]
    api.gate.clear()  # the first bind hangs on the API server
    cluster.bind(task(state, "a"), "n1")
    cluster.bind(task(state, "b"), "n1")
    cluster.flush()
    wait_for("a's bind under way", api.entered.is_set)
    leading[0] = False
    api.gate.set()
    wait_for("both binds done", lambda: not cluster.binds_in_flight())
    cluster.shutdown()
    assert api.paths("POST").count("/api/v1/namespaces/default/pods/b/binding") == 0
    assert task(state, "b").status is TaskStatus.PENDING, "b's assumption forgotten"


def test_shutdown_drops_binds_not_yet_sent(api: FakeApi) -> None:
    state = world(*(pod(f"p{i}") for i in range(5)))
    cluster = KubeBackend(None, state, bind_workers=1)  # type: ignore[arg-type]
    api.gate.clear()
    for i in range(5):
        cluster.bind(task(state, f"p{i}"), "n1")
    cluster.flush()
    threading.Timer(0.2, api.gate.set).start()
    cluster.shutdown()
    assert len([p for p in api.paths("POST") if p.endswith("/binding")]) == 1
    assert not cluster.binds_in_flight(), "a cancelled bind is not in flight"
    pending = [f"p{i}" for i in range(5) if task(state, f"p{i}").status is TaskStatus.PENDING]
    assert len(pending) == 4, "a bind never sent is not assumed any more"


def test_an_eviction_is_not_queued_behind_binds(api: FakeApi) -> None:
    state = world(pod("pending"), pod("victim", "n1"))
    cluster = KubeBackend(None, state, bind_workers=1)  # type: ignore[arg-type]
    api.gate.clear()
    cluster.bind(task(state, "pending"), "n1")
    cluster.flush()
    cluster.evict(task(state, "victim"), "preempted", "kbatch: preempting")
    wait_for("the eviction sent while the bind hangs", lambda: api.paths("DELETE"))
    api.gate.set()
    cluster.shutdown()


def test_a_victim_is_releasing_until_the_watch_shows_its_deletion(api: FakeApi) -> None:
    state = world(pod("victim", "n1"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    cluster.evict(task(state, "victim"), "preempted", "kbatch: preempting")
    assert task(state, "victim").status is TaskStatus.RELEASING
    cluster.shutdown()
    state.apply(pod("victim", "n1"))  # a relist: no deletionTimestamp yet
    assert task(state, "victim").status is TaskStatus.RELEASING


def test_the_evict_event_follows_a_successful_delete_only(api: FakeApi) -> None:
    group = {
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 1},
    }
    state = world(group, pod("ok", "n1", group="g"), pod("refused", "n1", group="g"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    api.answers[("DELETE", "/pods/refused")] = ApiError(500, "etcd timed out")
    for name in ("ok", "refused"):
        victim = task(state, name)
        cluster.evict(victim, "preempted", "kbatch: preempting")
        message = f"Evicted {victim.key}: preempted"
        cluster.record(ObjectRef("Pod", "default", name), "Normal", "Evict", message)
        cluster.record(ObjectRef("PodGroup", "default", "g"), "Normal", "Evict", message)
    wait_for("both evictions tried", lambda: len(api.paths("DELETE")) == 2)
    cluster.shutdown()
    told = sorted(
        (e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"])
        for e in api.events()
    )
    assert told == [
        ("Pod", "ok", "Evict"),
        ("Pod", "refused", "FailedEviction"),
        ("PodGroup", "g", "Evict"),
    ]
    (group_event,) = [e for e in api.events() if e["involvedObject"]["kind"] == "PodGroup"]
    assert "default/ok" in group_event["message"]
    assert task(state, "refused").status is TaskStatus.RUNNING, "a failed eviction is forgotten"


def test_an_event_is_stamped_when_the_session_sent_the_bind(api: FakeApi) -> None:
    state = world(pod("a"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    api.gate.clear()
    decided = time.time()
    cluster.bind(task(state, "a"), "n1")
    cluster.flush()
    time.sleep(1.1)  # the bind (and so its event) takes a while
    api.gate.set()
    cluster.shutdown()
    (event,) = api.events()
    assert event["reason"] == "Scheduled"
    stamped = datetime.fromisoformat(event["eventTime"].replace("Z", "+00:00")).timestamp()
    assert decided <= stamped < decided + 0.5
    assert event["action"] and event["reportingInstance"], "the API server requires them"


def test_a_nomination_is_a_merge_patch_of_the_pods_status(api: FakeApi) -> None:
    state = world(pod("a"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    cluster.nominate(task(state, "a"), "n1")
    cluster.nominate(task(state, "a"), None)
    cluster.shutdown()
    with api.lock:
        sent = [(m, p, b) for m, p, b in api.sent if p.endswith("/status")]
    path = "/api/v1/namespaces/default/pods/a/status"
    assert sent == [
        ("PATCH", path, {"status": {"nominatedNodeName": "n1"}}),
        ("PATCH", path, {"status": {"nominatedNodeName": None}}),
    ]


def test_no_nomination_is_written_once_the_lead_is_lost(api: FakeApi) -> None:
    state = world(pod("a"))
    cluster = KubeBackend(None, state, may_write=lambda: False)  # type: ignore[arg-type]
    cluster.nominate(task(state, "a"), "n1")
    cluster.shutdown()
    assert api.paths("PATCH") == []


def test_a_sessions_binds_are_sent_when_it_ends(api: FakeApi) -> None:
    """Bound in the session (the state sees it at once), sent at flush: the bind workers do
    not compete with the session for the interpreter while it places the rest."""
    state = world(pod("a"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    cluster.bind(task(state, "a"), "n1")
    assert task(state, "a").status is TaskStatus.BOUND, "assumed bound at once"
    assert cluster.binds_in_flight()
    time.sleep(0.1)
    assert api.paths("POST") == [], "nothing sent before the session ends"
    cluster.flush()
    wait_for("the bind sent", lambda: not cluster.binds_in_flight())
    cluster.shutdown()
    sent = [path for path in api.paths("POST") if path.endswith("/binding")]
    assert sent == ["/api/v1/namespaces/default/pods/a/binding"]


def test_binds_never_flushed_are_forgotten_at_shutdown(api: FakeApi) -> None:
    state = world(pod("a"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    cluster.bind(task(state, "a"), "n1")
    cluster.shutdown()
    cluster.flush()  # a session ending after the shutdown sends nothing
    assert api.paths("POST") == []
    assert not cluster.binds_in_flight()
    assert task(state, "a").status is TaskStatus.PENDING


def test_events_wait_for_binds_for_one_budget_in_all_not_one_each(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bind that hangs keeps binds in flight: each event waits until the budget from
    when it was recorded, so five events go out after one budget, not five in turn."""
    monkeypatch.setattr(binder, "EVENT_WAIT_FOR_BINDS", 0.5)
    state = world(pod("hangs"), *(pod(f"p{i}") for i in range(5)))
    cluster = KubeBackend(None, state, bind_workers=1)  # type: ignore[arg-type]
    api.gate.clear()
    cluster.bind(task(state, "hangs"), "n1")
    cluster.flush()
    started = time.monotonic()
    for i in range(5):
        cluster.record(ObjectRef("Pod", "default", f"p{i}"), "Normal", "Told", f"event {i}")
    wait_for("five events sent", lambda: len(api.events()) == 5)
    assert time.monotonic() - started < 1.5, "they waited one after another"
    api.gate.set()
    cluster.shutdown()


def test_an_evict_event_a_failed_session_never_told_is_not_paired_with_a_later_one(
    api: FakeApi,
) -> None:
    """The session evicted 'first' (refused) and failed before recording its events; the
    next session's Evict event on the group is about 'second', whose eviction worked."""
    group = {
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 1},
    }
    state = world(group, pod("first", "n1", group="g"), pod("second", "n1", group="g"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    api.answers[("DELETE", "/pods/first")] = ApiError(500, "etcd timed out")
    cluster.evict(task(state, "first"), "preempted", "kbatch: preempting")
    cluster.flush()  # the session ends without its events
    second = task(state, "second")
    cluster.evict(second, "preempted", "kbatch: preempting")
    message = f"Evicted {second.key}: preempted"
    cluster.record(ObjectRef("PodGroup", "default", "g"), "Normal", "Evict", message)
    cluster.flush()
    wait_for("both evictions tried", lambda: len(api.paths("DELETE")) == 2)
    cluster.shutdown()
    told = [e["reason"] for e in api.events() if e["involvedObject"]["kind"] == "PodGroup"]
    assert told == ["Evict"]


@pytest.mark.parametrize(("watched", "assumed"), [(None, True), ("n1", True), ("n2", False)])
def test_a_409_on_a_bind_is_checked_against_the_pod(
    api: FakeApi, watched: str | None, assumed: bool
) -> None:
    """The pod has a node already: this very bind's (an answer lost, a dying leader's same
    decision) unless the watch shows another one. No failure event either way."""
    state = world(pod("a"))
    state.apply(node("n2"))
    if watched is not None:
        state.apply(pod("a", watched))
    api.answers[("POST", "/pods/a/binding")] = ApiError(409, "pod a is already assigned")
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    cluster.bind(task(state, "a"), "n1")
    cluster.flush()
    wait_for("the bind answered", lambda: not cluster.binds_in_flight())
    cluster.shutdown()
    snapshot = state.snapshot()
    (placed,) = [t for job in snapshot.jobs.values() for t in job.tasks.values()]
    assert snapshot.nodes.names[placed.node] == ("n1" if assumed else "n2")
    assert [e for e in api.events() if e["reason"] == "FailedScheduling"] == []


def test_a_409_on_a_gated_pod_s_bind_is_a_failure_not_a_bind(api: FakeApi) -> None:
    """The API server refuses to bind a pod that still has scheduling gates, with a 409
    too: the pod is not taken for bound (which would hold its room for good), and an
    event says why."""
    state = world(pod("a"))
    message = (
        "Operation cannot be fulfilled on pods/binding: pod a has non-empty .spec.schedulingGates"
    )
    api.answers[("POST", "/pods/a/binding")] = ApiError(409, message)
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    cluster.bind(task(state, "a"), "n1")
    cluster.flush()
    wait_for("the bind answered", lambda: not cluster.binds_in_flight())
    cluster.shutdown()
    (placed,) = [t for job in state.snapshot().jobs.values() for t in job.tasks.values()]
    assert placed.status is TaskStatus.PENDING
    failed = [e["message"] for e in api.events() if e["reason"] == "FailedScheduling"]
    assert len(failed) == 1 and "schedulingGates" in failed[0]


def test_a_pod_condition_is_not_written_once_the_pod_is_bound(api: FakeApi) -> None:
    """A PodScheduled condition waits in the writer's queue (behind a burst's statuses):
    written if the pod still waits for a node then, not if a later session bound it (the
    API server's PodScheduled True stands), nor if the pod is gone."""
    state = world(pod("a"), pod("b"), pod("c"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    held = threading.Event()
    cluster.status.writes.submit(held.wait, 10)  # the writer busy, as behind a burst
    for name in ("a", "b", "c"):
        cluster.update_pod_condition(
            decided.PodCondition(task(state, name), "False", "Unschedulable", "no room")
        )
    cluster.bind(task(state, "b"), "n1")  # a later session binds b meanwhile
    state.delete("Pod", "default", "c")
    held.set()
    cluster.flush()
    wait_for("the bind sent", lambda: not cluster.binds_in_flight())
    cluster.shutdown()
    assert api.paths("PATCH") == ["/api/v1/namespaces/default/pods/a/status"]
