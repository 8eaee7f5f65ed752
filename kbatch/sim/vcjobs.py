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
- Its lifecycle policies (``kbatch.sim.vcjob_policies``) act on a pod's failure or
  eviction, or a task completed, while it is Pending or Running: ``AbortJob``,
  ``TerminateJob``, ``CompleteJob`` delete the pods that have not ended and the
  PodGroup (``Aborting`` ... then ``Aborted`` once none is left, and so on);
  ``RestartJob`` deletes every pod and the PodGroup (``Restarting``, then ``Pending``
  and made again, one retry more; ``Failed`` at ``maxRetry``, the ended pods kept at
  the last retry), as Volcano's KillJob and its state machine do.
- ``status``: ``state.phase``, ``minAvailable``, ``pending``, ``running``,
  ``succeeded``, ``failed``, ``taskStatusCount``, ``version``, ``retryCount`` and a
  condition per phase.

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
from kbatch.sim.vcjob_policies import action_for
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
ENDED = ("Completed", "Failed", "Aborted", "Terminated")
# An action's phase while its pods go, and (but for a restart) the phase after.
ACTION_PHASES = {"RestartJob": "Restarting", "AbortJob": "Aborting",
                 "TerminateJob": "Terminating", "CompleteJob": "Completing"}  # fmt: skip
