"""The live benchmark's wipe: a collection DELETE the server cuts short is repeated."""

from typing import Any

import pytest
import urllib3

from kbatch import kubeapi
from kbatch.bench import live_api


class Server:
    """Answers the DELETE with ``failures`` in turn (then success), and the list with a
    pod left until a DELETE succeeded."""

    def __init__(self, failures: list[Exception], list_failure: Exception | None = None):
        self.failures, self.list_failure = failures, list_failure
        self.deletes, self.done = 0, False

    def request(self, api: Any, method: str, path: str, *args: Any, **kwargs: Any) -> Any:
        if method == "DELETE":
            self.deletes += 1
            if self.failures:
                raise self.failures.pop(0)
            self.done = True
            return {}
        if self.list_failure is not None:
            raise self.list_failure
        return {"items": [] if self.done else [{"metadata": {"name": "pod-0"}}]}


def test_a_delete_cut_short_with_no_answer_is_repeated_until_none_is_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = Server([kubeapi.Unreachable("DELETE pods: Remote end closed connection"),
                     kubeapi.ApiError(504, "timeout")])  # fmt: skip
    monkeypatch.setattr(kubeapi.client, "request", server.request)
    monkeypatch.setattr(live_api.time, "sleep", lambda _: None)
    live_api.wait("deleted", lambda: live_api.delete_all(None, live_api.PODS), 60)
    assert server.deletes == 3


def test_a_refused_delete_and_a_server_gone_fail(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        kubeapi.client, "request", Server([kubeapi.ApiError(403, "forbidden")]).request
    )
    with pytest.raises(kubeapi.ApiError, match="forbidden"):
        live_api.delete_all(None, live_api.PODS)
    gone = Server([kubeapi.Unreachable("refused")], list_failure=kubeapi.Unreachable("refused"))
    monkeypatch.setattr(kubeapi.client, "request", gone.request)
    with pytest.raises(kubeapi.Unreachable):
        live_api.delete_all(None, live_api.PODS)


class CutShort:
    """An answer whose body breaks off, as urllib3 reads a connection closed mid-body."""

    status = 200

    @property
    def data(self) -> bytes:
        raise urllib3.exceptions.ProtocolError("Connection broken: IncompleteRead(21050916)")


def test_an_answer_cut_short_mid_body_is_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    api = kubeapi.client_for("http://127.0.0.1:1")
    answer = type("Answer", (), {"response": CutShort()})()
    monkeypatch.setattr(api, "call_api", lambda *args, **kwargs: answer)
    with pytest.raises(kubeapi.Unreachable, match="cut short"):
        kubeapi.request(api, "DELETE", live_api.PODS)


class Clock:
    """A monotonic clock that a sleep moves on."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def counts_of(lists: list[int]) -> Any:
    """``request_counts`` answering each ``LIST pods`` count of ``lists`` in turn (the
    last one from then on)."""

    def counts() -> dict[str, dict[str, int]]:
        value = lists.pop(0) if len(lists) > 1 else lists[0]
        return {"verb": {}, "resource": {"LIST pods": value, "POST pods": 7}}

    return counts


def test_start_up_requests_settle_once_they_stop_rising(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = Clock()
    monkeypatch.setattr(live_api, "time", clock)
    live_api.settled(counts_of([0, 400, 900, 1000, 1000]), ("LIST pods",), quiet=5.0, timeout=60)
    # a count every half second: the last rise is seen at t=1.5, quiet five seconds later
    assert clock.now == pytest.approx(6.5)


def test_start_up_requests_that_never_stop_fail_with_what_they_are(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(live_api, "time", Clock())
    rising = counts_of(list(range(0, 10_000, 10)))
    with pytest.raises(
        RuntimeError, match=r"start-up requests \(LIST pods\) to stop: not within 60s"
    ):
        live_api.settled(rising, ("LIST pods",), quiet=5.0, timeout=60)
