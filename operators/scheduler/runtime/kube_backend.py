"""The live Kubernetes backend: a session's outcome applied to a real cluster (binds,
evictions, nominations, statuses, events: ``apply``, in that order).

Each runs on a worker thread, so a session never waits for the API server:
binds concurrently (a pod is *assumed* bound in the cache meanwhile, so the next
session does not place it again; a failed bind forgets the assumption and says
why in an event); evictions on their own workers, not queued behind a bind burst
(the victim is assumed Releasing meanwhile, so no later session picks more victims
for the same room); status writes in order on one thread, events on another.

A bind or an eviction that gets no answer (the API server is unreachable) is not sent
again by every session: the pod stays assumed so for a back-off per pod (1 s doubling to
30 s, reset by a success), or until the server answers a later request; then it is as
the watch shows it and a session decides about it anew. Failures for want of an answer
are logged once per interval with how many wait, not once per request.

A bind or an eviction is sent only while ``may_write()`` (this replica leads): one
queued when the lead was lost is dropped, not sent beside the new leader's. An eviction
marks the pod with the ``DisruptionTarget`` condition first, where the server's Jobs
read it (``disruption``). The ``Evict`` event the session records for a victim is sent
only once its DELETE has succeeded; a failed one gets a ``FailedEviction`` warning
instead.

An event carries ``eventTime``: the moment the session decided (a bind's moment is
when the session sent it, not when its event was written after the binds).
"""

import functools
import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from kbatch import kubeapi
from kbatch.api import GROUP, VERSION
from kbatch.api.podgroup import PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.cluster import upstream_groups
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.interface import ObjectRef, Outcome, Snapshot
from kbatch.operators.scheduler.core.framework.podgroup_status import INITIAL_STATUS
from kbatch.operators.scheduler.runtime import outage
from kbatch.operators.scheduler.runtime.disruption import Disruptions
from kbatch.operators.scheduler.runtime.upstream import UpstreamGroups
from kbatch.operators.scheduler.runtime.writer import LatestStatuses, OrderedWriter

log = logging.getLogger("kbatch.kube")
COMPONENT = "kbatch"
EVENT_WAIT_FOR_BINDS = 30.0  # a status or event waits at most this long for binds in flight


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


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(when: float) -> str:
    """An API MicroTime (an event's eventTime)."""
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _status_path(namespace: str, name: str) -> str:
    """A PodGroup's status subresource."""
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups/{name}/status"


def _succeeded(outcome: "Future[bool]") -> bool:
    return not outcome.cancelled() and outcome.exception() is None and outcome.result()


