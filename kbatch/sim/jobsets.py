"""The JobSet controller the simulator plays (JobSet's own, ``sigs.k8s.io/jobset``), with
kbatch's held-JobSet operator beside it (DESIGN §15).

JobSet's part, as its controller reconciles (``kbatch.sim.jobset_spec`` for what it
reads and the Jobs it makes):

- It makes each replicated Job's ``replicas`` Jobs, suspended while the JobSet is, and
  resumes them when the JobSet is resumed; with ``startupPolicyOrder: InOrder``, a
  replicated Job's Jobs are made (or resumed) once every Job of the one before has all
  its pods running; one that ``dependsOn`` another, once every Job of that one has
  (``Ready``) or has completed (``Complete``).
- Once as many targeted Jobs have completed as its success policy asks (all of them, or
  one with ``Any``), the JobSet is ``Completed``.
- When a Job fails: without a failure policy the JobSet fails (``FailedJobs``). With
  one, the first rule that matches the Job's failure reason and replicated Job decides
  (else ``RestartJobSet``): the JobSet fails, or restarts, counted against
  ``maxRestarts`` (past it, it fails: ``ReachedMaxRestarts``) or not. A restart deletes
  every Job of the attempt before (its pods first, as a foreground deletion does) and
  makes them again, with the next ``restart-attempt``.
- A finished JobSet's Jobs that are still active are deleted. A JobSet whose
  ``managedBy`` names another controller is left alone.

kbatch's part, as ``kbatch.operators.jobs.jobsets`` does on a cluster: a labelled JobSet
that the JobSet webhook held gets its PodGroup made (``PodGroupCreated``, or
``PodGroupRefused`` naming the field, tried again later) and is released (``Released``)
once the group is admitted. The Jobs are made through the API server's checks and the
webhooks (``create``), as on a cluster; one refused is told on the JobSet
(``JobCreationFailed``) and tried again.
"""

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.sim import clock, manifests
from kbatch.sim.backend import SimBackend
from kbatch.sim.jobs import JobController, JobRecord
from kbatch.sim.jobset_spec import (
    FAIL,
    RESTART,
    RESTART_UNCOUNTED,
    JobSetSpec,
    child_job,
    job_name,
    jobset_spec,
)
from kbatch.webhooks.admission import chain, job, jobgroup, jobsetgroup, result
from kbatch.webhooks.admission.view import ClusterView

Object = dict[str, Any]
Key = tuple[str, str]  # namespace, name
Create = Callable[[Object], str | None]  # an object through the API server: why refused

ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
STARTED = ("Running", "Succeeded")  # a pod's phases JobSet's InOrder startup counts
REPLICATED = "jobset.sigs.k8s.io/replicatedjob-name"
COMPLETED = ("AllJobsCompleted", "jobset completed successfully")
FAILED_JOBS = "FailedJobs", "jobset failed due to one or more job failures"
MAX_RESTARTS = "ReachedMaxRestarts", "jobset failed due to reaching max number of restarts"
FAIL_ACTION = "FailJobSetFailurePolicyAction", "applying FailJobSet failure policy action"
RESTART_ACTIONS = {
    RESTART: "applying RestartJobSet failure policy action",
    RESTART_UNCOUNTED: "applying RestartJobSetAndIgnoreMaxRestarts failure policy action",
}


@dataclass(slots=True)
class JobSetRecord:
    obj: Object
    spec: JobSetSpec
    restarts: int = 0  # status.restarts
    counted: int = 0  # status.restartsCountTowardsMax
    ended: str | None = None  # Completed or Failed
    deleting: set[str] = field(default_factory=set)  # its Jobs' names, being deleted

    @property
    def ref(self) -> ObjectRef:
        meta = self.obj["metadata"]
        return ObjectRef("JobSet", meta["namespace"], meta["name"])


