"""Fixtures for the e2e tests: one control plane per session, or a skip saying why.

``control_plane`` yields a :class:`e2e.controlplane.Cluster`: ``.kubeconfig`` is
the path of a kubeconfig for the cluster, ``.api_client()`` makes a
``kubernetes.client.ApiClient``. ``api_client`` is a per-test client, closed after.

On top of it, for the whole session: ``crds`` (installed once, Established),
``kubelet`` (e2e.kubelet.Kubelet on a thread), ``kbatch_runs`` (starts
``kbatch run`` subprocesses, each logging to a file; all stopped at the end) and
``cluster_backend`` (e2e.cluster_backend.ClusterBackend over one ``kbatch run``
that leader-elects on Lease default/kbatch, which the backend holds between
scenarios). A failing test's report carries the tail of every ``kbatch run``
log, and the path of the whole log.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import pytest
import yaml

from e2e import smoke
from e2e.cluster_backend import ClusterBackend, Scheduler, poll
from e2e.controlplane import Cluster, Unavailable, _die_with_parent, discover, free_ports, tail
from e2e.kubelet import Kubelet
from kbatch.config import DEFAULT_CONF
from kbatch.kubeapi import ApiError, request

REPO = Path(__file__).resolve().parents[2]
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
KBATCH = Path(sys.executable).with_name("kbatch")
START_TIMEOUT = 60.0
LOG_LINES = 60


@pytest.fixture(scope="session")
def control_plane() -> Iterator[Cluster]:
    try:
        source = discover()
    except Unavailable as why:
        pytest.skip(f"e2e: no control plane: {why}")
    if isinstance(source, Cluster):
        yield source
        return
    with source as cluster:
        yield cluster


@pytest.fixture
def api_client(control_plane: Cluster) -> Iterator[Any]:
    with control_plane.api_client() as client:
        yield client


@pytest.fixture(scope="session")
def session_api(control_plane: Cluster) -> Iterator[Any]:
    """One client for the session's helpers, with room for their concurrent calls."""
    with control_plane.api_client() as client:
        client.configuration.connection_pool_maxsize = 32
        client.rest_client.pool_manager.connection_pool_kw["maxsize"] = 32
        yield client


