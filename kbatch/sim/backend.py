"""The simulated backend: a ClusterState that plays API server and kubelet.

It implements the scheduler core's ``Backend`` interface, as the live Kubernetes
backend (``operators/scheduler/runtime/kube_backend.py``) does:

- bind: the pod gets ``spec.nodeName``, ``status.phase: Running`` and a
  ``startTime`` at once (simulated pods start the moment they are bound), and a
  ``Scheduled`` event; first, its claims bound on first use are given a PV or a
  selected node, and when none may be had the bind is rejected
  (``kbatch.sim.volume_binds``); it runs for its ``kbatch.io/sim-duration``, or fails
  ``DeadlineExceeded`` once active for its ``spec.activeDeadlineSeconds``;
- evict: the pod gets a ``deletionTimestamp`` (it is Releasing and still holds
  its node) and is removed ``spec.terminationGracePeriodSeconds`` later —
  **0 when the pod does not set it** (not Kubernetes' 30 s: a simulated
  container stops at once), so by default at the next tick;
- PodGroup and Queue status writes replace the objects' status; a PodGroup whose
  phase changes gets an event (reason: the new phase);
- events carry the simulated time and are deduplicated: an event identical to
  the last one for the same object is not repeated.

It also keeps what the API would forget: when each object was created, each
pod's evictions, and the pods removed during the run (reported with phase
``Failed``, as the kubelet ends a deleted pod that had not finished). Finished work
leaves the state once it has settled, kept as compact rows (``kbatch.sim.departures``).

For the runner's jumps over quiet ticks it counts its writes (``changes``), keeps
the pods' finish and removal times in a heap (``kbatch.sim.timers``), and its
events know when one may be recorded again (``kbatch.sim.events``).
"""

from collections.abc import Callable

from pydantic import BaseModel

from kbatch.api.podgroup import PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.interface import ObjectRef, Outcome, Snapshot
from kbatch.sim import claim_binds, clock, departures, manifests, timers, volume_binds
from kbatch.sim.events import REJECTED as REJECTED  # (the admission's and output's)
from kbatch.sim.events import EventLog
from kbatch.sim.pod_objects import (
    Object,
    PodKey,
    deadline_end,
    deadline_exceeded,
    group_of,
    object_ref,
    owning_jobs,
    pod_key,
    told_disruption,
    with_condition,
)
from kbatch.sim.timers import PodTimes as PodTimes  # (the backend's record of a pod)
from kbatch.sim.touched import Touched as Touched  # (what the controllers look at)

FINISHED = ("Succeeded", "Failed")


def uid_of(number: int) -> str:
    """The uid numbered ``number``, as ``str(uuid.UUID(int=number))`` spells it (the
    simulator's uids count up from 1): its 32 hex digits in groups of 8-4-4-4-12,
    formatted directly, not through a UUID object made for each object created."""
    digits = f"{number:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


