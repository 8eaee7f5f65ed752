"""The Volcano Job controller the simulator plays for vcjobs (``batch.volcano.sh/v1alpha1``
Jobs), as Volcano v1.15.1's does beside kbatch serving Volcano's scheduler name
(``kbatch run --scheduler-name volcano``): ``kbatch.sim.vcjob_spec`` for what it reads
and makes.

- A vcjob is ``Pending`` at once; its PodGroup is made through the API server's checks
  and the PodGroup's admission (one refused is told on the vcjob, ``PodGroupRefused``,
  and tried again), read as kbatch reads a Volcano PodGroup (``kbatch.cluster.volcano``).
- Its pods are made only once the scheduler has moved the PodGroup past ``Pending``
  (``Inqueue``), as the controller waits; a pod that is gone (evicted, deleted) is made
  again under its name while the vcjob is not finished.
- ``Pending`` becomes ``Running`` once ``minAvailable`` of its pods run (or have
  finished). ``Running`` ends once every pod has finished: ``Completed`` if at least
  ``minAvailable`` succeeded (``minSuccess``, when given, decides instead, and a job
  reaching it completes at once), else ``Failed``; with fewer pods running than its
  gang, it is ``Pending`` again. A finished vcjob's pods that still run are deleted and
  its PodGroup too.
- ``status``: ``state.phase``, ``minAvailable``, ``pending``, ``running``,
  ``succeeded``, ``failed``, ``taskStatusCount`` and a condition per phase.

Fields whose effect is not played (``vcjob_spec.not_simulated``) are each told once on
the vcjob as a Warning event ``NotSimulated``; the rest runs.
"""

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kbatch.cluster import volcano
from kbatch.cluster.errors import ObjectError
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.sim import clock
from kbatch.sim.backend import FINISHED, SimBackend
from kbatch.sim.vcjob_spec import (
    DEFAULT_SCHEDULER,
    VcJobSpec,
    is_vcjob,
    not_simulated,
    pod_for,
    pod_group,
    pod_group_name,
)
from kbatch.sim.vcjob_spec import vcjob_spec as read_spec

Object = dict[str, Any]
Key = tuple[str, str]  # namespace, name
Create = Callable[[Object], str | None]  # an object through the API server: why refused

NOT_SIMULATED = "NotSimulated"
GROUP_REFUSED = "PodGroupRefused"
ENDED = ("Completed", "Failed")


def served_names(names: frozenset[str], objects: Iterable[Object]) -> frozenset[str]:
    """The scheduler names kbatch serves: with vcjobs among ``objects``, Volcano's too, as
    a Volcano user runs kbatch beside Volcano's Job controller
    (``kbatch run --scheduler-name volcano``)."""
    return names | {DEFAULT_SCHEDULER} if any(is_vcjob(obj) for obj in objects) else names


@dataclass(slots=True)
class VcJobRecord:
    obj: Object
    spec: VcJobSpec
    phase: str = "Pending"
    pod_names: set[str] = field(default_factory=set)  # its pods that may still exist
    refused_why: str | None = None  # why its PodGroup was last refused

    @property
    def ref(self) -> ObjectRef:
        meta = self.obj["metadata"]
        return ObjectRef("Job", meta["namespace"], meta["name"])

    @property
    def ended(self) -> bool:
        return self.phase in ENDED