class KubeBackend:
    """The core's Backend interface over the Kubernetes API and a watched ClusterState."""

    def __init__(
        self,
        api: kubeapi.ApiClient,
        state: ClusterState,
        bind_workers: int = 16,
        evict_workers: int = 4,
        may_write: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,  # when failures are told
        upstream: UpstreamGroups | None = None,  # upstream's PodGroups, where watched
    ) -> None:
        self.api = api
        self.state = state
        self.upstream = upstream
        self.may_write = may_write
        self.instance = socket.gethostname()
        self._binds = ThreadPoolExecutor(bind_workers, thread_name_prefix="kbatch-bind")
        # A session's binds, sent when it ends: the bind workers do not compete for the
        # interpreter with the session still placing the rest. Binds per second in a burst
        # against a bare loop (tests/e2e/bench_binds.py, 2 cores): median 0.72 over 9
        # rounds when sent at once, 0.83 over 13 rounds when sent at the end.
        self._unsent: list[tuple[TaskInfo, str]] = []
        self._evictions = ThreadPoolExecutor(evict_workers, thread_name_prefix="kbatch-evict")
        # an eviction's outcome, until its Evict events are recorded: by pod, and by
        # PodGroup in the order the session evicted its pods
        self._evicted: dict[tuple[str, str, str], deque[Future[bool]]] = {}
        self._writes = OrderedWriter("status writes")
        self._statuses = LatestStatuses()  # PodGroup and Queue statuses queued on _writes
        # PodGroups seen without a phase, for the next session's end: status path ->
        # the resourceVersion seen (``initialise_pod_group_status``)
        self._without_phase: dict[str, str] = {}
        self._events = OrderedWriter("events")
        self._told = decided.EventFilter()  # the simulator's rule for repeats, too
        self._recent_lock = threading.Lock()
        self._in_flight = _Counter()
        self._failures = outage.FailureReport(log, clock=clock)
        self._holds = outage.Holds(state, self._failures)
        self._disruptions = Disruptions(api, self._failures)

    def snapshot(self) -> Snapshot:
        self._holds.end()
        return self.state.snapshot()

    def binds_in_flight(self) -> bool:
        return self._in_flight.value > 0

    def groups_being_written(self) -> frozenset[str]:
        """PodGroups (namespace/name) whose status a session decided and that is queued:
        that session has seen them (the status waits for the binds in flight)."""
        return self._statuses.groups()

    def shutdown(self) -> None:
        """Stop: binds and evictions not yet sent are dropped (the next leader decides
        again; a session still running drops its binds at ``flush``), those being sent
        finish; status writes and events are drained for a bounded time (``writer``).
        Call it before giving up the lead."""
        self._binds.shutdown(wait=True, cancel_futures=True)
        self._evictions.shutdown(wait=True, cancel_futures=True)
        self._writes.drain()
        self._events.drain()
        self._writes.shutdown()
        self._events.shutdown()

    def _still_leading(self, what: str, namespace: str, name: str) -> bool:
        if self.may_write():
            return True
        self.state.forget(namespace, name)
        log.info("not sending the %s of %s/%s: no longer the leader", what, namespace, name)
        return False

    # ----------------------------------------------------------------- a session's outcome
    def apply(self, outcome: Outcome) -> None:
        """Send a session's outcome, in one order: the binds (assumed in the state at once,
        sent on the bind workers), the evictions, the nominations, then the PodGroup and
        Queue statuses (written once the binds they count are out, within a bounded
        wait), then the events (likewise)."""
        decided.apply_in_order(self, outcome)
        self._initial_statuses({_status_path(g.namespace, g.name) for g in outcome.pod_groups})

    # ----------------------------------------------------------------- binds
    def bind(self, task: TaskInfo, node: str) -> None:
        self._holds.resend(task.namespace, task.name, task.uid)
        self.state.assume_bound(task.namespace, task.name, node)
        self._in_flight.add(1)
        self._unsent.append((task, node))

    def flush(self) -> None:
        unsent, self._unsent = self._unsent, []
        decided = time.time()
        for at, (task, node) in enumerate(unsent):
            try:
                sent = self._binds.submit(
                    self._post_binding, task.namespace, task.name, task.uid, node, decided
                )
            except RuntimeError:  # shut down meanwhile: the next leader decides again
                for dropped, _ in unsent[at:]:
                    self._unbound(dropped.namespace, dropped.name)
                break
            sent.add_done_callback(functools.partial(self._bind_done, task.namespace, task.name))
        with self._recent_lock:  # Evict outcomes the session never told about (it failed)
            self._evicted.clear()

    def _bind_done(self, namespace: str, name: str, done: "Future[None]") -> None:
        if done.cancelled():  # at shutdown: never sent
            self._unbound(namespace, name)
        else:
            self._in_flight.add(-1)

    def _unbound(self, namespace: str, name: str) -> None:
        """A bind the session made that is never sent: the pod is as the watch shows it."""
        self.state.forget(namespace, name)
        self._in_flight.add(-1)

    def _post_binding(self, namespace: str, name: str, uid: str, node: str, at: float) -> None:
        if not self._still_leading("bind", namespace, name):
            return
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name, "namespace": namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            kubeapi.request(
                self.api, "POST", f"/api/v1/namespaces/{namespace}/pods/{name}/binding", body
            )
        except Exception as exc:
            self._bind_failed(namespace, name, uid, node, exc, at)
            return
        self.state.confirmed(namespace, name)
        self._holds.answered("bind", (namespace, name, uid))
        self.record(
            ObjectRef("Pod", namespace, name),
            "Normal",
            "Scheduled",
            decided.scheduled_message(f"{namespace}/{name}", node),
            at,
        )

    def _bind_failed(
        self, namespace: str, name: str, uid: str, node: str, exc: Exception, at: float
    ) -> None:
        """No answer: the pod is held for its back-off. Refused: it is as the watch shows
        it (bound already, on a 409). Either way, but the 409, an event says why."""
        if isinstance(exc, kubeapi.Unreachable):
            # the binds in flight count this one, and wait for an answer too
            self._holds.no_answer("bind", (namespace, name, uid), exc, self._in_flight.value)
        else:
            if isinstance(exc, kubeapi.ApiError):
                self._holds.answered("bind", (namespace, name, uid))
            if isinstance(exc, kubeapi.ApiError) and exc.status == 409:
                self._bound_already(namespace, name, node)
                return
            self.state.forget(namespace, name)
            log.warning("bind of %s/%s to %s failed: %s", namespace, name, node, exc)
        self.record(
            ObjectRef("Pod", namespace, name),
            "Warning",
            decided.FAILED_SCHEDULING,
            decided.binding_rejected_message(str(exc)),
            at,
        )

    def _bound_already(self, namespace: str, name: str, node: str) -> None:
        """A 409: the pod has a node. Most likely this very bind's (a request whose answer
        was lost, a dying leader's same decision): no failure, the assumption holds
        until the watch shows it. Only if the watch shows another node is it forgotten."""
        watched = self.state.get("Pod", namespace, name) or {}
        bound_to = (watched.get("spec") or {}).get("nodeName")
        if bound_to and bound_to != node:
            self.state.forget(namespace, name)
            log.info("pod %s/%s was bound to %s meanwhile", namespace, name, bound_to)
            return
        self.state.confirmed(namespace, name)
        log.info("pod %s/%s was bound already (409)", namespace, name)

    def nominate(self, task: TaskInfo, node: str | None) -> None:
        """The pod's status.nominatedNodeName (as kube-scheduler writes it for a
        preemptor), in order with status writes."""
        path = f"/api/v1/namespaces/{task.namespace}/pods/{task.name}/status"
        self._writes.submit(self._nominate, path, {"status": {"nominatedNodeName": node}})

    def _nominate(self, path: str, patch: dict[str, Any]) -> None:
        if self.may_write():
            self._write("nomination", path, patch, kubeapi.MERGE_PATCH)

    def _write(self, what: str, path: str, patch: Any, content_type: str) -> None:
        """A status write; its failure is logged (an outage once per interval: the next
        session writes again), and a 404 (the object is gone) is none."""
        try:
            kubeapi.request(self.api, "PATCH", path, patch, content_type)
        except kubeapi.Unreachable as exc:
            self._failures.failed(what, "%s: the next session writes again", exc)
        except Exception as exc:
            if not (isinstance(exc, kubeapi.ApiError) and exc.status == 404):
                log.warning("%s %s failed: %s", what, path, exc)

    # ----------------------------------------------------------------- evictor
    def evict(self, task: TaskInfo, reason: str, disruption: str) -> None:
        self._holds.resend(task.namespace, task.name, task.uid)
        self.state.assume_releasing(task.namespace, task.name)
        outcome = self._evictions.submit(
            self._evict, task.namespace, task.name, task.uid, disruption
        )
        keys = [("Pod", task.namespace, task.name)]
        if task.job and not task.job.startswith("pod:"):  # a PodGroup's job: namespace/name
            namespace, _, group = task.job.partition("/")
            keys.append(("PodGroup", namespace, group))
        with self._recent_lock:
            for key in keys:
                self._evicted.setdefault(key, deque()).append(outcome)
        if len(keys) > 1:
            self._tell_upstream_disruption(keys[1][1], keys[1][2], task, disruption or reason)

    def _evict(self, namespace: str, name: str, uid: str, disruption: str) -> bool:
        """Mark the pod with the DisruptionTarget condition saying ``disruption`` (where
        the server's Jobs read it), then DELETE it; did that evict it?"""
        if not self._still_leading("eviction", namespace, name):
            return False
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        try:
            self._disruptions.mark(namespace, name, uid, disruption)
            kubeapi.request(self.api, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)
        except Exception as exc:
            if isinstance(exc, kubeapi.Unreachable):
                self._holds.no_answer("eviction", (namespace, name, uid), exc)
            else:
                self.state.forget(namespace, name)
                if isinstance(exc, kubeapi.ApiError) and exc.status in (404, 409):
                    return False  # gone already, or another pod of that name now
                log.warning("eviction of %s/%s failed: %s", namespace, name, exc)
            message = f"Eviction of {namespace}/{name} failed: {exc}"
            self.record(
                ObjectRef("Pod", namespace, name), "Warning", decided.FAILED_EVICTION, message
            )
            return False
        self.state.confirmed(namespace, name)
        self._holds.answered("eviction", (namespace, name, uid))
        return True

    def _eviction_of(self, ref: ObjectRef) -> "Future[bool] | None":
        """The eviction an Evict event on ``ref`` tells about (the oldest not yet told)."""
        key = (ref.kind, ref.namespace, ref.name)
        with self._recent_lock:
            pending = self._evicted.get(key)
            if not pending:
                return None
            outcome = pending.popleft()
            if not pending:
                del self._evicted[key]
            return outcome

    # ----------------------------------------------------------------- status
    def update_pod_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        origin = upstream_groups.origin_of(self.state.get("PodGroup", namespace, name))
        if self.upstream is not None and origin is not None:
            self._update_upstream_group(namespace, name, status, origin)
            return
        path = _status_path(namespace, name)
        written = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        self._write_status(path, written, group=f"{namespace}/{name}")

    def _tell_upstream_disruption(
        self, namespace: str, group: str, task: TaskInfo, why: str
    ) -> None:
        """An upstream group one of whose pods is evicted is told so: DisruptionTarget,
        reason PreemptionByScheduler, once, in order on the writer; ``why`` is the pod's
        own DisruptionTarget message (who takes the room), else the eviction's reason."""
        origin = upstream_groups.origin_of(self.state.get("PodGroup", namespace, group))
        if self.upstream is None or origin is None or not self.may_write():
            return
        message = f"kbatch evicts pod {task.namespace}/{task.name}" + (f": {why}" if why else "")
        condition = self.upstream.disruption(namespace, group, message)
        if condition is not None:
            path = upstream_groups.status_path(namespace, group, origin)
            patch = {"status": {"conditions": [condition]}}
            self._writes.submit(
                self._write, "PodGroup condition", path, patch, kubeapi.STRATEGIC_MERGE_PATCH
            )

    def _update_upstream_group(
        self, namespace: str, name: str, status: PodGroupStatus, api_version: str
    ) -> None:
        """kbatch's status of an upstream PodGroup is kept beside it (upstream has no field
        for it); its condition is merged into the upstream object's status by type, in
        order on the writer, after the binds in flight (which it tells of)."""
        assert self.upstream is not None
        condition = self.upstream.keep_status(namespace, name, status)
        if condition is None or not self.may_write():
            return
        path = upstream_groups.status_path(namespace, name, api_version)
        patch = {"status": {"conditions": [condition]}}
        deadline = time.monotonic() + EVENT_WAIT_FOR_BINDS
        self._writes.submit(self._write_after_binds, "PodGroup condition", path, patch, deadline)

    def _write_after_binds(self, what: str, path: str, patch: Any, deadline: float) -> None:
        self._wait_for_binds(deadline)
        if self.may_write():
            self._write(what, path, patch, kubeapi.STRATEGIC_MERGE_PATCH)

    def update_queue(self, name: str, status: QueueStatus) -> None:
        path = f"/apis/{GROUP}/{VERSION}/queues/{name}/status"
        self._write_status(path, status.model_dump(mode="json", by_alias=True, exclude_none=True))

    def update_pod_condition(self, condition: decided.PodCondition) -> None:
        """The pod's PodScheduled condition, merged into its status by type (the others
        are the kubelet's), on the writer after the binds in flight."""
        task = condition.task
        path = f"/api/v1/namespaces/{task.namespace}/pods/{task.name}/status"
        written = {
            "type": decided.POD_SCHEDULED,
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        patch = {"status": {"conditions": [written]}}
        if self.may_write():
            self._writes.submit(
                self._write, "pod condition", path, patch, kubeapi.STRATEGIC_MERGE_PATCH
            )

    def initialise_pod_group_status(self, namespace: str, name: str, version: str) -> None:
        """Show ``Pending`` on a PodGroup seen without a phase (at ``version``), once the
        next session has ended: unless that session wrote a status of its own. On a restart
        with a backlog that session decides every group at once, and a thousand writes of
        ``Pending`` ahead of it would only compete with its caches' first lists."""
        with self._recent_lock:
            self._without_phase[_status_path(namespace, name)] = version

    def _initial_statuses(self, decided: set[str]) -> None:
        """After a session: Pending on the groups seen without a phase whose status it did
        not write (``decided``: the status paths it did)."""
        with self._recent_lock:
            waiting, self._without_phase = self._without_phase, {}
        for path, version in waiting.items():
            if path not in decided:
                self._writes.submit(self._write_initial_status, path, version)

    def _write_initial_status(self, path: str, version: str) -> None:
        """Pending, if the group is still at ``version``: any change since (a status
        written meanwhile) makes it a 409, and this write none."""
        if self._statuses.queued(path) or not self.may_write():
            return
        patch: dict[str, Any] = {"status": INITIAL_STATUS}
        if version:
            patch["metadata"] = {"resourceVersion": version}
        try:
            kubeapi.request(self.api, "PATCH", path, patch, kubeapi.MERGE_PATCH)
        except kubeapi.ApiError as exc:
            if exc.status not in (404, 409):
                self._failures.failed("status", "initial status %s: %s", path, exc)

    def _write_status(self, path: str, status: dict[str, Any], group: str | None = None) -> None:
        """In order on the writer; after the binds in flight (which the status counts),
        waiting at most EVENT_WAIT_FOR_BINDS from now. A status of the same object still
        queued is replaced by this one, in its place."""
        deadline = time.monotonic() + EVENT_WAIT_FOR_BINDS
        if not self._statuses.put(path, group, status):
            self._writes.submit(self._patch_status, path, deadline)

    def _patch_status(self, path: str, deadline: float) -> None:
        self._wait_for_binds(deadline)
        status = self._statuses.take(path)
        if status is None:
            return
        # The whole status, replaced: a merge patch would keep the keys a map no longer
        # has (a queue's allocated memory after its last pod asking memory finished).
        patch = [{"op": "add", "path": "/status", "value": status}]
        self._write("status", path, patch, kubeapi.JSON_PATCH)

    def _wait_for_binds(self, deadline: float) -> None:
        """Until no bind is in flight, ``deadline`` at most (monotonic)."""
        self._in_flight.wait_idle(max(deadline - time.monotonic(), 0.0))

    # ----------------------------------------------------------------- events
    def record(
        self, ref: ObjectRef, type_: str, reason: str, message: str, at: float | None = None
    ) -> None:
        """Send an event (``at``: when it happened; now by default), unless the same was
        sent lately; an Evict event once its eviction has succeeded."""
        at = time.time() if at is None else at
        outcome = self._eviction_of(ref) if reason == decided.EVICT else None
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
        with self._recent_lock:
            event = decided.Event(ref, type_, reason, message)
            if not self._told.fresh((ref, uid), event, time.monotonic()):
                return
        # binds first (events are for people), for at most EVENT_WAIT_FOR_BINDS from
        # now: a deadline per event, not a wait per event in turn on the one thread
        deadline = time.monotonic() + EVENT_WAIT_FOR_BINDS
        self._events.submit(self._event, ref, type_, reason, message, at, deadline)

    def _event(
        self, ref: ObjectRef, type_: str, reason: str, message: str, at: float, deadline: float
    ) -> None:
        self._wait_for_binds(deadline)
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
