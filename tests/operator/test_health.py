"""/healthz and /readyz answer from the live state: liveness until the loop dies,
readiness only while alive and synced."""

import json
import urllib.error
import urllib.request

import pytest

from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.runtime.health import HealthServer
from kbatch.operators.scheduler.runtime.loop import ConfSource, SchedulerLoop


def get(port: int, path: str = "/healthz") -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}") if error.code == 503 else {}


def test_health_reports_the_current_state() -> None:
    state = {"alive": True, "ready": False, "leader": False}

    def report() -> tuple[bool, bool, dict]:
        return state["alive"], state["ready"], {"leader": state["leader"], "sessions": 3}

    server = HealthServer("127.0.0.1:0", report)
    server.start()
    try:
        assert get(server.port) == (200, {"leader": False, "sessions": 3})
        assert get(server.port, "/readyz") == (503, {"leader": False, "sessions": 3})
        state["ready"] = True
        assert get(server.port, "/readyz")[0] == 200
        state["leader"] = True
        assert get(server.port) == (200, {"leader": True, "sessions": 3})  # at once, no cache
        state["alive"] = False
        assert get(server.port)[0] == 503
        assert get(server.port, "/readyz")[0] == 503, "a dead loop is not ready either"
        assert get(server.port, "/elsewhere")[0] == 404
    finally:
        server.stop()


def test_a_loop_is_alive_before_it_starts_and_dead_once_stopped() -> None:
    """kbatch run serves /healthz before its loop thread starts: that moment is not a death
    (a liveness probe, or a test, asking then must not see 503)."""
    loop = SchedulerLoop(
        cluster=None,  # type: ignore[arg-type]  # never runs a session: may_schedule is False
        conf=ConfSource(None),
        period=0.01,
        metrics=SchedulerMetrics(),
        may_schedule=lambda: False,
    )
    assert loop.alive()
    loop.start()
    assert loop.alive()
    loop.stop()
    assert not loop.alive()


def test_a_busy_port_is_an_error_not_a_silent_failure() -> None:
    first = HealthServer("127.0.0.1:0", lambda: (True, True, {}))
    try:
        with pytest.raises(OSError):
            HealthServer(f"127.0.0.1:{first.port}", lambda: (True, True, {}))
    finally:
        first.server.server_close()
