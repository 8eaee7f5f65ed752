"""The scheduler's side effects on a real cluster: binds, evictions, status, events.

Each runs on a worker thread, so a session never waits for the API server:
binds concurrently (a pod is *assumed* bound in the cache meanwhile, so the next
session does not place it again; a failed bind forgets the assumption and says
why in an event), status writes in order on one thread, events on a few.
"""

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from kbatch.api import GROUP, VERSION
from kbatch.api.podgroup import PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.framework.info import TaskInfo
from kbatch.operators.scheduler.framework.interface import ObjectRef, Snapshot

log = logging.getLogger("kbatch.kube")
COMPONENT = "kbatch"
EVENT_REPEAT_SECONDS = 300.0  # an identical event for the same object is not sent again sooner
EVENT_WAIT_FOR_BINDS = 30.0  # an event waits at most this long for the binds in flight


class _Counter:
    """How many binds are in flight; events wait (bounded) until there are none."""

    def __init__(self) -> None:
        self._value = 0
        self._idle = threading.Condition()

    @property
    def value(self) -> int:
        return self._value

    def add(self, delta: int) -> None:
        with self._idle:
            self._value += delta
            if self._value == 0:
                self._idle.notify_all()

    def wait_idle(self, timeout: float) -> None:
        with self._idle:
            self._idle.wait_for(lambda: self._value == 0, timeout)


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


def request(
    api: client.ApiClient,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    timeout: float = 30,
) -> dict[str, Any]:
    """One API call with a JSON body; the decoded answer, or ApiError."""
    method, url, headers, _, post = api.param_serialize(
        method,
        path,
        header_params={"Accept": "application/json", "Content-Type": content_type},
        auth_settings=["BearerToken"],
    )
    # the REST client encodes the body as JSON itself
    response = api.call_api(method, url, headers, body, post, _request_timeout=timeout).response
    data = response.data
    if response.status >= 400:
        try:
            message = json.loads(data).get("message", "")
        except ValueError:
            message = data.decode(errors="replace")[:300]
        raise ApiError(response.status, message)
    return json.loads(data) if data else {}


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class KubeCluster:
    """The core's Cluster interface over the Kubernetes API and a watched ClusterState."""

    def __init__(self, api: client.ApiClient, state: ClusterState, bind_workers: int = 16) -> None:
        self.api = api
        self.state = state
        self.binder = self
        self.evictor = self
        self.status = self
        self.events = self
        self._binds = ThreadPoolExecutor(bind_workers, thread_name_prefix="kbatch-bind")
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="kbatch-write")  # ordered status
        self._events = ThreadPoolExecutor(1, thread_name_prefix="kbatch-event")
        self._recent: dict[tuple[str, str, str, str, str], float] = {}
        self._recent_lock = threading.Lock()
        self._in_flight = _Counter()

    def snapshot(self) -> Snapshot:
        return self.state.snapshot()

    def binds_in_flight(self) -> bool:
        return self._in_flight.value > 0

    def shutdown(self) -> None:
        self._binds.shutdown(wait=True)
        self._writes.shutdown(wait=True)
        self._events.shutdown(wait=True)

    # ----------------------------------------------------------------- binder
    def bind(self, task: TaskInfo, node: str) -> None:
        self.state.assume_bound(task.namespace, task.name, node)
        self._in_flight.add(1)
        self._binds.submit(self._bind, task.namespace, task.name, task.uid, node)

    def _bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        try:
            self._post_binding(namespace, name, uid, node)
        finally:
            self._in_flight.add(-1)

    def _post_binding(self, namespace: str, name: str, uid: str, node: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            request(self.api, "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body)
        except Exception as exc:
            self.state.forget(namespace, name)
            if isinstance(exc, ApiError) and exc.status == 409:
                log.info("pod %s/%s was bound already: %s", namespace, name, exc)
                return
            log.warning("bind of %s/%s to %s failed: %s", namespace, name, node, exc)
            self.record(
                ObjectRef("Pod", namespace, name),
                "Warning",
                "FailedScheduling",
                f"Binding rejected: {exc}",
            )
            return
        self.record(
            ObjectRef("Pod", namespace, name),
            "Normal",
            "Scheduled",
            f"Successfully assigned {namespace}/{name} to {node}",
        )

    # ----------------------------------------------------------------- evictor
    def evict(self, task: TaskInfo, reason: str) -> None:
        self._binds.submit(self._evict, task.namespace, task.name, task.uid)

    def _evict(self, namespace: str, name: str, uid: str) -> None:
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        try:
            request(self.api, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)
        except ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("eviction of %s/%s failed: %s", namespace, name, exc)

    # ----------------------------------------------------------------- status
    def update_pod_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups/{name}/status"
        self._writes.submit(
            self._patch_status,
            path,
            status.model_dump(mode="json", by_alias=True, exclude_none=True),
        )

    def update_queue(self, name: str, status: QueueStatus) -> None:
        path = f"/apis/{GROUP}/{VERSION}/queues/{name}/status"
        self._writes.submit(
            self._patch_status,
            path,
            status.model_dump(mode="json", by_alias=True, exclude_none=True),
        )

    def _patch_status(self, path: str, status: dict[str, Any]) -> None:
        # The whole status, replaced: a merge patch would keep the keys a map no longer
        # has (a queue's allocated memory after its last pod asking memory finished).
        patch = [{"op": "add", "path": "/status", "value": status}]
        try:
            request(self.api, "PATCH", path, patch, "application/json-patch+json")
        except Exception as exc:
            if not (isinstance(exc, ApiError) and exc.status == 404):
                log.warning("status write %s failed: %s", path, exc)

    # ----------------------------------------------------------------- events
    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        # by uid too: a pod made again under the same name is told about again
        obj = self.state.get(ref.kind, ref.namespace, ref.name) or {}
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        key = (ref.kind, ref.namespace, ref.name, uid, reason + "\0" + message)
        now = time.monotonic()
        with self._recent_lock:
            last = self._recent.get(key)
            if last is not None and now - last < EVENT_REPEAT_SECONDS:
                return
            self._recent[key] = now
            if len(self._recent) > 50_000:
                self._recent = {
                    k: t for k, t in self._recent.items() if now - t < EVENT_REPEAT_SECONDS
                }
        self._events.submit(self._event, ref, type_, reason, message)

    def _event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self._in_flight.wait_idle(EVENT_WAIT_FOR_BINDS)  # binds first: events are for people
        namespace = ref.namespace or "default"
        existing = self.state.get(ref.kind, ref.namespace, ref.name) or {}
        api_version = existing.get("apiVersion") or (
            "v1" if ref.kind == "Pod" else f"{GROUP}/{VERSION}"
        )
        stamp = now_rfc3339()
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{ref.name}.", "namespace": namespace},
            "involvedObject": {
                "kind": ref.kind,
                "namespace": ref.namespace,
                "name": ref.name,
                "uid": (existing.get("metadata") or {}).get("uid", ""),
                "apiVersion": api_version,
            },
            "reason": reason,
            "message": message[:1024],
            "type": type_,
            "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            request(self.api, "POST", f"/api/v1/namespaces/{namespace}/events", body)
        except Exception as exc:
            log.debug("event %s on %s/%s not recorded: %s", reason, namespace, ref.name, exc)
