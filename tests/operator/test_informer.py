"""The informer: after a watch error it lists again and replaces the kind, so a pod deleted
while the watch was down does not linger and none is counted twice."""

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.runtime.informer import RESOURCES, Informer

PODS = next(r for r in RESOURCES if r.kind == "Pod")


def pod(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"schedulerName": "kbatch", "containers": [{"name": "c"}]},
    }


class FakeResponse:
    def __init__(
        self,
        body: dict[str, Any] | None = None,
        events: list[dict[str, Any]] | None = None,
        fail: bool = False,
    ) -> None:
        self.data = json.dumps(body or {}).encode()
        self.events = events or []
        self.fail = fail

    def stream(self, _size: int) -> Iterator[bytes]:
        for event in self.events:
            yield json.dumps(event).encode() + b"\n"
        if self.fail:
            raise ConnectionError("connection reset by peer")

    def release_conn(self) -> None:
        pass

    def shutdown(self) -> None:
        pass


class FakeApi:
    """Serves a scripted sequence of lists and watches; records what was asked."""

    def __init__(self, script: list[FakeResponse]) -> None:
        self.script = script
        self.calls: list[dict[str, str]] = []
        self.timeouts: list[object] = []
        self.times: list[float] = []
        self.done = threading.Event()

    def get(self, _api: object, _path: str, query: dict[str, str], timeout: object) -> FakeResponse:
        self.calls.append(query)
        self.timeouts.append(timeout)
        self.times.append(time.monotonic())
        if not self.script:
            self.done.set()
            threading.Event().wait(5)  # block like an idle watch until the test stops us
            raise ConnectionError("stopped")
        return self.script.pop(0)


def informed(monkeypatch: pytest.MonkeyPatch, api: "FakeApi") -> Informer:
    """A pod informer (over a new state) run against ``api`` until it has given every
    answer."""
    monkeypatch.setattr(kubeapi.client, "raw_get", api.get)
    state = ClusterState()
    informer = Informer(object(), PODS, state)  # type: ignore[arg-type]
    informer.start()
    assert api.done.wait(10)
    informer.stop()
    return informer


def test_a_watch_error_leads_to_a_relist_that_replaces_the_kind(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(
        [
            FakeResponse({"metadata": {"resourceVersion": "10"}, "items": [pod("a"), pod("b")]}),
            FakeResponse(events=[{"type": "ADDED", "object": pod("c")}], fail=True),
            # while the watch was down, b was deleted: the relist no longer has it
            FakeResponse({"metadata": {"resourceVersion": "20"}, "items": [pod("a"), pod("c")]}),
        ]
    )
    informer = informed(monkeypatch, api)
    state = informer.state
    assert sorted(p["metadata"]["name"] for p in state.list("Pod")) == ["a", "c"]
    assert [c.get("watch") for c in api.calls[:3]] == [None, "true", None]
    assert api.calls[1]["resourceVersion"] == "10"
    assert informer.synced.is_set()


def test_deleted_events_remove_and_bad_objects_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = pod("bad")
    bad["spec"]["containers"] = [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]
    api = FakeApi(
        [
            FakeResponse({"metadata": {"resourceVersion": "1"}, "items": [pod("a"), bad]}),
            FakeResponse(
                events=[
                    {"type": "DELETED", "object": pod("a")},
                    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "5"}}},
                    {"type": "MODIFIED", "object": pod("d")},
                ]
            ),
        ]
    )
    state = informed(monkeypatch, api).state
    assert [p["metadata"]["name"] for p in state.list("Pod")] == ["d"]


def test_a_watch_the_server_ends_resumes_from_the_last_version_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(
        [
            FakeResponse({"metadata": {"resourceVersion": "1"}, "items": [pod("a")]}),
            FakeResponse(
                events=[
                    {
                        "type": "ADDED",
                        "object": {
                            **pod("b"),
                            "metadata": {**pod("b")["metadata"], "resourceVersion": "7"},
                        },
                    }
                ]
            ),
            FakeResponse(
                events=[{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}}]
            ),
            FakeResponse(),  # ends at once, having seen nothing: resumes from 9 again
        ]
    )
    monkeypatch.setattr(kubeapi.client, "raw_get", api.get)
    state = ClusterState()
    informer = Informer(object(), PODS, state, watch_seconds=300)  # type: ignore[arg-type]
    informer.start()
    assert api.done.wait(10)
    informer.stop()
    assert [c.get("watch") for c in api.calls[:5]] == [None, "true", "true", "true", "true"]
    assert [c["resourceVersion"] for c in api.calls[1:5]] == ["1", "7", "9", "9"]
    assert sorted(p["metadata"]["name"] for p in state.list("Pod")) == ["a", "b"]
    read = api.timeouts[1]
    assert isinstance(read, tuple) and 300 < read[1] < 400, "a read timeout past the watch's"


