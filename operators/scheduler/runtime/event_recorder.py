"""The live backend's event recorder: events, in order on their own thread, each after
the binds in flight (a bounded wait: events are for people), a repeat of one sent lately
dropped (the simulator's rule too), and an ``Evict`` event only once its eviction has
succeeded. An event carries ``eventTime``: the moment the session decided (a bind's
moment is when the session sent it, not when its event was written after the binds)."""

import logging
import socket
import threading
import time
from concurrent.futures import Future
from datetime import UTC, datetime

from kbatch import kubeapi
from kbatch.api import GROUP, VERSION
from kbatch.cluster import upstream_groups
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.operators.scheduler.runtime.binder import BindsInFlight
from kbatch.operators.scheduler.runtime.evictor import Evictions
from kbatch.operators.scheduler.runtime.writer import OrderedWriter

log = logging.getLogger("kbatch.kube")
COMPONENT = "kbatch"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(when: float) -> str:
    """An API MicroTime (an event's eventTime)."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _succeeded(outcome: "Future[bool]") -> bool:
    return not outcome.cancelled() and outcome.exception() is None and outcome.result()


class EventRecorder:
    """Events on the API server, as kube-scheduler's recorder sends them."""

    def __init__(
        self,
        api: kubeapi.ApiClient,
        state: ClusterState,
        in_flight: BindsInFlight,
        evictions: Evictions,
    ) -> None:
        self.api = api
        self.state = state
        self.instance = socket.gethostname()
        self.writer = OrderedWriter("events")
        self._in_flight = in_flight
        self._evictions = evictions
        self._told = decided.EventFilter()  # the simulator's rule for repeats, too
        self._lock = threading.Lock()

    def record(
        self, ref: ObjectRef, type_: str, reason: str, message: str, at: float | None = None
    ) -> None:
        """Send an event (``at``: when it happened; now by default), unless the same was
        sent lately; an Evict event once its eviction has succeeded."""
        at = time.time() if at is None else at
        outcome = self._evictions.of(ref) if reason == decided.EVICT else None
        if outcome is None:
            self._record(ref, type_, reason, message, at)
            return

        def told(done: "Future[bool]") -> None:
            if _succeeded(done):
                self._record(ref, type_, reason, message, at)

        outcome.add_done_callback(told)

    def _record(self, ref: ObjectRef, type_: str, reason: str, message: str, at: float) -> None:
        # by uid too: a pod made again under the same name is told about again
        obj = self.state.get(ref.kind, ref.namespace, ref.name) or {}
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        with self._lock:
            event = decided.Event(ref, type_, reason, message)
            if not self._told.fresh((ref, uid), event, time.monotonic()):
                return
        # binds first (events are for people), for at most EVENT_WAIT_FOR_BINDS from
        # now: a deadline per event, not a wait per event in turn on the one thread
        deadline = self._in_flight.deadline()
        self.writer.submit(self._event, ref, type_, reason, message, at, deadline)

    def _event(
        self, ref: ObjectRef, type_: str, reason: str, message: str, at: float, deadline: float
    ) -> None:
        self._in_flight.wait(deadline)
        namespace = ref.namespace or "default"
        existing = self.state.get(ref.kind, ref.namespace, ref.name) or {}
        api_version = existing.get("apiVersion") or (
            "v1" if ref.kind == "Pod" else f"{GROUP}/{VERSION}"
        )
        # told on upstream's own object, where it is made from one
        api_version = upstream_groups.origin_of(existing) or api_version
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
            "reportingInstance": self.instance,
            "action": reason,
            "eventTime": micro_time(at),
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            kubeapi.request(self.api, "POST", f"/api/v1/namespaces/{namespace}/events", body)
        except Exception as exc:
            log.debug("event %s on %s/%s not recorded: %s", reason, namespace, ref.name, exc)