class JobSetController:
    def __init__(self, cluster: SimBackend, jobs: JobController) -> None:
        self.cluster = cluster
        self.jobs = jobs
        self.sets: dict[Key, JobSetRecord] = {}
        self.to_group: set[Key] = set()  # labelled JobSets whose PodGroup is to be made
        self._refused_why: dict[Key, str] = {}

    def get(self, namespace: str, name: str) -> Object | None:
        record = self.sets.get((namespace, name))
        return None if record is None else record.obj

    def apply(self, jobset: Object, view: ClusterView) -> None:
        """Create or replace a JobSet, as admitted (its status is the controller's)."""
        spec = jobset_spec(jobset)
        meta = jobset["metadata"]
        key = (meta["namespace"], meta["name"])
        record = self.sets.get(key)
        identity = self.cluster.identity(record.obj if record is not None else None)
        status = record.obj.get("status", {}) if record is not None else {}
        obj = {**jobset, "metadata": {**meta, **identity}, "status": status}
        if record is None:
            record = self.sets[key] = JobSetRecord(obj, spec)
            if jobsetgroup.makes_group(obj, view.scheduler_names()):
                self.to_group.add(key)
            if job.is_held(obj):
                why = obj["metadata"]["annotations"][job.HELD_ANNOTATION]
                self.cluster.record(record.ref, "Normal", "Held", f"JobSet suspended: {why}")
        record.obj, record.spec = obj, spec
        self.cluster.changed()

    def reconcile(self, view: ClusterView, create: Create) -> None:
        """Make the labelled JobSets' groups, release those admitted, and bring every
        JobSet's Jobs to what it asks."""
        for key in sorted(self.to_group):
            self._make_group(key, view)
        for _, record in sorted(self.sets.items()):
            why = jobsetgroup.to_release(record.obj, view)
            if why is not None:
                record.obj = result.merge(record.obj, job.release_patch())
                record.spec = jobset_spec(record.obj)
                self.cluster.record(record.ref, "Normal", "Released", f"JobSet resumed: {why}")
                self.cluster.changed()
            if record.spec.managed and (record.ended is None or record.deleting):
                self._reconcile_one(record, create)

    # ------------------------------------------------------------------ JobSet's own
    def _reconcile_one(self, record: JobSetRecord, create: Create) -> None:
        namespace = record.obj["metadata"]["namespace"]
        self._delete(record, set())  # what is being deleted, until it is gone
        current: dict[str, JobRecord] = {}
        for name in self._names(record):
            child = self.jobs.jobs.get((namespace, name))
            if child is None or name in record.deleting:
                continue
            if int(_label(child.obj, ATTEMPT) or 0) < record.restarts:
                self._delete(record, {name})
            else:
                current[name] = child
        if record.ended is not None:
            return
        failed = [c for c in current.values() if _finished(c) == "Failed"]
        if failed:
            self._failure(record, failed, current)
            return
        done = [c for c in current.values() if _finished(c) == "Complete"]
        targets = record.spec.success_targets
        if sum(1 for c in done if not targets or _label(c.obj, REPLICATED) in targets) >= (
            record.spec.to_succeed()
        ):
            self._end(record, "Completed", "Normal", COMPLETED, current)
            return
        self._make_and_resume(record, current, create)
        self._write_status(record, current)

    def _names(self, record: JobSetRecord) -> list[str]:
        return [
            job_name(record.obj, replicated.name, index)
            for replicated in record.spec.replicated
            for index in range(replicated.replicas)
        ]

    def _make_and_resume(
        self, record: JobSetRecord, current: dict[str, JobRecord], create: Create
    ) -> None:
        """Its missing Jobs made, and its Jobs suspended or resumed as it is; InOrder, a
        replicated Job's only once the one before has started."""
        spec = record.spec
        for which, replicated in enumerate(spec.replicated):
            if not self._reached(record, replicated.depends, current):
                continue
            names = [job_name(record.obj, replicated.name, i) for i in range(replicated.replicas)]
            for index, child_name in enumerate(names):
                child = current.get(child_name)
                if child is None and child_name not in record.deleting:
                    made = child_job(record.obj, spec, which, index, record.restarts)
                    refused = create(_with_duration(made, record.obj))
                    if refused is not None:
                        message = f"job {child_name!r} creation failed: {refused}"
                        self.cluster.record(record.ref, "Warning", "JobCreationFailed", message)
                elif (
                    child is not None
                    and not child.complete
                    and bool(child.obj["spec"].get("suspend")) != spec.suspend
                ):
                    self.jobs.apply(result.merge(child.obj, {"spec": {"suspend": spec.suspend}}))
            if spec.in_order and not spec.suspend and not self._started(names, current):
                return

    def _reached(
        self,
        record: JobSetRecord,
        depends: tuple[tuple[str, str], ...],
        current: dict[str, JobRecord],
    ) -> bool:
        """Has every replicated Job this one ``dependsOn`` reached its status: every Job
        of it complete (Complete), or started or finished (Ready)?"""
        for replicated in record.spec.replicated:
            status = dict(depends).get(replicated.name)
            if status is None:
                continue
            names = [job_name(record.obj, replicated.name, i) for i in range(replicated.replicas)]
            if status == "Complete":
                if not all(n in current and _finished(current[n]) == "Complete" for n in names):
                    return False
            elif not self._started(names, current):
                return False
        return True

    def _started(self, names: list[str], current: dict[str, JobRecord]) -> bool:
        """Has every one of these Jobs all the pods it runs at once running (or done), as
        JobSet's controller counts a Job's ready and succeeded pods?"""
        for name in names:
            child = current.get(name)
            if child is None:
                return False
            if child.complete:
                continue
            pods = self.jobs.pods_of(child)
            running = sum(1 for p in pods if (p.get("status") or {}).get("phase") in STARTED)
            if running < min(child.spec.parallelism, child.spec.completions):
                return False
        return True

    def _failure(
        self, record: JobSetRecord, failed: list[JobRecord], current: dict[str, JobRecord]
    ) -> None:
        """Its failure policy, on the Jobs of this attempt that failed."""
        failed.sort(key=_failure_order)
        first = failed[0]
        spec = record.spec
        if not spec.has_failure_policy:
            self._end(record, "Failed", "Warning", _first(FAILED_JOBS, first), current)
            return
        action, matched = RESTART, first
        for rule in spec.rules:
            found = [c for c in failed if rule.matches(_label(c.obj, REPLICATED), _reason(c))]
            if found:
                action, matched = rule.action, found[0]
                break
        if action == FAIL:
            self._end(record, "Failed", "Warning", _first(FAIL_ACTION, matched), current)
            return
        counted = action != RESTART_UNCOUNTED
        if counted and record.counted >= spec.max_restarts:
            self._end(record, "Failed", "Warning", _first(MAX_RESTARTS, matched), current)
            return
        record.restarts += 1
        record.counted += counted
        reason = f"{action}FailurePolicyAction"
        message = f"{RESTART_ACTIONS[action]} (first failed job: {matched.obj['metadata']['name']})"
        self.cluster.record(record.ref, "Warning", reason, message)
        self._delete(record, set(current))
        self._write_status(record, {})

    def _end(
        self,
        record: JobSetRecord,
        ended: str,
        kind: str,
        why: tuple[str, str],
        current: dict[str, JobRecord],
    ) -> None:
        """The JobSet is finished: its active Jobs are deleted."""
        record.ended = ended
        self.cluster.record(record.ref, kind, *why)
        self._delete(record, {name for name, c in current.items() if not c.complete})
        self._write_status(record, current, (ended, *why))

    def _delete(self, record: JobSetRecord, names: set[str]) -> None:
        """Delete these Jobs, and go on deleting those being deleted, until gone."""
        namespace = record.obj["metadata"]["namespace"]
        record.deleting |= names
        for name in sorted(record.deleting):
            if self.jobs.delete((namespace, name)):
                record.deleting.discard(name)

    def _write_status(
        self,
        record: JobSetRecord,
        current: dict[str, JobRecord],
        ended: tuple[str, str, str] | None = None,
    ) -> None:
        status = dict(record.obj.get("status") or {})
        status["restarts"] = record.restarts
        status["restartsCountTowardsMax"] = record.counted
        status["replicatedJobsStatus"] = [
            _replicated_status(replicated.name, current) for replicated in record.spec.replicated
        ]
        if ended is not None:
            condition, reason, message = ended
            status["terminalState"] = condition
            at = clock.timestamp(self.cluster.clock.now, self.cluster.clock.keep_timestamps)
            status["conditions"] = [
                *(c for c in status.get("conditions") or () if c.get("type") != condition),
                {"type": condition, "status": "True", "reason": reason, "message": message,
                 "lastTransitionTime": at},
            ]  # fmt: skip
        if status != record.obj.get("status"):
            record.obj = {**record.obj, "status": status}
            self.cluster.changed()

    # ------------------------------------------------------------------ kbatch's own
    def _make_group(self, key: Key, view: ClusterView) -> None:
        """The PodGroup of a labelled JobSet, through the PodGroup's admission; one that
        is refused is told on the JobSet, and tried again later."""
        record = self.sets[key]
        made = jobsetgroup.pod_group_for(record.obj)
        not_leaf = jobgroup.queue_not_leaf(record.obj, view, "JobSet")
        if not_leaf is not None:
            self._refused(record, not_leaf)
            return
        answer = chain.admit(made, None, view)
        if not answer.allowed:
            self._refused(record, jobgroup.refusal_message(record.obj, answer.message, "JobSet"))
            return
        self.to_group.discard(key)
        self._refused_why.pop(key, None)
        if self.cluster.state.get("PodGroup", *key) is None:
            self.cluster.create(answer.applied_to(made))
            message = f"made PodGroup {key[0]}/{key[1]} for the JobSet's pods"
            self.cluster.record(record.ref, "Normal", jobgroup.MADE, message)

    def _refused(self, record: JobSetRecord, message: str) -> None:
        key = (record.ref.namespace, record.ref.name)
        if self._refused_why.get(key) != message:
            self._refused_why[key] = message
            self.cluster.record(record.ref, "Warning", jobgroup.REFUSED, message)


