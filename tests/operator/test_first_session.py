"""What a restart with a backlog does before its first session: the loop runs it as soon
as the caches are synced (not a period later), and a PodGroup seen without a phase gets
``Pending`` only once that session has ended, and only if the session wrote no status
of its own for it (nor did anything else change it since)."""

import threading
import time
from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.api.podgroup import PodGroupPhase, PodGroupStatus
from kbatch.cluster.state import ClusterState
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core.framework.outcome import Outcome, PodGroupUpdate
from kbatch.operators.scheduler.core.framework.podgroup_status import INITIAL_STATUS
from kbatch.operators.scheduler.runtime.kube_backend import KubeBackend
from kbatch.operators.scheduler.runtime.loop import ConfSource, SchedulerLoop

PATH = "/apis/scheduling.incubator.k8s.io/v1alpha1/namespaces/default/podgroups/{}/status"


class Recorder:
    """Every request sent; ``refuse`` maps a path to the ApiError it answers."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, Any, str]] = []
        self.refuse: dict[str, kubeapi.ApiError] = {}
        self.lock = threading.Lock()

    def __call__(
        self, _api: Any, method: str, path: str, body: Any = None, content_type: str = ""
    ) -> Any:
        with self.lock:
            self.sent.append((method, path, body, content_type))
        if path in self.refuse:
            raise self.refuse[path]
        return {}

    def patches(self) -> list[tuple[str, Any, str]]:
        with self.lock:
            return [(p, b, c) for m, p, b, c in self.sent if m == "PATCH"]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(kubeapi.client, "request", recorder)
    return recorder


def settled(cluster: KubeBackend) -> None:
    cluster.shutdown()  # waits for the writer's queue


def test_the_initial_status_waits_for_the_next_session(api: Recorder) -> None:
    cluster = KubeBackend(None, ClusterState())  # type: ignore[arg-type]
    cluster.initialise_pod_group_status("default", "g", "41")
    time.sleep(0.1)
    assert api.patches() == [], "nothing before a session has ended"
    cluster.apply(Outcome())
    settled(cluster)
    patch = {"status": INITIAL_STATUS, "metadata": {"resourceVersion": "41"}}
    assert api.patches() == [(PATH.format("g"), patch, kubeapi.MERGE_PATCH)]
    assert INITIAL_STATUS["phase"] == "Pending"


def test_a_session_that_writes_the_status_makes_the_initial_one_needless(
    api: Recorder,
) -> None:
    cluster = KubeBackend(None, ClusterState())  # type: ignore[arg-type]
    cluster.initialise_pod_group_status("default", "g", "41")
    cluster.initialise_pod_group_status("default", "h", "42")
    decided = PodGroupStatus(phase=PodGroupPhase.INQUEUE)
    cluster.apply(Outcome(pod_groups=[PodGroupUpdate("default", "g", decided)]))
    settled(cluster)
    written = {path: (body, kind) for path, body, kind in api.patches()}
    assert set(written) == {PATH.format("g"), PATH.format("h")}
    assert written[PATH.format("g")][1] == kubeapi.JSON_PATCH, "g: the session's status only"
    assert written[PATH.format("g")][0][0]["value"]["phase"] == "Inqueue"
    assert written[PATH.format("h")][0]["status"] == INITIAL_STATUS
    cluster = KubeBackend(None, ClusterState())  # type: ignore[arg-type]
    cluster.apply(Outcome())
    settled(cluster)
    assert len(api.patches()) == 2, "each is written once: the next session writes none"


def test_a_group_changed_since_keeps_its_status(
    api: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    """A 409: the group is no longer at the version seen without a phase (a status was
    written meanwhile); no Pending over it, and no failure either."""
    api.refuse[PATH.format("g")] = kubeapi.ApiError(409, "the object has been modified")
    cluster = KubeBackend(None, ClusterState())  # type: ignore[arg-type]
    cluster.initialise_pod_group_status("default", "g", "41")
    cluster.apply(Outcome())
    settled(cluster)
    assert len(api.patches()) == 1
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]


def test_no_initial_status_once_the_lead_is_lost(api: Recorder) -> None:
    cluster = KubeBackend(None, ClusterState(), may_write=lambda: False)  # type: ignore[arg-type]
    cluster.initialise_pod_group_status("default", "g", "41")
    cluster.apply(Outcome())
    settled(cluster)
    assert api.patches() == []


class CountingLoop(SchedulerLoop):
    def __init__(self, may_schedule: Any) -> None:
        super().__init__(
            cluster=None,  # type: ignore[arg-type]  # run_once is counted, not run
            conf=ConfSource(None),
            period=60.0,
            metrics=SchedulerMetrics(),
            may_schedule=may_schedule,
        )
        self.ran = threading.Event()

    def run_once(self) -> None:
        self.ran.set()


def test_woken_the_loop_runs_its_first_session_without_waiting_a_period() -> None:
    synced = threading.Event()
    loop = CountingLoop(synced.is_set)
    loop.start()
    try:
        time.sleep(0.1)  # the loop found nothing to do: it waits its 60 s period
        synced.set()
        assert not loop.ran.wait(0.2), "not before it is woken"
        loop.wake()
        assert loop.ran.wait(5), "woken, it runs the session at once"
    finally:
        loop.stop()