class SimBackend:
    """ClusterState plus the side effects a scheduler sends; ``changes`` counts real ones.
    Of the state's shortcuts (``state.shortcuts``) it reads ``hand_over_writes`` (off:
    the state copies every object the simulator writes) and ``hand_over_statuses`` (off:
    a status it writes is validated again from its dump, as the API server's would be;
    on: the model it was dumped from is handed over with it)."""

    def __init__(
        self, state: ClusterState, sim_clock: clock.SimClock, history: bool = True
    ) -> None:
        self.state = state
        self.history = history  # False: no record of what is gone (``runner.Options``)
        self._hand_over = state.shortcuts.hand_over_writes
        self._hand_over_statuses = state.shortcuts.hand_over_statuses
        self.clock = sim_clock
        self.pods: dict[PodKey, PodTimes] = {}  # (of the pods in the state)
        self._seen = 0  # pods seen so far (their ``order``)
        self.departed = departures.Departed(history=history)
        # "Kind ns/name" -> simulated time (for the timeline; not kept without history)
        self.created_at: dict[str, float] = {}
        self.changes = 0
        self.last_snapshot: Snapshot | None = None
        self.touched = Touched()
        self._volumes = volume_binds.VolumeBinds(state)  # (remade by ``apply``)
        self.group_pods: dict[tuple[str, str], set[str]] = {}  # names, kept as pods come and go
        self._uids = 0
        # Objects' uids by (kind, name), then namespace, as events ask for them: every
        # session repeats its waiting groups' events; dropped when an object of that kind
        # and name is made or removed (the only writes that change a uid).
        self._uids_by_ref: dict[tuple[str, str], dict[str, str]] = {}
        self.events = EventLog(history)
        self.event_log = self.events.entries
        self._finishing = timers.pod_alarms(self.pods, "finish_at")
        self._releasing = timers.pod_alarms(self.pods, "release_at")

    def changed(self) -> None:
        """Count a write (the runner does not jump over a tick that made one)."""
        self.changes += 1

    def _times(self, key: PodKey) -> PodTimes:
        """What the simulator knows of pod ``key`` (made when first asked)."""
        times = self.pods.get(key)
        if times is None:
            times = self.pods[key] = PodTimes(order=self._seen)
            self._seen += 1
        return times

    def let_go_settled(self, may_go: Callable[[Object], bool]) -> set[str]:
        """Finished work the snapshots leave out leaves the state (``departures``); the
        uids of the Jobs that owned pods of it."""
        return departures.let_go_settled(self, may_go)

    def forget_object(self, kind: str, namespace: str, name: str) -> None:
        """An object left the state for good: its uid as events look it up goes (when it
        was created stays: the run's figures and tests read it)."""
        self._uids_by_ref.pop((kind, name), None)

    # ----------------------------------------------------------------- the API server
    def snapshot(self) -> Snapshot:
        """A snapshot for a session; the last one is kept, as that session left it."""
        self.last_snapshot = self.state.snapshot()
        return self.last_snapshot

    def create(self, obj: Object, owned: bool = False, created: str | None = None) -> None:
        """Create or replace ``obj`` as the API server would: uid and creationTimestamp
        on creation (kept on replacement), its namespace made if missing. ``owned``: the
        caller made ``obj`` for this and changes no part of it (the state keeps it as it
        is, not a copy: the Job controller's pods). ``created``: the creationTimestamp
        to give it, made or replaced (an object brought from a live cluster keeps its own)."""
        kind, metadata = obj["kind"], obj["metadata"]
        namespace = metadata.get("namespace", "")
        if namespace and self.state.get("Namespace", "", namespace) is None:
            self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        existing = self.state.get(kind, namespace, metadata["name"])
        identity = self.identity(existing)
        if created is not None:
            identity["creationTimestamp"] = created
        obj = {**obj, "metadata": {**metadata, **identity}}
        if kind == "Pod":
            obj = self._started_if_bound(obj, existing)
        self._uids_by_ref.pop((kind, metadata["name"]), None)
        self.state.apply(obj, owned=owned and self._hand_over)
        self.changed()
        if existing is None and self.history:
            self.created_at[manifests.ref_of(obj)] = self.clock.now
        self.touched.created(kind, obj, existing is None)
        if kind == "Pod":
            self._track_pod(obj, existing)
            self._pod_written(obj)
        elif kind == "PodGroup":
            self.departed.forget_group((namespace, metadata["name"]))
            self.touched.groups.add((namespace, metadata["name"]))
            self.touched.holding.add((namespace, metadata["name"]))

    def missing_priority_class(self, pod: Object) -> str | None:
        """Why the API server's priority admission would refuse ``pod`` (None: it would not)."""
        name = (pod.get("spec") or {}).get("priorityClassName")
        if not name or self.state.get("PriorityClass", "", name) is not None:
            return None
        return f"spec.priorityClassName: no PriorityClass named {name!r}"

    def refusal(self, obj: Object) -> str | None:
        """Why the API server itself refuses ``obj`` (None: it does not); a Warning event
        ``AdmissionRejected`` on it says so, as the webhooks' refusals do."""
        why = self.missing_priority_class(obj) if obj["kind"] == "Pod" else None
        if why is not None:
            self.record(object_ref(obj), "Warning", REJECTED, why)
        return why

    def last_refusal(self, obj: Object) -> str:
        """The message of the last ``AdmissionRejected`` event on ``obj``."""
        ref = object_ref(obj)
        for event in reversed(self.event_log):
            if event.reason == REJECTED and (event.kind, event.namespace, event.name) == (
                ref.kind,
                ref.namespace,
                ref.name,
            ):
                return event.message
        return "refused by admission"

    def missing_node(self, pod: Object) -> str | None:
        """The node a pod is bound to, when no such node exists (the API server allows it)."""
        node = (pod.get("spec") or {}).get("nodeName")
        return node if node and self.state.get("Node", "", node) is None else None

    def identity(self, existing: Object | None) -> dict[str, str]:
        """uid and creationTimestamp: ``existing``'s, or new ones (uids count up from 1)."""
        if existing is not None:
            old = existing["metadata"]
            return {"uid": old["uid"], "creationTimestamp": old["creationTimestamp"]}
        self._uids += 1
        return {
            "uid": uid_of(self._uids),
            "creationTimestamp": clock.timestamp(self.clock.now, self.clock.keep_timestamps),
        }

    def _started_if_bound(self, pod: Object, existing: Object | None) -> Object:
        """A pod created with ``spec.nodeName`` is already bound, and so running."""
        status = dict(pod.get("status") or {})
        if existing is not None and "status" not in pod:
            status = dict(existing.get("status") or {})
        bound = (pod.get("spec") or {}).get("nodeName")
        if bound and status.get("phase", "Pending") == "Pending":
            status["phase"] = "Running"
        if status.get("phase") == "Running" and "startTime" not in status:
            status["startTime"] = clock.timestamp(self.clock.now, self.clock.keep_timestamps)
        return {**pod, "status": status} if status else pod

    def _track_pod(self, pod: Object, existing: Object | None) -> None:
        key = pod_key(pod)
        self.departed.forget_pod(key)
        times = self._times(key)
        if existing is None or times.duration is None:
            times.duration = manifests.annotation_duration(pod, manifests.DURATION, "simulator")
        if (pod.get("status") or {}).get("phase") == "Running" and times.finish_at is None:
            self._start(key, times, pod)

    def _start(self, key: PodKey, times: PodTimes, pod: Object) -> None:
        """The pod runs for its sim-duration, or until its activeDeadlineSeconds if that
        comes first (the kubelet then stops it: ``finish_due``)."""
        ends = None if times.duration is None else self.clock.now + times.duration
        cut = deadline_end(pod, self.clock.now)
        times.exceeds = cut is not None and (ends is None or cut < ends)
        ends = cut if times.exceeds else ends
        if ends is not None:
            times.finish_at = ends
            self._finishing.set(key, ends)

    def delete_pod(self, pod: Object) -> None:
        """Delete a pod: at once if it holds no node, else after its grace period."""
        metadata = pod["metadata"]
        if metadata.get("deletionTimestamp"):
            return
        times = self._times(pod_key(pod))
        if not (pod.get("spec") or {}).get("nodeName") or pod["status"].get("phase") in FINISHED:
            self._remove(pod)
            return
        grace = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        grace = grace if isinstance(grace, int) and not isinstance(grace, bool) else 0
        deleting = {
            **metadata,
            "deletionTimestamp": clock.timestamp(self.clock.now, self.clock.keep_timestamps),
            "deletionGracePeriodSeconds": grace,
        }
        self._apply_pod({**pod, "metadata": deleting})
        times.release_at = self.clock.now + grace
        times.finish_at = None
        self._releasing.set(pod_key(pod), times.release_at)

    def _apply_pod(self, pod: Object) -> None:
        """Write ``pod``: a new object made of the state's last one (whose parts nothing
        changes in place, here or in the state) and of new parts, handed over as it is."""
        self.state.apply(pod, owned=self._hand_over)
        self.changed()
        self._pod_written(pod)

    def _pod_written(self, pod: Object, removed: bool = False) -> None:
        namespace, name = pod_key(pod)
        group = group_of(pod)
        if group is not None:
            self.touched.groups.add((namespace, group))
            members = self.group_pods.setdefault((namespace, group), set())
            if removed:
                members.discard(name)
            else:
                members.add(name)
        self.touched.jobs.update(owning_jobs(pod))

    def _remove(self, pod: Object) -> None:
        metadata = pod["metadata"]
        self.state.delete("Pod", metadata["namespace"], metadata["name"])
        self._uids_by_ref.pop(("Pod", metadata["name"]), None)
        status = pod.get("status") or {}
        if status.get("phase") not in FINISHED:
            pod = {**pod, "status": {**status, "phase": "Failed"}}
            for job in owning_jobs(pod):  # for its Job to count as failed, or not
                lost = self.touched.lost.setdefault(job, [])
                lost.append((metadata["name"], told_disruption(pod)))
        times = self.pods.get(pod_key(pod))
        evictions = times.evictions if times is not None else 0
        self.departed.keep_removed(pod_key(pod), lambda: departures.pod_row(pod, evictions, None))
        self.changed()
        self._pod_written(pod, removed=True)

    # ----------------------------------------------------------------- the kubelet
    def finish_due(self, now: float) -> None:
        """Pods whose sim-duration has elapsed succeed; those past their
        activeDeadlineSeconds first fail, as the kubelet stops them."""
        for key in self._finishing.pop_due(now):
            times = self.pods[key]
            times.finish_at = None
            pod = self.state.get("Pod", *key)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            status = pod["status"]
            ended = deadline_exceeded(status) if times.exceeds else {**status, "phase": "Succeeded"}
            self._apply_pod({**pod, "status": ended})

    def remove_released(self, now: float) -> None:
        """Pods being deleted whose grace period is over disappear."""
        for key in self._releasing.pop_due(now):
            self.pods[key].release_at = None
            pod = self.state.get("Pod", *key)
            if pod is not None:
                self._remove(pod)

    def next_event(self) -> float | None:
        """When the next pod finishes or goes away on its own (None: never)."""
        times = [t for t in (self._finishing.next(), self._releasing.next()) if t is not None]
        return min(times, default=None)

    # ----------------------------------------------------------------- a session's outcome
    def apply(self, outcome: Outcome) -> None:
        """What the API server and the kubelets would make of a session's outcome, at
        once and in the runtime's order: binds, evictions, nominations, statuses, events."""
        self._volumes = volume_binds.VolumeBinds(self.state)
        decided.apply_in_order(self, outcome)

    def flush(self) -> None:
        """Binds are applied as they come: nothing waits to be sent."""

    def bind(self, task: TaskInfo, node: str) -> None:
        pod = self.state.get("Pod", task.namespace, task.name)
        ref = ObjectRef("Pod", task.namespace, task.name)
        gone = pod is None or pod["metadata"].get("deletionTimestamp")
        why = (
            f"pod {task.key} no longer exists"
            if gone
            else self._volumes.refusal(task, node, self.create)
            or claim_binds.refusal(self.state, task, node, self.create)
        )
        if pod is None or why is not None:  # (its volumes' writes, made first, refused it)
            message = decided.binding_rejected_message(why or "")
            self.record(ref, "Warning", decided.FAILED_SCHEDULING, message)
            return
        status = {
            **(pod.get("status") or {}),
            "phase": "Running",
            "startTime": clock.timestamp(self.clock.now, self.clock.keep_timestamps),
        }
        # the API server's binding sets PodScheduled=True
        scheduled = {"type": decided.POD_SCHEDULED, "status": "True"}
        status["conditions"] = with_condition(
            status.get("conditions"), scheduled, self.clock.now, self.clock.keep_timestamps
        )
        self._apply_pod({**pod, "spec": {**pod["spec"], "nodeName": node}, "status": status})
        self._start(pod_key(pod), self._times(pod_key(pod)), pod)
        self.record(ref, "Normal", decided.SCHEDULED, decided.scheduled_message(task.key, node))

    def nominate(self, task: TaskInfo, node: str | None) -> None:
        """status.nominatedNodeName, as kube-scheduler writes it for a preemptor."""
        pod = self.state.get("Pod", task.namespace, task.name)
        if pod is None or pod["spec"].get("nodeName"):
            return
        status = {k: v for k, v in (pod.get("status") or {}).items() if k != "nominatedNodeName"}
        if node is not None:
            status["nominatedNodeName"] = node
        self._apply_pod({**pod, "status": status})

    def evict(self, task: TaskInfo, reason: str, disruption: str) -> None:
        """Delete the pod, marked first (in the same write) with the DisruptionTarget
        condition kbatch gives a victim on a live cluster."""
        pod = self.state.get("Pod", task.namespace, task.name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        self._times(pod_key(pod)).evictions += 1
        status = dict(pod.get("status") or {})
        status["conditions"] = with_condition(
            status.get("conditions"), decided.disruption_condition(disruption), self.clock.now
        )
        self.delete_pod({**pod, "status": status})

    def update_pod_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        dumped = status.model_dump(mode="json", by_alias=True, exclude_none=True)
        self._write_status("PodGroup", namespace, name, dumped, status)

    def update_queue(self, name: str, status: QueueStatus) -> None:
        self._write_status("Queue", "", name, status.model_dump(mode="json", by_alias=True), status)

    def update_pod_condition(self, condition: decided.PodCondition) -> None:
        """PodScheduled into the pod's status.conditions (a strategic merge by type)."""
        task = condition.task
        pod = self.state.get("Pod", task.namespace, task.name)
        if pod is None or pod["spec"].get("nodeName"):
            return
        written = {
            "type": decided.POD_SCHEDULED,
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message,
        }
        status = dict(pod.get("status") or {})
        status["conditions"] = with_condition(
            status.get("conditions"), written, self.clock.now, self.clock.keep_timestamps
        )
        self._apply_pod({**pod, "status": status})

    def _write_status(
        self, kind: str, namespace: str, name: str, status: Object, model: BaseModel
    ) -> None:
        """``status``, dumped from ``model`` (handed to the state with it: not validated
        again), as the object's status."""
        obj = self.state.get(kind, namespace, name)
        if obj is None or obj.get("status") == status:
            return
        given = model if self._hand_over_statuses else None
        # (owned: as ``_apply_pod``'s)
        self.state.apply({**obj, "status": status}, owned=self._hand_over, status=given)
        self.changed()
        if kind == "PodGroup":
            self.touched.groups.add((namespace, name))
            self.touched.holding.add((namespace, name))

    def _uid_of(self, ref: ObjectRef) -> str:
        """The object's uid, as last looked up (``_look_up_uid``)."""
        by_namespace = self._uids_by_ref.get((ref.kind, ref.name))
        if by_namespace is None:
            by_namespace = self._uids_by_ref[ref.kind, ref.name] = {}
        uid = by_namespace.get(ref.namespace)
        if uid is None:
            uid = by_namespace[ref.namespace] = self._look_up_uid(ref)
        return uid

    def _look_up_uid(self, ref: ObjectRef) -> str:
        """The object's uid ('' for an object the state does not hold, such as a JobSet,
        which the simulated JobSet controller keeps: made once, never again under the
        same name)."""
        try:
            obj = self.state.get(ref.kind, ref.namespace, ref.name) or {}
        except KeyError:
            return ""
        return str((obj.get("metadata") or {}).get("uid", ""))

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        """An event, unless the same was recorded lately about the same object
        (``kbatch.sim.events``): the object is known by its uid, which no other object
        ever has (they count up), or by its name where its kind has none."""
        uid = self._uid_of(ref)
        self.events.record(uid or ref, ref, type_, reason, message, self.clock.now)
