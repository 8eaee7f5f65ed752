"""The live Kubernetes backend: a session's outcome applied to a real cluster (binds,
evictions, nominations, statuses, events: ``apply``, in that order).

Each runs on a worker thread, so a session never waits for the API server: binds
concurrently, the first session's first ones as it commits them (``binder``), evictions on
their own workers, not queued behind a bind burst (``evictor``), status writes in order
on one thread (``status_writer``), events on another (``event_recorder``); statuses and
events wait, bounded, for the binds in flight.

A bind or an eviction that gets no answer (the API server is unreachable) is not sent
again by every session: the pod stays assumed so for a back-off per pod (1 s doubling to
30 s, reset by a success), or until the server answers a later request; then it is as
the watch shows it and a session decides about it anew. Failures for want of an answer
are logged once per interval with how many wait, not once per request (``outage``).

A bind or an eviction is sent only while ``may_write()`` (this replica leads): one
queued when the lead was lost is dropped, not sent beside the new leader's.
"""

import dataclasses
import logging
import time
from collections.abc import Callable

from kbatch import kubeapi
from kbatch.api.podgroup import PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.interface import ObjectRef, Outcome, Snapshot
from kbatch.operators.scheduler.runtime import outage
from kbatch.operators.scheduler.runtime.binder import EARLY_BINDS, Binder
from kbatch.operators.scheduler.runtime.disruption import Disruptions
from kbatch.operators.scheduler.runtime.event_recorder import EventRecorder
from kbatch.operators.scheduler.runtime.evictor import Evictor
from kbatch.operators.scheduler.runtime.status_writer import StatusWriter, status_path
from kbatch.operators.scheduler.runtime.upstream import UpstreamGroups

log = logging.getLogger("kbatch.kube")


class KubeBackend:
    """The core's Backend interface over the Kubernetes API and a watched ClusterState:
    its binder, evictor, status writer and event recorder, sharing the holds of pods
    that got no answer and the count of binds in flight."""

    def __init__(
        self,
        api: kubeapi.ApiClient,
        state: ClusterState,
        bind_workers: int = 16,
        evict_workers: int = 4,
        may_write: Callable[[], bool] = lambda: True,
        clock: Callable[[], float] = time.monotonic,  # when failures are told
        upstream: UpstreamGroups | None = None,  # upstream's PodGroups, where watched
        early_binds: int = EARLY_BINDS,  # the first session's binds sent as it commits them
    ) -> None:
        self.api = api
        self.state = state
        self.upstream = upstream
        self.may_write = may_write
        failures = outage.FailureReport(log, clock=clock)
        # the api's count of requests answered: a held pod is let go once one sent after
        # its bind or eviction is answered
        self.exchanges = kubeapi.exchanges_of(api)
        self._holds = outage.Holds(state, failures, self.exchanges)
        self.binder = Binder(
            api, state, bind_workers, may_write, self._holds, self.record, early_binds
        )
        in_flight = self.binder.in_flight
        self.status = StatusWriter(api, state, may_write, in_flight, failures, upstream)
        self.evictor = Evictor(
            api,
            state,
            evict_workers,
            may_write,
            self._holds,
            Disruptions(api, failures),
            self.record,
            self.status.tell_upstream_disruption,
        )
        self.events = EventRecorder(api, state, in_flight, self.evictor.evictions)

    def snapshot(self) -> Snapshot:
        self._holds.end()
        return self.state.snapshot()

    def binds_in_flight(self) -> bool:
        return self.binder.in_flight.value > 0

    def groups_being_written(self) -> frozenset[str]:
        """PodGroups (namespace/name) whose status a session decided and that is queued:
        that session has seen them (the status waits for the binds in flight)."""
        return self.status.statuses.groups()

    def shutdown(self) -> None:
        """Stop: binds and evictions not yet sent are dropped (the next leader decides
        again; a session still running drops its binds at ``flush``), those being sent
        finish; status writes and events are drained for a bounded time (``writer``).
        Call it before giving up the lead."""
        self.binder.shutdown()
        self.evictor.shutdown()
        self.status.writes.drain()
        self.events.writer.drain()
        self.status.writes.shutdown()
        self.events.writer.shutdown()

    def apply(self, outcome: Outcome) -> None:
        """Send a session's outcome, in one order: the binds (assumed in the state at once,
        sent on the bind workers), the evictions, the nominations, then the PodGroup and
        Queue statuses (written once the binds they count are out, within a bounded
        wait), then the events (likewise). The binds the binder was given as the
        session committed them (``committed``), the first of the outcome's, are not
        bound again."""
        taken = self.binder.session_ended()
        if taken:
            outcome = dataclasses.replace(outcome, binds=outcome.binds[taken:])
        decided.apply_in_order(self, outcome)
        self.status.initial_statuses({status_path(g.namespace, g.name) for g in outcome.pod_groups})

    def committed(self, binds: list[decided.Bind]) -> None:
        """A statement's binds as its session commits them (``Session.committed_binds``):
        the first session's first few are sent at once (``Binder.committed``)."""
        self.binder.committed(binds)

    def bind(self, task: TaskInfo, node: str) -> None:
        self.binder.bind(task, node)

    def flush(self) -> None:
        self.binder.flush()
        self.evictor.evictions.clear()  # Evict outcomes the session never told about

    def evict(self, task: TaskInfo, reason: str, disruption: str) -> None:
        self.evictor.evict(task, reason, disruption)

    def nominate(self, task: TaskInfo, node: str | None) -> None:
        self.status.nominate(task, node)

    def update_pod_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        self.status.update_pod_group(namespace, name, status)

    def update_queue(self, name: str, status: QueueStatus) -> None:
        self.status.update_queue(name, status)

    def update_pod_condition(self, condition: decided.PodCondition) -> None:
        self.status.update_pod_condition(condition)

    def initialise_pod_group_status(self, namespace: str, name: str, version: str) -> None:
        self.status.initialise_pod_group_status(namespace, name, version)

    def record(
        self, ref: ObjectRef, type_: str, reason: str, message: str, at: float | None = None
    ) -> None:
        self.events.record(ref, type_, reason, message, at)