def test_410_gone_lists_again_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    api = FakeApi(
        [
            FakeResponse({"metadata": {"resourceVersion": "1"}, "items": [pod("a")]}),
            FakeResponse(events=[gone]),
            FakeResponse({"metadata": {"resourceVersion": "30"}, "items": [pod("z")]}),
        ]
    )
    monkeypatch.setattr(kubeapi.client, "raw_get", api.get)
    state = ClusterState()
    informer = Informer(object(), PODS, state)  # type: ignore[arg-type]
    started = time.monotonic()
    informer.start()
    assert api.done.wait(10)
    informer.stop()
    assert [c.get("watch") for c in api.calls[:4]] == [None, "true", None, "true"]
    assert api.calls[3]["resourceVersion"] == "30"
    assert api.times[2] - started < 0.3, "no backoff before the relist"
    assert [p["metadata"]["name"] for p in state.list("Pod")] == ["z"]


def test_a_list_is_read_in_pages_and_replaces_the_kind_with_all_of_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(
        [
            FakeResponse({"metadata": {"resourceVersion": "1"}, "items": [pod("old")]}),
            FakeResponse(events=[], fail=True),  # a dropped watch: listed again, in pages
            FakeResponse(
                {"metadata": {"resourceVersion": "40", "continue": "t1"}, "items": [pod("a")]}
            ),
            FakeResponse(
                {"metadata": {"resourceVersion": "40", "continue": "t2"}, "items": [pod("b")]}
            ),
            FakeResponse({"metadata": {"resourceVersion": "40"}, "items": [pod("c")]}),
        ]
    )
    state = informed(monkeypatch, api).state
    assert sorted(p["metadata"]["name"] for p in state.list("Pod")) == ["a", "b", "c"]
    lists = [c for c in api.calls[:5] if c.get("watch") is None]
    assert [c.get("continue") for c in lists] == [None, None, "t1", "t2"]
    assert all(c["limit"] == "500" for c in lists)
    assert api.calls[5] == {**api.calls[5], "watch": "true", "resourceVersion": "40"}


def test_a_page_that_fails_fails_the_list_which_is_listed_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Expired(FakeResponse):
        @property  # type: ignore[override]
        def data(self) -> bytes:
            raise kubeapi.Gone("the continue token has expired")

        @data.setter
        def data(self, _value: bytes) -> None:
            pass

    api = FakeApi(
        [
            FakeResponse({"metadata": {"resourceVersion": "1", "continue": "t"}, "items": []}),
            Expired(),
            FakeResponse({"metadata": {"resourceVersion": "9"}, "items": [pod("z")]}),
        ]
    )
    state = informed(monkeypatch, api).state
    assert [c.get("continue") for c in api.calls[:3]] == [None, "t", None]
    assert api.calls[3]["resourceVersion"] == "9"
    assert [p["metadata"]["name"] for p in state.list("Pod")] == ["z"]


def test_listed_and_watched_objects_are_held_without_their_managed_fields(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What no part of kbatch reads is not held (``kbatch.cluster.kept_fields``)."""
    managed = [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]

    def managed_pod(name: str) -> dict[str, Any]:
        made = pod(name)
        made["metadata"]["managedFields"] = managed
        return made

    api = FakeApi(
        [
            FakeResponse({"metadata": {"resourceVersion": "1"}, "items": [managed_pod("a")]}),
            FakeResponse(events=[{"type": "ADDED", "object": managed_pod("b")}]),
        ]
    )
    state = informed(monkeypatch, api).state
    held = {p["metadata"]["name"]: p["metadata"] for p in state.list("Pod")}
    assert held == {"a": pod("a")["metadata"], "b": pod("b")["metadata"]}