KILLED = {"Aborting": "Aborted", "Terminating": "Terminated", "Completing": "Completed"}
TASK_SPEC = "volcano.sh/task-spec"


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
    retries: int = 0  # status.retryCount
    version: int = 0  # status.version: one more each time the whole job is killed
    own_deletes: set[str] = field(default_factory=set)  # pods it deleted, until gone
    seen: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # name: uid, phase, task

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
        # What of the vcjobs made since ``take_untold`` is not played, for the run's
        # warnings (a warning event on the vcjob says it too, but the table shows only
        # each object's last)
        self._untold: list[str] = []

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
            for why in not_simulated(obj, spec):
                self.cluster.record(record.ref, "Warning", NOT_SIMULATED, why)
                self._untold.append(f"Job {key[0]}/{key[1]}: {why}")
        record.obj, record.spec = obj, spec
        self.cluster.changed()

    def take_untold(self) -> list[str]:
        """What is not played of the vcjobs made since the last call."""
        untold, self._untold = self._untold, []
        return untold

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
        pods = self._pods(record)
        if self._apply_policies(record, pods):  # (its phase written, as the kill writes it)
            self._write_status(record, *_counted(self._pods(record)))
            return
        if record.phase in ("Restarting", *KILLED):
            self._killing(record, pods)
            return
        group = self.cluster.state.get("PodGroup", namespace, pod_group_name(record.obj))
        if group is None:
            self._make_group(record, create)
            self._write_status(record, Counter(), {})
            return
        self._tell_group_waits(record, group)
        if (group.get("status") or {}).get("phase") not in (None, "", "Pending"):
            self._make_pods(record, pods, create)
            pods = self._pods(record)
        counts, by_task = _counted(pods)
        self._set_phase(record, self._next_phase(record, counts, by_task))
        if record.ended:
            self._finish(record, pods)
        self._write_status(record, counts, by_task)

    def _set_phase(self, record: VcJobRecord, phase: str, why: str = "") -> None:
        if phase != record.phase:
            record.phase = phase
            kind = "Warning" if phase == "Failed" else "Normal"
            message = f"vcjob is {phase}" + (f": {why}" if why else "")
            self.cluster.record(record.ref, kind, phase, message)

    # ------------------------------------------------------------------ its policies
    def _apply_policies(self, record: VcJobRecord, pods: list[Object]) -> bool:
        """The first of its pods' events since the last call that a policy acts on, acted
        on (while it is Pending or Running). True if one was."""
        events = self._pod_events(record, pods)
        if record.phase not in ("Pending", "Running"):
            return False
        tasks = {task.name: task.policies for task in record.spec.tasks}
        for event, task in events:
            found = action_for(event, tasks.get(task, ()), record.spec.policies)
            if found is not None:
                action, level = found
                self._kill(record, pods, action, f"{event} of task {task}, {level} policy")
                return True
        return False

    def _pod_events(self, record: VcJobRecord, pods: list[Object]) -> list[tuple[str, str]]:
        """(event, task) for each pod that failed, was evicted (gone before it ended, not
        deleted by the controller) or completed its task, since the last call."""
        current = {pod["metadata"]["name"]: pod for pod in pods}
        events = []
        for name, (uid, phase, task) in sorted(record.seen.items()):
            pod = current.get(name)
            if pod is not None and pod["metadata"]["uid"] == uid:
                continue
            del record.seen[name]
            if name in record.own_deletes:
                record.own_deletes.discard(name)
            elif phase not in FINISHED:
                events.append(("PodEvicted", task))
        for name, pod in current.items():
            meta = pod["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            uid, phase, task = meta["uid"], _phase(pod), meta["annotations"].get(TASK_SPEC, "")
            if record.seen.get(name) == (uid, phase, task):
                continue
            record.seen[name] = (uid, phase, task)
            if phase == "Failed":
                events.append(("PodFailed", task))
            elif phase == "Succeeded" and _task_completed(record.spec, task, pods):
                events.append(("TaskCompleted", task))
        return events

    def _kill(self, record: VcJobRecord, pods: list[Object], action: str, why: str) -> None:
        """Volcano's KillJob: the pods deleted (but for those that ended, unless a restart
        short of its last retry), the PodGroup too."""
        retain = action != "RestartJob" or record.retries >= record.spec.max_retry - 1
        doomed = [p for p in pods if not (retain and _phase(p) in FINISHED)]
        record.version += 1
        if action == "RestartJob":
            record.retries += 1
        for pod in doomed:
            record.own_deletes.add(pod["metadata"]["name"])
            self.cluster.delete_pod(pod)
        self._delete_group(record)
        self._set_phase(record, ACTION_PHASES[action], f"{why}: {action}")

    def _killing(self, record: VcJobRecord, pods: list[Object]) -> None:
        """Restarting: Failed past ``maxRetry``, else Pending once enough pods are gone.
        Aborting, Terminating, Completing: Aborted, Terminated, Completed once no pod of
        it is pending, running or being deleted."""
        counts, by_task = _counted(pods)
        terminating = sum(1 for pod in pods if pod["metadata"].get("deletionTimestamp"))
        if record.phase == "Restarting":
            if record.retries >= record.spec.max_retry:
                self._set_phase(record, "Failed", f"{record.retries} retries of maxRetry")
            elif record.spec.replicas - terminating >= record.spec.min_available:
                self._set_phase(record, "Pending")
        elif record.phase in KILLED and not terminating + counts["Pending"] + counts["Running"]:
            self._set_phase(record, KILLED[record.phase])
        if record.ended:
            self._finish(record, pods)
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
                pod = pod_for(record.obj, record.spec, task, index, record.version, record.retries)
                name = pod["metadata"]["name"]
                if name not in existing and create(pod) is None:
                    record.pod_names.add(name)

    def _finish(self, record: VcJobRecord, pods: list[Object]) -> None:
        """A finished vcjob: its pods that have not finished deleted, its PodGroup too."""
        for pod in pods:
            if _phase(pod) not in FINISHED:
                record.own_deletes.add(pod["metadata"]["name"])
                self.cluster.delete_pod(pod)
        self._delete_group(record)

    def _delete_group(self, record: VcJobRecord) -> None:
        namespace, name = record.obj["metadata"]["namespace"], pod_group_name(record.obj)
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
            "version": record.version,
            "retryCount": record.retries,
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
        task = pod["metadata"]["annotations"].get(TASK_SPEC, "")
        by_task.setdefault(task, Counter())[phase] += 1
    return counts, by_task


def _task_completed(spec: VcJobSpec, task: str, pods: list[Object]) -> bool:
    """Have as many of the task's pods succeeded as it has replicas (Volcano's cache)?"""
    replicas = next((t.replicas for t in spec.tasks if t.name == task), 0)
    done = sum(
        1 for p in pods
        if p["metadata"]["annotations"].get(TASK_SPEC) == task and _phase(p) == "Succeeded"
    )  # fmt: skip
    return replicas > 0 and done >= replicas


def _tasks_reached(spec: VcJobSpec, by_task: dict[str, Counter[str]]) -> bool:
    """When the job's minAvailable covers every task's, has each task as many pods
    succeeded as its own minAvailable? (Volcano's check, per task.)"""
    if spec.min_available < sum(task.min_available for task in spec.tasks):
        return True
    return all(
        by_task.get(task.name, Counter())["Succeeded"] >= task.min_available for task in spec.tasks
    )
