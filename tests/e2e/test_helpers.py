"""The e2e suite's own helpers, without a cluster: polling through a replica's 503s,
event times by session, the test kubelet retrying a refused write."""

import threading
import urllib.error
from typing import Any

import pytest

from e2e import kubelet as kubelet_module
from e2e.cluster_backend import event_time, poll
from e2e.kubelet import Kubelet
from kbatch.operators.scheduler.kube import ApiError, micro_time


def test_poll_waits_through_errors_and_reports_the_last_one() -> None:
    answers: list[Any] = [
        urllib.error.HTTPError("http://x/healthz", 503, "Service Unavailable", None, None),  # type: ignore[arg-type]
        ConnectionRefusedError("refused"),
        "ready",
    ]

    def probe() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert poll("a probe", probe, 5, 0.01) == "ready"

    def refused() -> Any:
        raise ConnectionRefusedError("still refused")

    with pytest.raises(AssertionError, match=r"not after 0s.*still refused"):
        poll("a probe", refused, 0.05, 0.01)


def test_poll_does_not_hide_a_bug_in_the_probe() -> None:
    with pytest.raises(KeyError):
        poll("a probe", lambda: {}["leader"], 5, 0.01)


def test_an_event_counts_from_the_session_that_stamped_it_not_when_it_came() -> None:
    start = 1_000_000.0
    # a bind at 0.45 s after time 0 whose event came 0.3 s later: session 0, not 1
    late = {"eventTime": micro_time(start + 0.45)}
    assert event_time(late, received=0.75, start_wall=start, period=1.0) == 0.0
    assert event_time({"eventTime": micro_time(start + 2.1)}, 2.9, start, 1.0) == 2.0
    assert event_time({}, received=2.9, start_wall=start, period=1.0) == 3.0, "no eventTime"


class FlakyApi:
    """A pod status write refused ``failures`` times, then taken."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.writes = 0
        self.done = threading.Event()

    def __call__(self, _api: Any, method: str, path: str, *_: Any) -> Any:
        self.writes += 1
        if self.failures:
            raise self.failures.pop(0)
        self.done.set()
        return {}


def pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }


def test_the_kubelet_retries_a_write_the_api_server_refused_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FlakyApi([ApiError(503, "unavailable"), ApiError(429, "slow down"), TimeoutError()])
    monkeypatch.setattr(kubelet_module, "request", api)
    monkeypatch.setattr(kubelet_module, "RETRY_DELAY", 0.01)
    kubelet = Kubelet(None)
    try:
        kubelet._on_pod("ADDED", pod())
        assert api.done.wait(5), "the pod was started in the end"
        assert api.writes == 4
    finally:
        kubelet._writes.shutdown(wait=True)


def test_the_kubelet_does_not_retry_a_pod_that_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    api = FlakyApi([ApiError(404, "not found")])
    monkeypatch.setattr(kubelet_module, "request", api)
    kubelet = Kubelet(None)
    kubelet._on_pod("ADDED", pod())
    kubelet._writes.shutdown(wait=True)
    assert api.writes == 1
