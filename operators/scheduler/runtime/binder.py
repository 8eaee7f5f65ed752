"""The live backend's binder: a session's binds, sent on worker threads once the session
ends (the first session's first few as they are committed), each pod *assumed* bound in the cache
meanwhile (so the next session does not place it again); a failed bind forgets the
assumption and says why in an event. Statuses and events wait (bounded) for the binds
in flight (``BindsInFlight``)."""

import functools
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from kbatch import kubeapi
from kbatch.cluster import devices, volume_records, volumes
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.operators.scheduler.runtime import claim_writes, outage

log = logging.getLogger("kbatch.kube")
EVENT_WAIT_FOR_BINDS = 30.0  # a status or event waits at most this long for binds in flight
# The binder's first session sends the binds of its statements as they commit until it
# has sent this many so (a whole statement's at a time, so it may send a few more): the
# first gangs of the backlog found at a start (a restart) start at once, not after the
# session has placed every other gang; the rest wait for its end (``Binder``).
EARLY_BINDS = 100

# How an event is recorded: (object, type, reason, message, when it happened).
Record = Callable[[ObjectRef, str, str, str, float], None]


class BindsInFlight:
    """How many binds are in flight; statuses and events wait (bounded) until there are
    none."""

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

    def deadline(self) -> float:
        """The latest a status or event recorded now waits until (monotonic)."""
        return time.monotonic() + EVENT_WAIT_FOR_BINDS

    def wait(self, deadline: float) -> None:
        """Until no bind is in flight, ``deadline`` at most (monotonic)."""
        with self._idle:
            self._idle.wait_for(lambda: self._value == 0, max(deadline - time.monotonic(), 0.0))


def still_leading(
    may_write: Callable[[], bool], state: ClusterState, what: str, namespace: str, name: str
) -> bool:
    """May a bind or an eviction of the pod be sent? Not once the lead is lost: then the
    pod is as the watch shows it, and the new leader decides about it."""
    if may_write():
        return True
    state.forget(namespace, name)
    log.info("not sending the %s of %s/%s: no longer the leader", what, namespace, name)
    return False


