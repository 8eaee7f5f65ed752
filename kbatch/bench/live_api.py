"""What the live benchmark does on the API server besides creating the scenario: objects
made once (``ensure``), the watch that notes when each pod is first seen bound, the
wipe between runs, and the request counts of its /metrics.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from kbatch import kubeapi
from kbatch.bench import live_workload as workload

PODS = f"/api/v1/namespaces/{workload.NAMESPACE}/pods"
WATCH_RETRIES = 5
GROUP_APIS = (workload.KBATCH_GROUPS, workload.UPSTREAM_GROUPS, workload.VOLCANO_GROUPS)


def wait(what: str, done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.5)


def ready_nodes(api: Any) -> int:
    selector = f"{workload.NODE_LABEL}={workload.NODE_LABEL_VALUE}"
    nodes = kubeapi.request(api, "GET", "/api/v1/nodes", query={"labelSelector": selector})
    return sum(
        1
        for n in nodes["items"]
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (n.get("status") or {}).get("conditions") or []
        )
        and (n["status"].get("allocatable") or {}).get("cpu")
    )


def ensure(api: Any, path: str, body: dict[str, Any]) -> None:
    try:
        kubeapi.request(api, "POST", path, body)
    except kubeapi.ApiError as exc:
        if exc.status != 409:
            raise


def ensured(api: Any, path: str, body: dict[str, Any]) -> bool:
    """``ensure``, False (not an error) while ``path`` is not served yet (a CRD just
    made)."""
    try:
        ensure(api, path, body)
    except kubeapi.ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def ensure_served(api: Any, what: str, path: str, body: dict[str, Any]) -> None:
    """``ensure``, waiting up to a minute for ``path`` to be served (a CRD just made)."""
    wait(what, lambda: ensured(api, path, body), 60)


class Watch(threading.Thread):
    """Watches the namespace's pods: when each was first seen bound; ``done`` is set
    once all ``spec.pods`` are."""

    def __init__(self, api: Any, spec: workload.Scenario) -> None:
        super().__init__(daemon=True)
        self.api, self.spec = api, spec
        self.bound: dict[str, float] = {}
        self.done = threading.Event()
        self.failure: str | None = None
        self._stopping = threading.Event()
        listed = kubeapi.request(api, "GET", PODS, query={"limit": "1"})
        self.version = str(listed["metadata"]["resourceVersion"])

    def stop(self) -> None:
        self._stopping.set()

    def wait(self, timeout: float) -> bool:
        """Until every pod is bound (True), the watch fails, or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while not self.done.wait(0.5):
            if self.failure is not None or time.monotonic() > deadline:
                return False
        return True

    def run(self) -> None:
        cuts = 0
        while not self._stopping.is_set() and not self.done.is_set():
            query = {"watch": "true", "resourceVersion": self.version, "timeoutSeconds": "30",
                     "allowWatchBookmarks": "true"}  # fmt: skip
            try:
                response = kubeapi.raw_get(self.api, PODS, query, None)
            except kubeapi.Gone:  # the version left etcd's window: list again, go on from there
                self._relist()
                continue
            try:
                self._read(response)
                cuts = 0
            except Exception as exc:  # a stream cut short (urllib3's ProtocolError): again
                cuts += 1
                if cuts > WATCH_RETRIES:
                    self.failure = f"the watch of pods failed {cuts} times in a row: {exc}"
                    return
                time.sleep(0.2)
            finally:
                response.release_conn()

    def _relist(self) -> None:
        """Note the pods a list shows bound (late: the watch missed when) and its version."""
        listed = kubeapi.request(self.api, "GET", PODS)
        now = time.monotonic()
        for obj in listed["items"]:
            if obj["spec"].get("nodeName"):
                self.bound.setdefault(obj["metadata"]["name"], now)
        self.version = str(listed["metadata"]["resourceVersion"])
        if len(self.bound) >= self.spec.pods:
            self.done.set()

    def _read(self, response: Any) -> None:
        buffer = b""
        for chunk in response.stream(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                event = json.loads(line)
                if event["type"] == "ERROR":  # e.g. 410: the version is too old
                    self._relist()
                    return
                obj = event["object"]
                self.version = obj["metadata"].get("resourceVersion", self.version)
                if event["type"] in ("ADDED", "MODIFIED") and obj["spec"].get("nodeName"):
                    self.bound.setdefault(obj["metadata"]["name"], time.monotonic())
            if len(self.bound) >= self.spec.pods:
                self.done.set()
            if self.done.is_set() or self._stopping.is_set():
                return


def wipe(api: Any) -> None:
    """Delete every pod and group of the namespace at once and wait until none is left (a
    group still held by a finalizer after 30 s has its finalizers dropped: no controller
    of this cluster may be there to clear them)."""
    groups = [f"/apis/{g}/namespaces/{workload.NAMESPACE}/podgroups" for g in GROUP_APIS]
    for path in [PODS, *groups]:
        delete_all(api, path)
    wait("the namespace's pods deleted", lambda: delete_all(api, PODS), 600)
    try:
        wait("the namespace's groups deleted", lambda: not any(listed(api, g) for g in groups), 30)
    except RuntimeError:
        for path in groups:
            for obj in listed(api, path):
                name = obj["metadata"]["name"]
                kubeapi.request(api, "PATCH", f"{path}/{name}", {"metadata": {"finalizers": None}},
                                content_type="application/merge-patch+json")  # fmt: skip
        wait("the namespace's groups deleted", lambda: not any(listed(api, g) for g in groups), 60)


def delete_all(api: Any, path: str) -> bool:
    """One collection DELETE of ``path`` (at once, no grace); True once nothing is left.
    The server ends a DELETE of 10,000 pods at its request timeout with a part deleted
    (a 504, a 500 "context deadline", or, when it cannot write even that, the connection
    closed with no answer or mid-answer: ``Unreachable``), so a caller repeats it until
    this says so; a server really gone fails the list that follows."""
    at_once = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    try:
        kubeapi.request(api, "DELETE", path, at_once, timeout=600)
    except kubeapi.ApiError as exc:
        if exc.status == 404:
            return True
        if 0 < exc.status < 500:
            raise
    return not listed(api, path, limit=1)


def listed(api: Any, path: str, limit: int = 0) -> list[dict[str, Any]]:
    """The objects at ``path`` (none where its API is not served)."""
    try:
        query = {"limit": str(limit)} if limit else None
        items: list[dict[str, Any]] = kubeapi.request(api, "GET", path, query=query)["items"]
    except kubeapi.ApiError as exc:
        if exc.status == 404:
            return []
        raise
    return items


def settled(
    counts: Callable[[], dict[str, dict[str, int]]],
    requests: tuple[str, ...],
    quiet: float,
    timeout: float,
) -> None:
    """Until the API server has counted none of ``requests`` (e.g. ``LIST pods``) for
    ``quiet`` seconds (``counts`` as ``request_counts`` gives them); RuntimeError after
    ``timeout``. A cluster's start-up work (KWOK lists each new node's pods once) is
    then done, not shared with the first scheduler measured."""
    last: list[Any] = [None, time.monotonic()]  # the counts last seen, since when

    def quiet_long_enough() -> bool:
        now = [counts()["resource"].get(r, 0) for r in requests]
        if now != last[0]:
            last[:] = [now, time.monotonic()]
        return time.monotonic() - last[1] >= quiet

    wait(
        f"the cluster's start-up requests ({', '.join(requests)}) to stop",
        quiet_long_enough,
        timeout,
    )


def request_counts(api: Any) -> dict[str, dict[str, int]]:
    """``apiserver_request_total`` from the API server's /metrics, summed by verb
    (``"verb"``) and by verb and resource (``"resource"``, e.g. ``POST pods/binding``)."""
    response = kubeapi.raw_get(api, "/metrics", {}, 30)
    try:
        text = response.data.decode()
    finally:
        response.release_conn()
    return {
        "verb": parse_request_counts(text),
        "resource": parse_request_counts(text, ("verb", "resource", "subresource")),
    }


def parse_request_counts(text: str, labels: tuple[str, ...] = ("verb",)) -> dict[str, int]:
    """Prometheus text: the ``apiserver_request_total`` samples summed by the values of
    ``labels``, joined as ``verb resource/subresource`` (a label missing or empty is
    left out)."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        inside, _, value = line[len("apiserver_request_total{") :].rpartition("} ")
        found = dict(
            (part.split("=", 1)[0], part.split("=", 1)[1].strip('"'))
            for part in inside.split(",")
            if "=" in part
        )
        verb = found.get("verb") or "?"
        rest = "/".join(found[k] for k in labels[1:] if found.get(k))
        key = f"{verb} {rest}" if rest else verb
        counts[key] = counts.get(key, 0) + int(float(value))
    return counts


def differences(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    """``after`` less ``before``, key by key (those that did not change left out)."""
    out = {key: after[key] - before.get(key, 0) for key in sorted(after)}
    return {key: n for key, n in out.items() if n}
