"""An API server outage, against a scripted API and an injected clock: a bind that got no
answer is not sent again before its back-off (1 s doubling to 30 s), is sent again after
it, or as soon as the server answers again; the log tells the outage once per interval,
not once per request; the informers list again within a second of the server's return."""

import http.server
import itertools
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.runtime import outage
from kbatch.operators.scheduler.runtime.informer import RESOURCES, Informer
from kbatch.operators.scheduler.runtime.kube_backend import KubeBackend


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class OutageApi:
    """Answers every request with {} while up; raises Unreachable while down. Records the
    binds sent, with the clock's time."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.down = True
        self.binds: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    def __call__(self, _api: Any, method: str, path: str, *_: Any) -> dict[str, Any]:
        if path.endswith("/binding"):
            with self.lock:
                self.binds.append((self.clock(), path.split("/")[-2]))
        if self.down:
            raise kubeapi.Unreachable(f"{method} {path}: [Errno 111] Connection refused")
        return {}

    def bind_times(self, pod: str) -> list[float]:
        with self.lock:
            return [at - 1000.0 for at, name in self.binds if name == pod]


def pod(name: str) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"schedulerName": "kbatch", "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch, clock: Clock) -> OutageApi:
    fake = OutageApi(clock)
    monkeypatch.setattr(kubeapi.client, "request", fake)
    return fake


def cluster_of(clock: Clock, pods: int) -> tuple[KubeBackend, ClusterState]:
    state = ClusterState(clock=clock)
    state.apply({"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {}}})
    for i in range(pods):
        state.apply(pod(f"p{i}"))
    return KubeBackend(None, state, clock=clock), state  # type: ignore[arg-type]


def session(cluster: KubeBackend) -> int:
    """What a session does with the pods the snapshot offers as pending: bind them all
    (the core's choice of node does not matter here). How many it bound."""
    pending = [
        task
        for job in cluster.snapshot().jobs.values()
        for task in job.tasks.values()
        if task.status is TaskStatus.PENDING
    ]
    for task in pending:
        cluster.bind(task, "n1")
    cluster.flush()
    deadline = time.monotonic() + 10
    while cluster.binds_in_flight():
        assert time.monotonic() < deadline, "binds done"
        time.sleep(0.005)
    return len(pending)


def sessions(cluster: KubeBackend, clock: Clock, until: float, period: float = 0.5) -> None:
    while clock.now - 1000.0 < until:
        session(cluster)
        clock.now += period


def test_backoff_doubles_to_its_bound_and_a_success_starts_it_again() -> None:
    backoff = outage.Backoff(first=1.0, most=30.0)
    key = ("default", "a", "uid-a")
    assert [backoff.failed(key) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    backoff.succeeded(key)
    assert backoff.failed(key) == 1
    assert backoff.failing() == [key]


def test_a_bind_with_no_answer_is_sent_again_only_after_its_backoff(
    api: OutageApi, clock: Clock
) -> None:
    cluster, state = cluster_of(clock, 1)
    sessions(cluster, clock, until=20.0)  # a session every half second, the server down
    # 1 s, then 2, 4, 8 s between tries; never once a session
    assert api.bind_times("p0") == [0.0, 1.0, 3.0, 7.0, 15.0]
    assert not state.has_work(), "a held pod is nothing to do for the loop"
    api.down = False
    clock.now = 1000.0 + 31.0  # its 16 s back-off is over
    assert session(cluster) == 1
    assert api.bind_times("p0")[-1] == 31.0
    cluster.shutdown()


def test_the_backoff_is_at_most_30_seconds(api: OutageApi, clock: Clock) -> None:
    cluster, _ = cluster_of(clock, 1)
    sessions(cluster, clock, until=200.0, period=1.0)
    times = api.bind_times("p0")
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[:5] == [1, 2, 4, 8, 16]
    assert set(gaps[5:]) == {30}
    cluster.shutdown()


def test_the_hold_ends_once_the_server_answers_again(api: OutageApi, clock: Clock) -> None:
    cluster, state = cluster_of(clock, 3)
    for _ in range(4):  # tries at 0, 1, 3 s: the back-off is 4 s now
        session(cluster)
        clock.now += 1.5
    assert len(api.binds) == 9
    api.down = False
    assert session(cluster) == 0, "not before its back-off, while nothing answered"
    cluster.exchanges.answer(cluster.exchanges.send())  # e.g. an informer listed again
    assert session(cluster) == 3, "once the server answers, the session binds them again"
    assert not state.has_work()
    cluster.shutdown()


def test_only_an_answer_to_the_same_client_ends_a_hold(api: OutageApi, clock: Clock) -> None:
    """Another client's answers (another API server, or a thread a test left running)
    say nothing of this one's server: its held pods stay held for their back-off."""
    cluster, _ = cluster_of(clock, 3)
    session(cluster)
    assert len(api.binds) == 3
    api.down = False
    other = kubeapi.Client(kubeapi.Configuration())
    other.exchanges.answer(other.exchanges.send())
    clock.now += 0.5  # within the 1 s back-off
    assert session(cluster) == 0, "still held: nothing this client sent was answered"
    cluster.exchanges.answer(cluster.exchanges.send())
    assert session(cluster) == 3
    cluster.shutdown()
    api_client = kubeapi.client_for("http://127.0.0.1:1")
    live = KubeBackend(api_client, ClusterState())
    assert live.exchanges is api_client.exchanges, "the holds read what its requests count"
    live.shutdown()


def test_an_outage_of_many_sessions_is_told_once_per_interval(
    api: OutageApi, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    cluster, _ = cluster_of(clock, 100)
    caplog.set_level(logging.DEBUG, logger="kbatch")
    sessions(cluster, clock, until=120.0, period=1.0)
    api.down = False
    cluster.exchanges.answer(cluster.exchanges.send())
    assert session(cluster) == 100
    cluster.shutdown()
    told = [r for r in caplog.records if r.levelno >= logging.INFO]
    warnings = [r.getMessage() for r in told if r.levelno == logging.WARNING]
    # 100 pods tried at 0, 1, 3, 7, 15, 31, 61, 91 s: 800 binds with no answer, told at
    # most once per 10 s (here at each round of tries but the first few: 5 warnings)
    assert len(api.binds) == 900
    assert 2 <= len(warnings) <= 13, warnings
    assert all("binds waiting, retrying with back-off" in w for w in warnings)
    assert "API server unreachable" in warnings[0] and "100 binds waiting" in warnings[0]
    assert "more since the last report" in warnings[-1]
    infos = [r.getMessage() for r in told if r.levelno == logging.INFO]
    assert len(infos) == 1
    assert infos[0].startswith("the API server answers binds again (after 120s of failures")


def test_failures_are_told_once_per_interval() -> None:
    clock = Clock()
    logger = logging.getLogger("kbatch.test.outage")
    report = outage.FailureReport(logger, every=10.0, clock=clock)
    told: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: told.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        for _ in range(25):  # one failure a second for 25 s
            report.failed("watch", "watch failed")
            clock.now += 1.0
        report.succeeded("watch", "watch listed again")
        report.succeeded("watch", "watch listed again")  # told once
    finally:
        logger.removeHandler(handler)
    assert told == [
        "watch failed",
        "watch failed (9 more since the last report)",
        "watch failed (9 more since the last report)",
        "watch listed again (after 25s of failures, 4 not told)",
    ]


# ----------------------------------------------------------------------------- informers
PODS = next(r for r in RESOURCES if r.kind == "Pod")


class Response:
    """A list's body, or a watch that streams nothing and then drops."""

    def __init__(self, body: dict[str, Any] | None = None) -> None:
        self.data = json.dumps(body or {}).encode()

    def stream(self, _size: int) -> Iterator[bytes]:
        raise ConnectionError("connection reset by peer")
        yield b""

    def release_conn(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


class FlakyServer:
    """Down (every GET refused) until ``up`` is set; then lists answer."""

    def __init__(self) -> None:
        self.up = threading.Event()
        self.came_back = 0.0
        self.listed = threading.Event()
        self.listed_at = 0.0
        self.tries: list[float] = []

    def get(self, _api: object, _path: str, query: dict[str, str], _timeout: object) -> Response:
        self.tries.append(time.monotonic())
        if not self.up.is_set():
            raise kubeapi.Unreachable("GET /api/v1/pods: [Errno 111] Connection refused")
        if "watch" not in query and not self.listed.is_set():
            self.listed_at = time.monotonic()
            self.listed.set()
        if "watch" in query:
            threading.Event().wait(0.5)  # an idle watch, until it drops
        return Response({"metadata": {"resourceVersion": "1"}, "items": []})


def test_the_informer_lists_again_within_a_second_or_two_of_the_servers_return(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    server = FlakyServer()
    monkeypatch.setattr(kubeapi.client, "raw_get", server.get)
    caplog.set_level(logging.INFO, logger="kbatch.informer")
    informer = Informer(object(), PODS, ClusterState())  # type: ignore[arg-type]
    informer.start()
    time.sleep(3.0)  # down long enough for the back-off to reach its bound
    server.came_back = time.monotonic()
    server.up.set()
    assert server.listed.wait(10)

    def told() -> bool:
        return any("watch of Pod: listed again" in r.getMessage() for r in caplog.records)

    deadline = time.monotonic() + 5
    while not told() and time.monotonic() < deadline:  # logged just after the list returns
        time.sleep(0.05)
    informer.stop()
    assert server.listed_at - server.came_back < 2.0, "listed again within 2 s"
    tries = [t for t in server.tries if t < server.came_back]
    gaps = [b - a for a, b in itertools.pairwise(tries)]
    assert 4 <= len(tries) <= 8, "0.25 s, 0.5 s, then a try a second: no hammering"
    assert max(gaps) < 1.5
    failed = [r for r in caplog.records if "watch of Pod failed" in r.getMessage()]
    assert len(failed) == 1, "one warning per interval, not one per try"
    assert told()


# ----------------------------------------------------------------------------- the client
def test_a_refused_connection_is_unreachable_at_once_without_retry_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    api = kubeapi.client_for(f"http://127.0.0.1:{port}")
    caplog.set_level(logging.DEBUG)
    sent, answered = api.exchanges.sent, api.exchanges.answered
    for _ in range(5):
        with pytest.raises(kubeapi.Unreachable):
            kubeapi.request(api, "POST", "/api/v1/namespaces/default/pods/a/binding", {})
    assert api.exchanges.sent == sent + 5
    assert api.exchanges.answered == answered
    assert not [r for r in caplog.records if "Retrying" in r.getMessage()]


def test_an_answer_of_any_status_tells_the_server_is_back() -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"kind": "Status", "message": "nope"}'
            self.send_response(503)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        api = kubeapi.client_for(f"http://127.0.0.1:{server.server_address[1]}")
        failed_at = api.exchanges.sent
        assert not api.exchanges.answered_since(failed_at)
        with pytest.raises(kubeapi.ApiError) as refused:
            kubeapi.request(api, "GET", "/api/v1/nodes")
        assert refused.value.status == 503
        assert api.exchanges.answered_since(failed_at)
    finally:
        server.shutdown()
        server.server_close()