class Binder:
    """A session's binds: assumed at once, sent when it ends (``flush``), but for the
    first session's first ``early`` or so, sent as their statements commit
    (``committed``). Only the first session's: the binds a session sends while it runs
    compete with it for the CPU and go several times slower, so a gang of a hundred
    pods sent so is partly bound for over a second; the first session (after a start,
    on a backlog) may run for seconds, so its first gangs are worth that, while every
    later one is short and starts only once the binds before it are answered
    (``SchedulerLoop``), with no bind to overlap."""

    def __init__(
        self,
        api: kubeapi.ApiClient,
        state: ClusterState,
        workers: int,
        may_write: Callable[[], bool],
        holds: outage.Holds,
        record: Record,
        early: int = EARLY_BINDS,
    ) -> None:
        self.api = api
        self.state = state
        self.may_write = may_write
        self.in_flight = BindsInFlight()
        self._holds = holds
        self._record = record
        self._binds = ThreadPoolExecutor(workers, thread_name_prefix="kbatch-bind")
        # A session's binds, sent when it ends: the bind workers do not compete for the
        # interpreter with the session still placing the rest. Binds per second in a burst
        # against a bare loop (tests/e2e/bench_binds.py, 2 cores): median 0.72 over 9
        # rounds when sent at once, 0.83 over 13 rounds when sent at the end.
        self._unsent: list[tuple[TaskInfo, str]] = []
        # The first session's first ``early`` binds go at once: so few compete little;
        # none of a later session's (``session_ended``).
        self._early_left = early
        self._taken = 0  # binds the session running has committed (``committed``)

    def shutdown(self) -> None:
        """Binds not yet sent are dropped, those being sent finish."""
        self._binds.shutdown(wait=True, cancel_futures=True)

    def bind(self, task: TaskInfo, node: str) -> None:
        self._holds.resend(task.namespace, task.name, task.uid)
        self.state.assume_bound(task.namespace, task.name, node)
        self.in_flight.add(1)
        self._unsent.append((task, node))

    def committed(self, binds: list[decided.Bind]) -> None:
        """A statement's binds, committed before its session ends: assumed at once, and
        sent at once, all of them, while the first session has sent fewer than ``early``
        so (the rest wait for ``flush``). ``session_ended`` says how many came so: its
        outcome lists them too."""
        for bind in binds:
            self.bind(bind.task, bind.node)
        self._taken += len(binds)
        if self._early_left > 0:
            self._early_left -= len(binds)
            self.flush()

    def session_ended(self) -> int:
        """How many of the ended session's binds came as committed (``committed``):
        the first ones of its outcome, not to be bound again."""
        taken, self._taken, self._early_left = self._taken, 0, 0
        return taken

    def flush(self) -> None:
        """Send the binds not yet sent."""
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

    def _bind_done(self, namespace: str, name: str, done: "Future[None]") -> None:
        if done.cancelled():  # at shutdown: never sent
            self._unbound(namespace, name)
        else:
            self.in_flight.add(-1)

    def _unbound(self, namespace: str, name: str) -> None:
        """A bind the session made that is never sent: the pod is as the watch shows it."""
        self.state.forget(namespace, name)
        self.in_flight.add(-1)

    def _post_binding(self, namespace: str, name: str, uid: str, node: str, at: float) -> None:
        if not still_leading(self.may_write, self.state, "bind", namespace, name):
            return
        try:
            self._write_volumes(namespace, name, node)
            self._write_devices(namespace, name, uid, node)
        except (VolumeNotReady, claim_writes.ClaimNotReady) as exc:
            self._bind_failed(namespace, name, uid, node, exc, at)
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
        self._record(
            ObjectRef("Pod", namespace, name),
            "Normal",
            "Scheduled",
            decided.scheduled_message(f"{namespace}/{name}", node),
            at,
        )

    def _write_volumes(self, namespace: str, name: str, node: str) -> None:
        """Before the pod's bind: bind each of its claims bound on first use to the PV
        chosen for it on ``node``, or select ``node`` for its provisioner
        (``volumes.bind_writes``, as kube-scheduler's VolumeBinding does); VolumeNotReady
        when one cannot be had there, or its write fails."""
        try:
            writes = self.state.volume_writes(namespace, name, node)
        except volumes.NoVolume as exc:
            raise VolumeNotReady(str(exc)) from exc
        for write in writes:
            claim = write.claim
            try:
                if write.volume:
                    kubeapi.request(
                        self.api,
                        "PATCH",
                        f"/api/v1/persistentvolumes/{write.volume}",
                        _claimed(write),
                        content_type=kubeapi.MERGE_PATCH,
                    )
                else:
                    annotations = {volume_records.SELECTED_NODE: node}
                    kubeapi.request(
                        self.api,
                        "PATCH",
                        f"/api/v1/namespaces/{claim.namespace}/persistentvolumeclaims/{claim.name}",
                        {"metadata": {"annotations": annotations}},
                        content_type=kubeapi.MERGE_PATCH,
                    )
            except Exception as exc:
                for unsent in writes[writes.index(write) :]:
                    self.state.forget_volume(unsent)
                raise VolumeNotReady(f'claim "{claim.name}" on {node}: {exc}') from exc

    def _write_devices(self, namespace: str, name: str, uid: str, node: str) -> None:
        """Before the pod's bind (after its volumes'): allocate each of its resource claims
        not allocated on ``node`` and reserve each for the pod (``devices.bind_writes``,
        as kube-scheduler's DynamicResources PreBind does); ClaimNotReady when one
        cannot be allocated there, or its write fails."""
        try:
            writes = self.state.device_writes(namespace, name, node)
        except devices.NoDevice as exc:
            raise claim_writes.ClaimNotReady(str(exc)) from exc
        for at, write in enumerate(writes):
            try:
                claim_writes.write_claim(self.api, write, name, uid)
            except claim_writes.ClaimNotReady:
                for unsent in writes[at:]:
                    self.state.forget_devices(unsent)
                raise

    def _bind_failed(
        self, namespace: str, name: str, uid: str, node: str, exc: Exception, at: float
    ) -> None:
        """No answer: the pod is held for its back-off. Refused: it is as the watch shows
        it (bound already, on a 409). Either way, but the 409, an event says why."""
        if isinstance(exc, kubeapi.Unreachable):
            # the binds in flight count this one, and wait for an answer too
            self._holds.no_answer("bind", (namespace, name, uid), exc, self.in_flight.value)
        else:
            if isinstance(exc, kubeapi.ApiError):
                self._holds.answered("bind", (namespace, name, uid))
            if isinstance(exc, kubeapi.ApiError) and exc.status == 409 and not _gated(exc):
                self._bound_already(namespace, name, node)
                return
            self.state.forget(namespace, name)
            log.warning("bind of %s/%s to %s failed: %s", namespace, name, node, exc)
        self._record(
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


class VolumeNotReady(Exception):
    """A claim of the pod could not be bound or provisioned on its node: not a bind."""


def _claimed(write: volumes.VolumeWrite) -> dict[str, object]:
    """The merge patch that binds ``write``'s PV to its claim, made against the PV's
    version the choice read (a PV claimed meanwhile refuses it: 409)."""
    claim = write.claim
    reference = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": claim.namespace,
        "name": claim.name,
        "uid": claim.uid,
    }
    metadata: dict[str, object] = {
        "annotations": {volume_records.BOUND_BY_CONTROLLER: "yes"},
    }
    if write.resource_version:
        metadata["resourceVersion"] = write.resource_version
    return {"metadata": metadata, "spec": {"claimRef": reference}}


def _gated(exc: Exception) -> bool:
    """A 409 that refuses the binding of a pod still held by its scheduling gates, not
    one of a pod bound already. kbatch places no gated pod (its record has the gates);
    should one be refused so all the same, it is not to be taken for bound, which would
    hold its room, and count it in its gang, until the pod is gone."""
    return "schedulingGates" in str(exc)