class VcJobController:
    def __init__(self, cluster: SimBackend) -> None:
        self.cluster = cluster
        self.records: dict[Key, VcJobRecord] = {}
        self._by_uid: dict[str, VcJobRecord] = {}

    def get(self, namespace: str, name: str) -> Object | None:
        record = self.records.get((namespace, name))
        return None if record is None else record.obj

    def apply(self, job: Object) -> None:
        """Create or replace a vcjob (its status is the controller's)."""
        spec = read_spec(job)
        meta = job["metadata"]
        key = (meta["namespace"], meta["name"])
        record = self.records.get(key)
        identity = self.cluster.identity(record.obj if record is not None else None)
        status = record.obj.get("status", {}) if record is not None else {}
        obj = {**job, "metadata": {**meta, **identity}, "status": status}
        if record is None:
            record = self.records[key] = VcJobRecord(obj, spec)
            self._by_uid[identity["uid"]] = record
            if self.cluster.history:
                self.cluster.created_at[f"Job {key[0]}/{key[1]}"] = self.cluster.clock.now
            for why in not_simulated(obj):
                self.cluster.record(record.ref, "Warning", NOT_SIMULATED, why)
        record.obj, record.spec = obj, spec
        self.cluster.changed()

    def done_with(self, pod: Object) -> bool:
        """May ``pod`` leave the state? Not while the vcjob that owns it runs (it counts
        its finished pods)."""
        for owner in pod["metadata"].get("ownerReferences") or ():
            record = self._by_uid.get(str(owner.get("uid")))
            if record is not None and not record.ended:
                return False
        return True

    def reconcile(self, create: Create) -> None:
        """Bring every vcjob that is not finished to what it asks."""
        for _, record in sorted(self.records.items()):
            if not record.ended:
                self._reconcile_one(record, create)

    def _reconcile_one(self, record: VcJobRecord, create: Create) -> None:
        namespace = record.obj["metadata"]["namespace"]
        group = self.cluster.state.get("PodGroup", namespace, pod_group_name(record.obj))
        if group is None:
            self._make_group(record, create)
            self._write_status(record, Counter(), {})
            return
        self._tell_group_waits(record, group)
        pods = self._pods(record)
        if (group.get("status") or {}).get("phase") not in (None, "", "Pending"):
            self._make_pods(record, pods, create)
            pods = self._pods(record)
        counts, by_task = _counted(pods)
        phase = self._next_phase(record, counts, by_task)
        if phase != record.phase:
            record.phase = phase
            kind = "Warning" if phase == "Failed" else "Normal"
            self.cluster.record(record.ref, kind, phase, f"vcjob is {phase}")
        if record.ended:
            self._finish(record, pods, namespace)
        self._write_status(record, counts, by_task)

    def _next_phase(
        self, record: VcJobRecord, counts: Counter[str], by_task: dict[str, Counter[str]]
    ) -> str:
        """The phase Volcano's Pending and Running states move the vcjob to."""
        spec = record.spec
        done = counts["Succeeded"] + counts["Failed"]
        if record.phase == "Pending":
            started = counts["Running"] + done >= spec.min_available
            return "Running" if started else "Pending"
        if spec.min_success is not None and counts["Succeeded"] >= spec.min_success:
            return "Completed"
        if spec.replicas and done == spec.replicas:
            if spec.min_success is not None:
                return "Failed"  # (it did not reach minSuccess)
            if not _tasks_reached(spec, by_task):
                return "Failed"
            return "Completed" if counts["Succeeded"] >= spec.min_available else "Failed"
        if counts["Pending"] > spec.replicas - spec.min_available:
            return "Pending"
        return record.phase

    def _make_group(self, record: VcJobRecord, create: Create) -> None:
        made = pod_group(record.obj, record.spec, self._priority_of)
        try:
            kbatch_group, _ = volcano.kbatch_object(made)
        except ObjectError as exc:  # (naming the field: told, not raised)
            refused: str | None = str(exc)
        else:
            refused = create(kbatch_group)
        if refused is not None and refused != record.refused_why:
            record.refused_why = refused
            message = f"PodGroup {made['metadata']['name']} refused: {refused}"
            self.cluster.record(record.ref, "Warning", GROUP_REFUSED, message)

    def _tell_group_waits(self, record: VcJobRecord, group: Object) -> None:
        """The group's latest true condition, unless Scheduled, repeated on the vcjob as
        a ``PodGroupPending`` Warning (Volcano's ``recordPodGroupEvent``)."""
        conditions = (group.get("status") or {}).get("conditions") or ()
        true = [c for c in conditions if c.get("status") == "True"]
        if not true:
            return
        latest = max(true, key=lambda c: str(c.get("lastTransitionTime") or ""))
        if latest.get("type") == "Scheduled":
            return
        meta = record.obj["metadata"]
        kind, why = str(latest.get("type")).lower(), latest.get("message", "")
        message = f"PodGroup {meta['namespace']}:{meta['name']} {kind}, reason: {why}"
        self.cluster.record(record.ref, "Warning", "PodGroupPending", message)

    def _priority_of(self, name: str) -> int:
        found = self.cluster.state.get("PriorityClass", "", name) if name else None
        return int((found or {}).get("value") or 0)

    def _pods(self, record: VcJobRecord) -> list[Object]:
        """Its pods that still exist (and are still its own)."""
        namespace, uid = record.obj["metadata"]["namespace"], record.obj["metadata"]["uid"]
        pods = []
        for name in sorted(record.pod_names):
            pod = self.cluster.state.get("Pod", namespace, name)
            owners = (pod or {}).get("metadata", {}).get("ownerReferences") or [{}]
            if pod is not None and owners[0].get("uid") == uid:
                pods.append(pod)
        return pods

    def _make_pods(self, record: VcJobRecord, pods: list[Object], create: Create) -> None:
        """Each of its pods that does not exist, made (a refusal is told on the pod)."""
        existing = {pod["metadata"]["name"] for pod in pods}
        for task in record.spec.tasks:
            for index in range(task.replicas):
                pod = pod_for(record.obj, record.spec, task, index, 0)
                name = pod["metadata"]["name"]
                if name not in existing and create(pod) is None:
                    record.pod_names.add(name)

    def _finish(self, record: VcJobRecord, pods: list[Object], namespace: str) -> None:
        """A finished vcjob: its pods that have not finished deleted, its PodGroup too."""
        for pod in pods:
            if _phase(pod) not in FINISHED:
                self.cluster.delete_pod(pod)
        name = pod_group_name(record.obj)
        if self.cluster.state.get("PodGroup", namespace, name) is not None:
            self.cluster.state.delete("PodGroup", namespace, name)
            self.cluster.forget_object("PodGroup", namespace, name)
            self.cluster.changed()

    def _write_status(
        self, record: VcJobRecord, counts: Counter[str], by_task: dict[str, Counter[str]]
    ) -> None:
        old = record.obj.get("status") or {}
        conditions = list(old.get("conditions") or ())
        at = clock.timestamp(self.cluster.clock.now, self.cluster.clock.keep_timestamps)
        state = dict(old.get("state") or {})
        if state.get("phase") != record.phase:
            state = {"phase": record.phase, "lastTransitionTime": at}
            conditions.append({"status": record.phase, "lastTransitionTime": at})
        status = {
            "state": state,
            "minAvailable": record.spec.min_available,
            **{key.lower(): counts[key] for key in ("Pending", "Running", "Succeeded", "Failed")},
            "taskStatusCount": {
                task: {"phase": dict(sorted(phases.items()))} for task, phases in by_task.items()
            },
            "conditions": conditions,
        }
        if status != old:
            record.obj = {**record.obj, "status": status}
            self.cluster.changed()


def _phase(pod: Object) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _counted(pods: list[Object]) -> tuple[Counter[str], dict[str, Counter[str]]]:
    """Its pods by phase, all told and by task (pods being deleted are not counted)."""
    counts: Counter[str] = Counter()
    by_task: dict[str, Counter[str]] = {}
    for pod in pods:
        if pod["metadata"].get("deletionTimestamp"):
            continue
        phase = _phase(pod)
        counts[phase] += 1
        task = pod["metadata"]["annotations"].get("volcano.sh/task-spec", "")
        by_task.setdefault(task, Counter())[phase] += 1
    return counts, by_task


def _tasks_reached(spec: VcJobSpec, by_task: dict[str, Counter[str]]) -> bool:
    """When the job's minAvailable covers every task's, has each task as many pods
    succeeded as its own minAvailable? (Volcano's check, per task.)"""
    if spec.min_available < sum(task.min_available for task in spec.tasks):
        return True
    return all(
        by_task.get(task.name, Counter())["Succeeded"] >= task.min_available for task in spec.tasks
    )
