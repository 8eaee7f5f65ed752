"""/healthz answers from the live state: 200 while alive, 503 once the loop died."""

import json
import urllib.error
import urllib.request

import pytest

from kbatch.operators.scheduler.health import HealthServer


def get(port: int, path: str = "/healthz") -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}") if error.code == 503 else {}


def test_health_reports_the_current_state() -> None:
    state = {"alive": True, "leader": False}
    server = HealthServer(
        "127.0.0.1:0", lambda: (state["alive"], {"leader": state["leader"], "sessions": 3})
    )
    server.start()
    try:
        assert get(server.port) == (200, {"leader": False, "sessions": 3})
        state["leader"] = True
        assert get(server.port) == (200, {"leader": True, "sessions": 3})  # at once, no cache
        state["alive"] = False
        assert get(server.port)[0] == 503
        assert get(server.port, "/elsewhere")[0] == 404
    finally:
        server.stop()


def test_a_busy_port_is_an_error_not_a_silent_failure() -> None:
    first = HealthServer("127.0.0.1:0", lambda: (True, {}))
    try:
        with pytest.raises(OSError):
            HealthServer(f"127.0.0.1:{first.port}", lambda: (True, {}))
    finally:
        first.server.server_close()
