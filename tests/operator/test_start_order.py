"""``kbatch run`` starts its runtime (watches, loop) first and kopf only once the first
session has ended: kopf's own start (listing and handling every PodGroup) must not
compete with the first session of a restart on a large backlog, nor its loading (nor
that of the controllers and webhooks) with the parsing of the lists before it."""

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import kopf
import pytest

from kbatch import kubeapi
from kbatch.operators import process
from kbatch.operators.process import RunSettings, Runtime


def runtime(monkeypatch: pytest.MonkeyPatch, leader_elect: bool = False) -> Runtime:
    monkeypatch.setattr(kubeapi.client, "api_client", lambda _: None)
    settings = RunSettings(metrics_address=None, health_address=None, leader_elect=leader_elect)
    made = Runtime(settings)
    made.informers = []  # synced: nothing to wait for
    return made


def test_kopf_waits_for_the_first_session_to_end(monkeypatch: pytest.MonkeyPatch) -> None:
    made = runtime(monkeypatch)
    threading.Timer(0.3, made.loop.first_session.set).start()
    started = time.monotonic()
    made.wait_before_kopf(10)
    assert 0.25 < time.monotonic() - started < 5


def test_kopf_waits_at_most_the_time_given(monkeypatch: pytest.MonkeyPatch) -> None:
    made = runtime(monkeypatch)
    made.informers = [type("Unsynced", (), {"synced": threading.Event()})()]  # type: ignore[list-item]
    started = time.monotonic()
    made.wait_before_kopf(0.3)
    assert 0.25 < time.monotonic() - started < 5
    assert not made.loop.first_session.is_set()


def test_a_replica_that_does_not_lead_starts_kopf_once_synced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = runtime(monkeypatch, leader_elect=True)  # (its elector is not started: no lead)
    started = time.monotonic()
    made.wait_before_kopf(10)
    assert time.monotonic() - started < 1


def test_run_starts_the_runtime_then_kopf_and_stops_the_runtime_at_the_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kubeapi.client, "api_client", lambda _: None)
    order: list[str] = []

    def recorded(name: str) -> Any:
        return lambda *_, **__: order.append(name)

    monkeypatch.setattr(Runtime, "start", recorded("start"))
    monkeypatch.setattr(Runtime, "wait_before_kopf", recorded("wait"))
    monkeypatch.setattr(Runtime, "stop", recorded("stop"))
    monkeypatch.setattr(kopf, "run", recorded("kopf"))
    process.run(RunSettings(metrics_address=None, health_address=None, leader_elect=False))
    assert order == ["start", "wait", "kopf", "stop"]


def test_the_loop_marks_its_first_session_even_a_failed_one() -> None:
    from kbatch.metrics import SchedulerMetrics
    from kbatch.operators.scheduler.runtime.loop import ConfSource, SchedulerLoop

    class Broken:
        def snapshot(self) -> Any:
            raise RuntimeError("no snapshot")

    loop = SchedulerLoop(Broken(), ConfSource(None), 1.0, SchedulerMetrics(), lambda: True)  # type: ignore[arg-type]
    assert not loop.first_session.is_set()
    loop.period_once()
    assert loop.first_session.is_set()


# Imports the process module and makes a runtime in a fresh interpreter, then prints
# which of these it loaded; then builds kopf's registry and prints them again.
PROBE = """
import sys
from kbatch import kubeapi
from kbatch.operators import process
kubeapi.api_client = lambda _: None
settings = process.RunSettings(metrics_address=None, health_address=None, leader_elect=False)
runtime = process.Runtime(settings)
names = ("kopf", "aiohttp", "kbatch.webhooks.server", "kbatch.operators.jobs.controller",
         "kbatch.operators.podgroup.controller")
print(sorted(n for n in names if n in sys.modules))
process.build_registry(runtime)
print(sorted(n for n in names if n in sys.modules))
"""


def test_kopf_and_the_controllers_load_only_with_the_registry(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=tmp_path,  # the installed package, not the checkout's kbatch/ beside operators/
    )
    before, after = done.stdout.splitlines()
    assert before == "[]", "the runtime loads no kopf, controller or webhook"
    assert "'kopf'" in after and "'kbatch.operators.jobs.controller'" in after