def _label(obj: Object, key: str) -> str:
    return str((obj["metadata"].get("labels") or {}).get(key) or "")


def _finished(child: JobRecord) -> str | None:
    """Complete or Failed, as the Job's conditions say; None while it runs."""
    for condition in (child.obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
            return str(condition["type"])
    return None


def _failed(child: JobRecord) -> dict[str, Any]:
    """The Job's Failed condition ({} when it has none)."""
    for condition in (child.obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Failed":
            return dict(condition)
    return {}


def _reason(child: JobRecord) -> str:
    return str(_failed(child).get("reason") or "")


def _failure_order(child: JobRecord) -> tuple[str, str]:
    return str(_failed(child).get("lastTransitionTime") or ""), child.obj["metadata"]["name"]


def _first(why: tuple[str, str], child: JobRecord) -> tuple[str, str]:
    return why[0], f"{why[1]} (first failed job: {child.obj['metadata']['name']})"


def _replicated_status(name: str, current: dict[str, JobRecord]) -> dict[str, Any]:
    mine = [c for c in current.values() if _label(c.obj, REPLICATED) == name]
    finished = [_finished(c) for c in mine]
    return {
        "name": name,
        "succeeded": finished.count("Complete"),
        "failed": finished.count("Failed"),
        "active": sum(1 for c, f in zip(mine, finished, strict=True) if f is None),
        "suspended": sum(1 for c in mine if c.obj["spec"].get("suspend")),
    }


def _with_duration(made: Object, jobset: Object) -> Object:
    """A ``kbatch.io/sim-duration`` on the JobSet goes to Jobs that set none."""
    own = (jobset["metadata"].get("annotations") or {}).get(manifests.DURATION)
    annotations = made["metadata"].get("annotations") or {}
    if own is None or manifests.DURATION in annotations:
        return made
    made["metadata"]["annotations"] = {**annotations, manifests.DURATION: own}
    return made
