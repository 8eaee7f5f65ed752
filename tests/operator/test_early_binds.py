"""The first session's first binds go as its statements commit, not at its end: each
statement's binds all together (a gang whole), the first ``early`` or so only (the rest
wait for the end, so that the bind workers do not compete with the session), and none
bound twice when the session's outcome, which lists them too, is applied. Later
sessions send all theirs at their end."""

import itertools
import threading
import time
from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.interface import Outcome
from kbatch.operators.scheduler.runtime.kube_backend import KubeBackend

GANGS, SIZE = 3, 2


class GatedApi:
    """Holds every bind until ``gate`` is set; counts those that reached it."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.lock = threading.Lock()
        self.reached: list[str] = []

    def __call__(self, _api: Any, method: str, path: str, body: Any = None, *_: Any) -> Any:
        if path.endswith("/binding"):
            with self.lock:
                self.reached.append(path.split("/")[-2])
            assert self.gate.wait(10)
        return {}

    def binds(self) -> list[str]:
        with self.lock:
            return list(self.reached)


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> GatedApi:
    fake = GatedApi()
    monkeypatch.setattr(kubeapi.client, "request", fake)
    return fake


def backlog() -> ClusterState:
    """One node with room for all; ``GANGS`` PodGroups of ``SIZE`` pending pods each."""
    state = ClusterState()
    state.apply({"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}})
    state.apply(
        {
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "64", "pods": "110"}},
        }
    )
    for g in range(GANGS):
        state.apply(
            {
                "kind": "PodGroup",
                "metadata": {"name": f"g{g}", "namespace": "default", "uid": f"uid-g{g}"},
                "spec": {"minMember": SIZE, "queue": "default"},
            }
        )
        for p in range(SIZE):
            name = f"g{g}-{p}"
            state.apply(
                {
                    "kind": "Pod",
                    "metadata": {
                        "name": name,
                        "namespace": "default",
                        "uid": f"uid-{name}",
                        "annotations": {"scheduling.k8s.io/group-name": f"g{g}"},
                    },
                    "spec": {
                        "schedulerName": "kbatch",
                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                    },
                    "status": {"phase": "Pending"},
                }
            )
    return state


def wait_for(what: str, done: Any) -> None:
    deadline = time.monotonic() + 10
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


class Watched(KubeBackend):
    """Notes which binds had reached the API server when the session's outcome came."""

    def __init__(self, state: ClusterState, api: GatedApi, early: int) -> None:
        super().__init__(None, state, early_binds=early)  # type: ignore[arg-type]
        self.fake = api
        self.reached_before_apply: list[str] | None = None
        self.outcome_binds = 0

    def apply(self, outcome: Outcome) -> None:
        time.sleep(0.2)  # the workers' time to reach the API server with what was sent
        self.reached_before_apply = self.fake.binds()
        self.outcome_binds = len(outcome.binds)
        super().apply(outcome)


def one_session(api: GatedApi, early: int) -> Watched:
    cluster = Watched(backlog(), api, early)
    ids = (str(i) for i in itertools.count())
    runner.Scheduler(
        cluster,
        runner.default_conf(),
        lambda: 1000.0,
        lambda: next(ids),
        committed_binds=cluster.committed,
    ).run_once()
    api.gate.set()
    wait_for("every bind answered", lambda: not cluster.binds_in_flight())
    cluster.shutdown()
    return cluster


def gang_of(pod: str) -> str:
    return pod.rsplit("-", 1)[0]


def test_the_first_gang_is_sent_as_it_is_committed_the_rest_at_the_end(api: GatedApi) -> None:
    cluster = one_session(api, early=1)
    early = cluster.reached_before_apply
    assert early is not None and len(early) == SIZE, "the first statement's binds, whole"
    assert len({gang_of(pod) for pod in early}) == 1, "one gang, all of it"
    assert cluster.outcome_binds == GANGS * SIZE, "the outcome still lists every bind"
    sent = api.binds()
    assert sorted(sent) == sorted(f"g{g}-{p}" for g in range(GANGS) for p in range(SIZE))
    assert len(sent) == len(set(sent)), "none bound twice"


def test_without_early_binds_all_wait_for_the_end(api: GatedApi) -> None:
    cluster = one_session(api, early=0)
    assert cluster.reached_before_apply == []
    assert len(api.binds()) == GANGS * SIZE


def test_only_the_first_session_sends_early(api: GatedApi) -> None:
    """The budget is the first session's (a backlog at a start): a later session's
    binds all wait for its end, so that none competes with it. The binds taken as
    committed are the first of the outcome's, and ``apply`` sends only the others."""
    state = backlog()
    cluster = KubeBackend(None, state, early_binds=1)  # type: ignore[arg-type]
    tasks = [t for job in state.snapshot().jobs.values() for t in job.tasks.values()]
    binds = [decided.Bind(t, "n1") for t in sorted(tasks, key=lambda t: t.name)]
    cluster.committed(binds[0:2])
    cluster.committed(binds[2:4])
    wait_for("the first statement's binds sent", lambda: len(api.binds()) == 2)
    cluster.apply(Outcome(binds=binds[0:4]))
    wait_for("the rest sent at the end", lambda: len(api.binds()) == 4)
    cluster.committed(binds[4:6])
    time.sleep(0.2)  # the workers' time to reach the API server with what was sent
    assert len(api.binds()) == 4, "the next session's wait for its end"
    cluster.apply(Outcome(binds=binds[4:6]))
    wait_for("sent at the end", lambda: len(api.binds()) == 6)
    api.gate.set()
    wait_for("every bind answered", lambda: not cluster.binds_in_flight())
    cluster.shutdown()
    assert sorted(api.binds()) == sorted(b.task.name for b in binds), "each once"
