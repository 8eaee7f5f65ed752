"""The writes after the binds: an object's latest status only (not one per session while
binds are in flight), the PodGroups so decided are no work for the loop, and a stop that
drops a backlog after a bounded drain instead of waiting for it."""

import threading
import time
from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.api.podgroup import PodGroupPhase, PodGroupStatus
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.operators.scheduler.runtime import writer
from kbatch.operators.scheduler.runtime.kube_backend import KubeBackend
from tests.operator.test_kube import FakeApi, pod, task, wait_for, world


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    return FakeApi.installed(monkeypatch)


def group_status_writes(api: FakeApi) -> list[tuple[str, str]]:
    with api.lock:
        return [
            (path.split("/")[-2], body[0]["value"]["phase"])
            for method, path, body in api.sent
            if method == "PATCH" and "/podgroups/" in path
        ]


def test_statuses_queued_behind_binds_are_written_once_each_the_latest(api: FakeApi) -> None:
    state = world(pod("a"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    api.gate.clear()  # a bind in flight holds the statuses back
    cluster.bind(task(state, "a"), "n1")
    cluster.flush()
    wait_for("the bind under way", api.entered.is_set)
    for phase in (PodGroupPhase.PENDING, PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING):
        for name in ("g1", "g2"):  # one session after another, each deciding both groups
            cluster.update_pod_group("default", name, PodGroupStatus(phase=phase))
    assert cluster.groups_being_written() == {"default/g1", "default/g2"}
    api.gate.set()
    wait_for("both written", lambda: len(group_status_writes(api)) == 2)
    cluster.shutdown()
    assert group_status_writes(api) == [("g1", "Running"), ("g2", "Running")]
    assert cluster.groups_being_written() == frozenset()


def test_the_loop_has_no_work_for_groups_whose_status_is_on_its_way(api: FakeApi) -> None:
    group = {"kind": "PodGroup", "metadata": {"name": "g", "namespace": "default"}}
    state: ClusterState = world(group)
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    api.gate.clear()
    state.apply(pod("other"))
    cluster.bind(task(state, "other"), "n1")
    cluster.flush()
    assert state.has_work(cluster.groups_being_written()), "g waits for admission"
    cluster.update_pod_group("default", "g", PodGroupStatus(phase=PodGroupPhase.INQUEUE))
    assert not state.has_work(cluster.groups_being_written()), "decided; its write waits"
    api.gate.set()
    cluster.shutdown()


def test_a_stop_drops_a_backlog_of_events_after_a_bounded_drain(
    api: FakeApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer, "DRAIN_SECONDS", 0.3)
    state = world(pod("a"))
    cluster = KubeBackend(None, state)  # type: ignore[arg-type]
    slow = threading.Event()
    real = api.__call__

    def slow_events(*args: Any) -> Any:
        if args[2].endswith("/events"):
            slow.wait(0.05)  # 20 events a second: a backlog of 100 takes 5 s
        return real(*args)

    monkeypatch.setattr(kubeapi.client, "request", slow_events)
    for i in range(100):
        cluster.record(ObjectRef("Pod", "default", f"p{i}"), "Normal", "Told", "told")
    started = time.monotonic()
    cluster.shutdown()
    assert time.monotonic() - started < 2.0, "the stop waited for the whole backlog"
    sent = len(api.events())
    assert 0 < sent < 100
    assert cluster.events.writer.dropped == 100 - sent
