"""The live backend's status writer: PodGroup and Queue statuses, pods' nominations and
PodScheduled conditions, the conditions on upstream's PodGroups, and the statuses of
Volcano's PodGroups and Queues in Volcano's fields (``kbatch.cluster.volcano``), written in order on
one thread, each status after the binds in flight that it counts (a bounded wait). A
status of an object still queued is replaced by the newer one, in its place; a failed
write is logged (an outage once per interval: the next session writes again)."""

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kbatch import kubeapi
from kbatch.api import GROUP, VERSION
from kbatch.api.podgroup import PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.cluster import upstream_groups, volcano
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.podgroup_status import INITIAL_STATUS
from kbatch.operators.scheduler.runtime import outage
from kbatch.operators.scheduler.runtime.binder import BindsInFlight
from kbatch.operators.scheduler.runtime.upstream import UpstreamGroups
from kbatch.operators.scheduler.runtime.writer import LatestStatuses, OrderedWriter

log = logging.getLogger("kbatch.kube")


def status_path(namespace: str, name: str) -> str:
    """A PodGroup's status subresource."""
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups/{name}/status"


class StatusWriter:
    """Statuses and conditions, in order on one writer thread."""

    def __init__(
        self,
        api: kubeapi.ApiClient,
        state: ClusterState,
        may_write: Callable[[], bool],
        in_flight: BindsInFlight,
        failures: outage.FailureReport,
        upstream: UpstreamGroups | None,
    ) -> None:
        self.api = api
        self.state = state
        self.upstream = upstream
        self.may_write = may_write
        self.writes = OrderedWriter("status writes")
        self.statuses = LatestStatuses()  # PodGroup and Queue statuses queued on writes
        self._in_flight = in_flight
        self._failures = failures
        # PodGroups seen without a phase, for the next session's end: status path ->
        # the resourceVersion seen (``initialise_pod_group_status``)
        self._without_phase: dict[str, str] = {}
        self._lock = threading.Lock()

    def nominate(self, task: TaskInfo, node: str | None) -> None:
        """The pod's status.nominatedNodeName (as kube-scheduler writes it for a
        preemptor), in order with status writes."""
        path = f"/api/v1/namespaces/{task.namespace}/pods/{task.name}/status"
        self.writes.submit(self._nominate, path, {"status": {"nominatedNodeName": node}})

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

    def update_pod_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        origin = upstream_groups.origin_of(self.state.get("PodGroup", namespace, name))
        if self.upstream is not None and origin is not None:
            self._update_upstream_group(namespace, name, status, origin)
            return
        path = status_path(namespace, name)
        if volcano.origin_of(self.state.get("PodGroup", namespace, name)) is not None:
            path = volcano.status_path("PodGroup", namespace, name)  # the same fields
        written = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        self._write_status(path, written, group=f"{namespace}/{name}")

    def tell_upstream_disruption(
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
            self.writes.submit(
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
        deadline = self._in_flight.deadline()
        self.writes.submit(self._write_after_binds, "PodGroup condition", path, patch, deadline)

    def _write_after_binds(self, what: str, path: str, patch: Any, deadline: float) -> None:
        self._in_flight.wait(deadline)
        if self.may_write():
            self._write(what, path, patch, kubeapi.STRATEGIC_MERGE_PATCH)

    def update_queue(self, name: str, status: QueueStatus) -> None:
        path = f"/apis/{GROUP}/{VERSION}/queues/{name}/status"
        written = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        held = self.state.get("Queue", "", name)
        if volcano.origin_of(held) is not None:
            # Volcano's QueueStatus fields, its state from the spec kbatch read
            closed = ((held or {}).get("spec") or {}).get("state") == "Closed"
            path = volcano.status_path("Queue", "", name)
            written = volcano.queue_status(written, closed)
        self._write_status(path, written)

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
            self.writes.submit(self._write_pod_condition, task, path, patch)

    def _write_pod_condition(self, task: TaskInfo, path: str, patch: dict[str, Any]) -> None:
        """The condition, if the pod still waits for a node when its turn comes: behind a
        bind burst's statuses that can be many seconds after the session, and a pod bound
        meanwhile (by a later session) would be told False on top of the API server's
        PodScheduled True, for nothing but an extra write of the pod."""
        if self.state.waits_for_a_node(task.namespace, task.name, task.uid):
            self._write("pod condition", path, patch, kubeapi.STRATEGIC_MERGE_PATCH)

    def initialise_pod_group_status(self, namespace: str, name: str, version: str) -> None:
        """Show ``Pending`` on a PodGroup seen without a phase (at ``version``), once the
        next session has ended: unless that session wrote a status of its own. On a restart
        with a backlog that session decides every group at once, and a thousand writes of
        ``Pending`` ahead of it would only compete with its caches' first lists."""
        with self._lock:
            self._without_phase[status_path(namespace, name)] = version

    def initial_statuses(self, decided: set[str]) -> None:
        """After a session: Pending on the groups seen without a phase whose status it did
        not write (``decided``: the status paths it did)."""
        with self._lock:
            waiting, self._without_phase = self._without_phase, {}
        for path, version in waiting.items():
            if path not in decided:
                self.writes.submit(self._write_initial_status, path, version)

    def _write_initial_status(self, path: str, version: str) -> None:
        """Pending, if the group is still at ``version``: any change since (a status
        written meanwhile) makes it a 409, and this write none."""
        if self.statuses.queued(path) or not self.may_write():
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
        waiting at most ``binder.EVENT_WAIT_FOR_BINDS`` from now. A status of the same object still
        queued is replaced by this one, in its place."""
        deadline = self._in_flight.deadline()
        if not self.statuses.put(path, group, status):
            self.writes.submit(self._patch_status, path, deadline)

    def _patch_status(self, path: str, deadline: float) -> None:
        self._in_flight.wait(deadline)
        status = self.statuses.take(path)
        if status is None:
            return
        # The whole status, replaced: a merge patch would keep the keys a map no longer
        # has (a queue's allocated memory after its last pod asking memory finished).
        patch = [{"op": "add", "path": "/status", "value": status}]
        self._write("status", path, patch, kubeapi.JSON_PATCH)
