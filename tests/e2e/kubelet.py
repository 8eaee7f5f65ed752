"""A test kubelet for clusters whose Nodes are plain objects (as KWOK does), and the
list+watch loop it runs on.

    with Kubelet(api) as kubelet:   # a thread; stops on exit
        ...

What it does to every pod in the cluster, as a kubelet would:

- bound (``spec.nodeName``) and Pending: status Running (phase, startTime,
  Ready conditions, one running status per container) through pods/status;
- Running with the annotation ``kbatch.io/sim-duration``: Succeeded that long
  after it started; with ``spec.activeDeadlineSeconds`` too, or alone, Failed
  (``DeadlineExceeded``) that long after it started if that comes first;
- being deleted (a ``deletionTimestamp``): deleted with grace period 0, which a
  kubelet does once the containers have stopped. Without it an evicted pod
  would stay Terminating for its whole grace period.

``Watch`` (list, then watch from the list's resourceVersion; after any failure
list again and report what vanished meanwhile as DELETED) is independent of
kbatch's own informer on purpose: the tests should not see the cluster through
the code under test.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

from kbatch.kubeapi import ApiError, raw_get, request
from kbatch.sim import clock
from kbatch.sim.pod_objects import DEADLINE_EXCEEDED, DEADLINE_MESSAGE

log = logging.getLogger("e2e.kubelet")
RETRIES = 6  # a write the API server refused for a while (5xx, 429, a timeout)
RETRY_DELAY = 0.2

Json = dict[str, Any]
DURATION = "kbatch.io/sim-duration"
WATCH_SECONDS = 60


def rfc3339(when: float | None = None) -> str:
    stamp = datetime.fromtimestamp(time.time() if when is None else when, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


class Watch:
    """One collection, listed then watched on a daemon thread.

    ``on_event(type, obj)`` gets ADDED / MODIFIED / DELETED (DELETED with the last
    state seen). ``objects`` maps uid to the latest state of what exists now.
    """

    def __init__(
        self,
        api: Any,
        path: str,
        on_event: Callable[[str, Json], None] = lambda _type, _obj: None,
        name: str = "watch",
    ) -> None:
        self.api = api
        self.path = path
        self.on_event = on_event
        self.objects: dict[str, Json] = {}
        self.synced = threading.Event()
        self.lock = threading.Lock()
        self._stop = threading.Event()
        self._response: Any = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Watch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()
        self._thread.join(timeout=10)

    def wait_synced(self, timeout: float = 30.0) -> None:
        if not self.synced.wait(timeout):
            raise TimeoutError(f"no list of {self.path} after {timeout:.0f}s")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._watch(self._list())
            except Exception as exc:
                if not self._stop.is_set():
                    log.info("watch of %s: %s; listing again", self.path, exc)
                    self._stop.wait(0.2)

    def _list(self) -> str:
        response = raw_get(self.api, self.path, {}, 60)
        body = json.loads(response.data)
        listed = {item["metadata"]["uid"]: item for item in body.get("items") or []}
        with self.lock:
            gone = [obj for uid, obj in self.objects.items() if uid not in listed]
            known = set(self.objects)
            self.objects = dict(listed)
        for obj in gone:
            self.on_event("DELETED", obj)
        for uid, obj in listed.items():
            self.on_event("MODIFIED" if uid in known else "ADDED", obj)
        self.synced.set()
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> None:
        for event in self._stream(version):
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                raise RuntimeError(f"watch error: {obj.get('message', obj)}")
            if kind not in ("ADDED", "MODIFIED", "DELETED"):
                continue
            uid = obj["metadata"]["uid"]
            with self.lock:
                if kind == "DELETED":
                    self.objects.pop(uid, None)
                else:
                    self.objects[uid] = obj
            self.on_event(kind, obj)

    def _stream(self, version: str) -> Iterator[Json]:
        query = {
            "watch": "true",
            "resourceVersion": version,
            "timeoutSeconds": str(WATCH_SECONDS),
            "allowWatchBookmarks": "true",
        }
        response = raw_get(self.api, self.path, query, None)
        self._response = response
        try:
            if self._stop.is_set():
                return
            buffer = b""
            for chunk in response.stream(65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json.loads(line)
        finally:
            self._response = None
            response.release_conn()


def _reported_resources(container: Json) -> Json:
    """What a kubelet of 1.33 on reports of a running container's resources (in-place
    resize): what it runs with, and what it allocated (its requests, each defaulting to
    its limit); an older API server drops the fields."""
    resources = container.get("resources") or {}
    limits, requests = resources.get("limits") or {}, resources.get("requests") or {}
    applied = {**limits, **requests}
    running = {k: v for k, v in (("requests", applied), ("limits", limits)) if v}
    return {"resources": running, "allocatedResources": applied} if applied else {}


class Kubelet:
    """Plays every node's kubelet: starts bound pods, finishes timed ones, removes deleted ones."""

    def __init__(self, api: Any, workers: int = 4) -> None:
        self.api = api
        self.watch = Watch(api, "/api/v1/pods", self._on_pod, name="e2e-kubelet")
        self._writes = ThreadPoolExecutor(workers, thread_name_prefix="e2e-kubelet")
        self._lock = threading.Lock()
        self._handled: set[tuple[str, str]] = set()  # (uid, what) already sent
        self._finishes: list[tuple[float, str, bool]] = []  # (when, pod uid, at its deadline)
        self._wake = threading.Condition(self._lock)
        self._stop = threading.Event()
        self._timer = threading.Thread(
            target=self._run_timer, name="e2e-kubelet-timer", daemon=True
        )

    def __enter__(self) -> Kubelet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> Kubelet:
        self._timer.start()
        self.watch.start().wait_synced()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._wake:
            self._wake.notify_all()
        self.watch.stop()
        self._timer.join(timeout=10)
        self._writes.shutdown(wait=True, cancel_futures=True)

    # ----------------------------------------------------------------- decisions
    def _on_pod(self, kind: str, pod: Json) -> None:
        if kind == "DELETED" or self._stop.is_set():
            return
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        uid, phase = meta["uid"], status.get("phase") or "Pending"
        if meta.get("deletionTimestamp"):
            self._once(uid, "delete", self._delete, meta["namespace"], meta["name"], uid)
        elif spec.get("nodeName") and phase == "Pending":
            self._once(uid, "start", self._start, pod)
        elif phase == "Running":
            duration = (meta.get("annotations") or {}).get(DURATION)
            deadline = spec.get("activeDeadlineSeconds")
            if (duration is not None or deadline is not None) and self._claim(uid, "finish"):
                started = parse_time(status.get("startTime")) or time.time()
                ends = [started + clock.parse_duration(duration, DURATION)] if duration else []
                exceeds = deadline is not None and all(started + deadline < e for e in ends)
                when = started + deadline if exceeds else ends[0]
                with self._wake:
                    heapq.heappush(self._finishes, (when, uid, exceeds))
                    self._wake.notify()

    def _claim(self, uid: str, what: str) -> bool:
        with self._lock:
            if (uid, what) in self._handled:
                return False
            self._handled.add((uid, what))
            return True

    def _once(self, uid: str, what: str, action: Callable[..., None], *args: Any) -> None:
        if self._claim(uid, what):
            with contextlib.suppress(RuntimeError):  # shut down meanwhile
                self._writes.submit(self._guarded, (uid, what), action, *args)

    def _guarded(self, claim: tuple[str, str], action: Callable[..., None], *args: Any) -> None:
        """Do ``action``, again after a pause while the API server answers with an error
        that may pass (5xx, 429, a timeout); a 404 or 409 means the pod is gone or changed:
        nothing to do. Given up after ``RETRIES``, the claim is dropped so that the pod's
        next watch event tries again."""
        delay = RETRY_DELAY
        for _ in range(RETRIES):
            try:
                action(*args)
                return
            except ApiError as exc:
                if exc.status in (404, 409):
                    return
                error: Exception = exc
            except Exception as exc:
                error = exc
            log.info("kubelet: %s %s: %s; trying again", action.__name__, claim[0], error)
            if self._stop.wait(delay):
                return
            delay = min(delay * 2, 5.0)
        log.warning("kubelet: %s %s: gave up: %s", action.__name__, claim[0], error)
        with self._lock:
            self._handled.discard(claim)

    def _run_timer(self) -> None:
        while not self._stop.is_set():
            with self._wake:
                if not self._finishes:
                    self._wake.wait(1.0)
                    continue
                when, uid, exceeds = self._finishes[0]
                delay = when - time.time()
                if delay > 0:
                    self._wake.wait(min(delay, 1.0))
                    continue
                heapq.heappop(self._finishes)
            pod = self._current(uid)
            if pod is not None and (pod.get("status") or {}).get("phase") == "Running":
                self._once(uid, "succeed", self._succeed, pod, exceeds)

    def _current(self, uid: str) -> Json | None:
        with self.watch.lock:
            return self.watch.objects.get(uid)

    # ----------------------------------------------------------------- writes
    def _start(self, pod: Json) -> None:
        now = rfc3339()
        containers = (pod.get("spec") or {}).get("containers") or []
        status = {
            "phase": "Running",
            "startTime": now,
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                    **_reported_resources(c),
                }
                for c in containers
            ],
        }
        self._patch_status(pod, status)

    def _succeed(self, pod: Json, exceeds: bool = False) -> None:
        """The pod's containers end: Succeeded, or (``exceeds``) Failed at its deadline."""
        now = rfc3339()
        started = (pod.get("status") or {}).get("startTime") or now
        containers = (pod.get("spec") or {}).get("containers") or []
        ended = {"phase": "Succeeded"}
        if exceeds:
            ended = {"phase": "Failed", "reason": DEADLINE_EXCEEDED, "message": DEADLINE_MESSAGE}
        status = {
            **ended,
            "conditions": [
                {"type": t, "status": "False", "reason": "PodCompleted", "lastTransitionTime": now}
                for t in ("Ready", "ContainersReady")
            ]
            + [
                {"type": t, "status": "True", "lastTransitionTime": started}
                for t in ("Initialized", "PodScheduled")
            ],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "image": c.get("image", ""),
                    "imageID": "",
                    "ready": False,
                    "started": False,
                    "restartCount": 0,
                    "state": {
                        "terminated": {
                            "exitCode": 0,
                            "reason": "Completed",
                            "startedAt": started,
                            "finishedAt": now,
                        }
                    },
                }
                for c in containers
            ],
        }
        self._patch_status(pod, status)

    def _patch_status(self, pod: Json, status: Json) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        # the uid in the patch makes it a precondition: a pod of the same name made
        # since is left alone (409)
        body = {"metadata": {"uid": meta["uid"]}, "status": status}
        request(self.api, "PATCH", path, body, "application/merge-patch+json")

    def _delete(self, namespace: str, name: str, uid: str) -> None:
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}}
        request(self.api, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