# ----------------------------------------------------------------------------- CRDs
@pytest.fixture(scope="session")
def crds(session_api: Any) -> None:
    """The CRDs of crds/, created (or replaced by this checkout's) and Established."""
    names = []
    for path in sorted((REPO / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        name = crd["metadata"]["name"]
        names.append(name)
        try:
            request(session_api, "POST", CRD_PATH, crd)
        except ApiError as exc:
            if exc.status != 409:
                raise
            current = request(session_api, "GET", f"{CRD_PATH}/{name}")
            crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            request(session_api, "PUT", f"{CRD_PATH}/{name}", crd)

    def established() -> bool:
        for name in names:
            conditions = request(session_api, "GET", f"{CRD_PATH}/{name}")["status"]
            if not any(
                c["type"] == "Established" and c["status"] == "True"
                for c in conditions.get("conditions") or []
            ):
                return False
        return True

    poll("the CRDs established", established, 30)


# ----------------------------------------------------------------------------- kubelet
@pytest.fixture(scope="session")
def kubelet(session_api: Any) -> Iterator[Kubelet]:
    with Kubelet(session_api) as running:
        yield running


# ----------------------------------------------------------------------------- kbatch run
@dataclass
class KbatchRun:
    """One ``kbatch run`` subprocess; its output goes to ``log``."""

    name: str
    argv: list[str]
    log: Path
    metrics_port: int
    health_port: int
    popen: subprocess.Popen[bytes] | None = None
    stopped_at: float | None = None  # time.monotonic()
    _handle: IO[bytes] | None = field(default=None, repr=False)

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.health_port}/healthz"

    def start(self) -> KbatchRun:
        self._handle = self.log.open("ab")
        self._handle.write(f"$ {' '.join(self.argv)}\n".encode())
        self._handle.flush()
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._handle,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not self._answers(self.metrics_url):
            if self.popen.poll() is not None:
                raise RuntimeError(f"kbatch run {self.name} exited:\n{tail(self.log)}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"kbatch run {self.name} not serving /metrics:\n{tail(self.log)}"
                )
            time.sleep(0.1)
        return self

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def health(self) -> dict[str, Any]:
        """GET /healthz: {"leader": bool, "synced": bool, "sessions": int}."""
        with urllib.request.urlopen(self.health_url, timeout=5) as response:
            return dict(json.loads(response.read()))

    def kill(self) -> None:
        """SIGKILL: no clean-up, the lease is not given back."""
        if self.alive:
            assert self.popen is not None
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(10)
            self.stopped_at = time.monotonic()

    def stop(self) -> None:
        if self.alive:
            assert self.popen is not None
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
            self.stopped_at = time.monotonic()
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    @staticmethod
    def _answers(url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                response.read()
                return True
        except (OSError, urllib.error.URLError):
            return False


STARTED: list[KbatchRun] = []  # every kbatch run of the session, for failure reports


@dataclass
class KbatchRuns:
    """Starts ``kbatch run`` against the control plane."""

    kubeconfig: Path
    logs: Path

    def start(
        self,
        name: str,
        *,
        conf: Path | None = None,
        scheduler_names: tuple[str, ...] = (),
        leader_elect: bool = True,
        lock_namespace: str = "default",
        lease_duration: str = "5s",
        period: str = "1s",
        extra: tuple[str, ...] = (),
    ) -> KbatchRun:
        """``extra``: more flags of ``kbatch run``."""
        metrics_port, health_port = free_ports(2)
        argv = [
            str(KBATCH),
            "run",
            "--kubeconfig",
            str(self.kubeconfig),
            "--schedule-period",
            period,
            "--metrics-address",
            f"127.0.0.1:{metrics_port}",
            "--health-address",
            f"127.0.0.1:{health_port}",
            "--leader-elect" if leader_elect else "--no-leader-elect",
            "--lock-namespace",
            lock_namespace,
            "--lease-duration",
            lease_duration,
        ]
        if conf is not None:
            argv += ["--scheduler-conf", str(conf)]
        for scheduler_name in scheduler_names:
            argv += ["--scheduler-name", scheduler_name]
        argv += extra
        run = KbatchRun(name, argv, self.logs / f"kbatch-run-{name}.log", metrics_port, health_port)
        STARTED.append(run)
        return run.start()

    def stop_all(self) -> None:
        for run in STARTED:
            run.stop()


@pytest.fixture(scope="session")
def kbatch_runs(
    control_plane: Cluster, crds: None, kubelet: Kubelet, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[KbatchRuns]:
    runs = KbatchRuns(control_plane.kubeconfig, tmp_path_factory.mktemp("kbatch-run"))
    try:
        yield runs
    finally:
        runs.stop_all()


@pytest.fixture(scope="session")
def cluster_backend(
    session_api: Any, kbatch_runs: KbatchRuns, tmp_path_factory: pytest.TempPathFactory
) -> ClusterBackend:
    """The scenario backend over a ``kbatch run`` that schedules only inside scenarios."""
    conf = tmp_path_factory.mktemp("scheduler-conf") / "kbatch-conf.yaml"
    conf.write_text(DEFAULT_CONF, encoding="utf-8")
    lease = Scheduler(metrics_url="", conf_path=conf, period=1.0, lock_namespace="default")
    backend = ClusterBackend(session_api, lease)
    backend.take_lease()  # before it starts: it never leads outside a scenario
    # no ETA publisher: the scenarios compare PodGroup conditions with the simulator's
    run = kbatch_runs.start(
        "scenarios", conf=conf, lock_namespace="default", extra=("--eta-interval", "0")
    )
    backend.scheduler = Scheduler(run.metrics_url, conf, 1.0, "default", health_url=run.health_url)
    backend.hold()
    return backend


# ----------------------------------------------------------------------------- smoke set
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests CI also runs on the oldest Kubernetes get the ``smoke`` marker."""
    smoke.mark(items)


# ----------------------------------------------------------------------------- reports
TEST_STARTED = pytest.StashKey[float]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    item.stash[TEST_STARTED] = time.monotonic()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test's report shows the logs of the kbatch runs it saw."""
    report = yield
    if report.failed:
        began = item.stash.get(TEST_STARTED, 0.0)
        for run in STARTED:
            if run.stopped_at is not None and run.stopped_at < began:
                continue
            with contextlib.suppress(OSError):
                text = tail(run.log, LOG_LINES)
                state = "running" if run.alive else "stopped"
                report.sections.append(
                    (f"kbatch run {run.name} ({state}; whole log: {run.log})", text)
                )
    return report


@pytest.fixture
def corner(session_api: Any, crds: None, kubelet: Kubelet) -> Iterator[Any]:
    """A test's own namespace, nodes and scheduler name (``e2e.test_ha.Corner``),
    removed after."""
    from e2e.test_ha import Corner

    made = Corner(session_api).start()
    try:
        yield made
    finally:
        made.close()
