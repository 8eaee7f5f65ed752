"""The job controller the simulator plays for batch/v1 Jobs.

A Job that is not suspended keeps ``min(parallelism, completions − succeeded)``
pods active (defaults: parallelism 1, completions = parallelism). Its pods are
named ``<job>-<n>``, n counting up from 0 across replacements (deterministic,
unlike Kubernetes' random suffixes), and carry the template's labels (plus
``job-name`` and ``controller-uid``), annotations and spec, and an owner
reference to the Job. A pod that is deleted or evicted is replaced at once; a
pod being deleted no longer counts as active (Kubernetes' default pod
replacement policy). ``spec.suspend: true`` deletes the active pods and
creates none. Once ``completions`` pods have succeeded, the Job gets a
``Complete`` condition and a ``completionTime``.

A ``kbatch.io/sim-duration`` on the Job itself is passed to pods whose
template does not set one.

A Job fails as Kubernetes' job controller fails it: when more of its pods have
failed than its ``backoffLimit`` (default 6), or once it has been active for its
``activeDeadlineSeconds``, counted from ``status.startTime`` (set when it first runs,
cleared while it is suspended: a Job kbatch holds starts when it is released). It
gets a ``Failed`` condition and a Warning event with the reason
(``BackoffLimitExceeded``, ``DeadlineExceeded``), its active pods are deleted, and it
makes no more. A pod fails past its own ``activeDeadlineSeconds`` (the kubelet's
``DeadlineExceeded``), and a pod removed before it finished (evicted) counts as failed
too, as Kubernetes counts a deleted pod, but for the pods the controller deleted itself
and for those evicted with the ``DisruptionTarget`` condition when the Job's
``podFailurePolicy`` ignores it (``FailJob`` there fails the Job; rules on exit codes
never match a simulated pod). Each failure, counted or not, puts off the next pod:
10 s, doubling with each failure since the last success, at most 10 minutes. Indexed
Jobs: ``kbatch.sim.job_indexes``. The pod replacement policy changes nothing here: a
pod deleted is gone at once (grace 0), terminating or not.
"""

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kbatch.cluster import fields, kept_fields
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.sim import clock, manifests, timers
from kbatch.sim.backend import FINISHED, SimBackend
from kbatch.sim.job_indexes import Indexes, indexed
from kbatch.sim.job_spec import JobSpec, job_spec
from kbatch.sim.pod_objects import owning_jobs
from kbatch.webhooks.admission import job as holding

Object = dict[str, Any]


# The job controller's own pace (its DefaultJobPodFailureBackOff and MaxJobPodFailureBackOff):
# a pod that failed is replaced after 10 s, doubling with each failure since the last
# success, at most 10 minutes.
BACKOFF_FIRST, BACKOFF_MOST = 10.0, 600.0
# Why a Job failed: its condition's reason and message, and its Warning event's
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Job was active longer than specified deadline")
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")
POD_FAILURE_POLICY = (
    "PodFailurePolicy",
    "Pod was evicted and its Job's podFailurePolicy fails the Job",
)


@dataclass(slots=True)
class JobRecord:
    obj: Object
    next_index: int = 0
    complete: bool = False  # a complete Job is done with: it makes and deletes nothing more
    names: list[str] = field(default_factory=list)  # the pods it made that may still exist
    spec: JobSpec = field(default_factory=JobSpec)  # ``job_spec`` of ``obj``, as applied
    order: int = 0  # when it was first seen, among the Jobs: the order due Jobs go in
    started_at: float | None = None  # status.startTime: cleared while suspended
    failures: int = 0  # its pods that failed, all told (status.failed)
    own_deletes: set[str] = field(default_factory=set)  # pods it deleted itself
    failed_job: bool = False  # a pod's failure fails the Job (podFailurePolicy FailJob)
    failed_seen: int = 0  # its failed pods in the state when last reconciled
    failures_in_row: int = 0  # failed pods since the last one succeeded
    succeeded_seen: int = 0
    backoff_until: float | None = None  # no pod is made before then
    wake_at: float | None = None  # when it is to be reconciled on its own (its alarm)
    indexes: Indexes | None = None  # an Indexed Job's (``job_indexes``)


def _template_meta(job: Object) -> tuple[dict[str, str], dict[str, str]]:
    """The pod template's (labels, annotations); FieldError if misshapen."""
    labels = fields.string_map(job, "spec.template.metadata.labels")
    return labels, manifests.template_annotations(job)


def pod_for(job: Object, index: int) -> Object:
    """The pod the controller makes for ``job`` as its ``index``-th."""
    metadata = job["metadata"]
    template_labels, annotations = _template_meta(job)
    annotations = dict(annotations)
    own = (metadata.get("annotations") or {}).get(manifests.DURATION)
    if own is not None:
        annotations.setdefault(manifests.DURATION, own)
    labels = {
        **template_labels,
        "job-name": metadata["name"],
        "controller-uid": metadata.get("uid", ""),
    }
    pod_meta: Object = {
        "name": f"{metadata['name']}-{index}",
        "namespace": metadata["namespace"],
        "labels": labels,
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": metadata["name"],
                "uid": metadata.get("uid", ""),
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
    }
    if annotations:
        pod_meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": pod_meta,
        "spec": fields.copied(job["spec"]["template"]["spec"]),
    }


class JobController:
    def __init__(self, cluster: SimBackend) -> None:
        self.cluster = cluster
        self.jobs: dict[tuple[str, str], JobRecord] = {}
        self._by_uid: dict[str, JobRecord] = {}
        self._seen = 0
        # Jobs due to be reconciled on their own: a backoff over, a deadline reached.
        # (The alarms read the records, not the controller: no cycle through a bound
        # method, so a simulation is freed as soon as nothing refers to it.)
        self._alarms = timers.Alarms[str](
            functools.partial(_wake_at, self._by_uid), functools.partial(_order_of, self._by_uid)
        )

    def apply(self, job: Object) -> None:
        """Create or replace a Job (a replacement keeps its pods and its count)."""
        spec = job_spec(job)
        metadata = job["metadata"]
        key = (metadata["namespace"], metadata["name"])
        record = self.jobs.get(key)
        identity = self.cluster.identity(record.obj if record is not None else None)
        if record is None:
            self._seen += 1
            record = self.jobs[key] = JobRecord({}, order=self._seen)
            if self.cluster.history:
                self.cluster.created_at[manifests.ref_of(job)] = self.cluster.clock.now
        status = record.obj.get("status", {})
        record.obj = {**job, "metadata": {**metadata, **identity}, "status": status}
        record.spec = spec  # (its spec changes here only)
        if spec.indexed and record.indexes is None:
            record.indexes = Indexes()
        self._show(record)
        self._by_uid[identity["uid"]] = record
        self.cluster.touched.jobs.add(identity["uid"])
        group = holding.group_of(job)
        if group is not None:
            self.cluster.touched.holding.add((metadata["namespace"], group))
        self.cluster.changed()

    def done_with(self, pod: Object) -> bool:
        """May ``pod`` leave the state? Not while a Job that owns it is not complete (it
        counts its finished pods)."""
        for uid in owning_jobs(pod):
            record = self._by_uid.get(uid)
            if record is not None and not record.complete:
                return False
        return True

    def let_go(self, uids: Iterable[str], forget: bool) -> list[tuple[str, str]]:
        """Of the Jobs of ``uids``, those complete with no pod left in the state leave the
        scheduler's state (their deadlines end nothing any more; with history or
        without, so both record the same); with ``forget`` the controller forgets them
        too, as the API server's TTL-after-finished controller would delete them (a run
        that keeps no history: ``runner.Options.history``). The keys forgotten."""
        forgotten = []
        for uid in sorted(uids):
            record = self._by_uid.get(uid)
            if record is None or not record.complete or self.pods_of(record):
                continue
            metadata = record.obj["metadata"]
            key = (metadata["namespace"], metadata["name"])
            if self.cluster.state.get("Job", *key) is not None:
                self.cluster.state.delete("Job", *key)
            if not forget:
                continue
            del self._by_uid[uid]
            if self.jobs.get(key) is record:
                del self.jobs[key]
            self.cluster.touched.jobs.discard(uid)
            self.cluster.forget_object("Job", *key)
            forgotten.append(key)
        return forgotten

    def delete(self, key: tuple[str, str]) -> bool:
        """Delete the Job ``key`` as a foreground deletion does (a JobSet's restart or
        end): its pods first, the Job once none is left. True once it is gone."""
        record = self.jobs.get(key)
        if record is None:
            return True
        record.complete = True  # it makes and deletes nothing more
        for pod in self.pods_of(record):
            self.cluster.delete_pod(pod)
        if self.pods_of(record):
            return False
        del self.jobs[key]
        self._by_uid.pop(record.obj["metadata"]["uid"], None)
        if self.cluster.state.get("Job", *key) is not None:
            self.cluster.state.delete("Job", *key)
        self.cluster.forget_object("Job", *key)  # (its events: a new Job may take its name)
        self.cluster.changed()
        return True

    def touch_all(self) -> None:
        """Have every Job reconciled at the next call (something they may wait for came)."""
        self.cluster.touched.jobs.update(self._by_uid)

    def reconcile(self) -> None:
        """Bring every Job whose pods or spec changed, or whose alarm is due, to what
        its spec asks."""
        self.cluster.touched.jobs.update(self._alarms.pop_due(self.cluster.clock.now))
        touched = sorted(self.cluster.touched.jobs)
        for uid in touched:
            record = self._by_uid.get(uid)
            lost = self.cluster.touched.lost.pop(uid, ())  # (a done Job's: nothing to count)
            if record is not None and not record.complete:
                self._reconcile_one(record, self.pods_of(record), lost)
        self.cluster.touched.jobs.difference_update(touched)

    def next_event(self) -> float | None:
        """When the next Job is due to be reconciled on its own (None: none is)."""
        return self._alarms.next()

    def pods_of(self, record: JobRecord) -> list[Object]:
        """The pods ``record`` made that still exist (and are still its own)."""
        metadata = record.obj["metadata"]
        pods = []
        for name in record.names:
            pod = self.cluster.state.get("Pod", metadata["namespace"], name)
            owners = (pod or {}).get("metadata", {}).get("ownerReferences") or [{}]
            if pod is not None and owners[0].get("uid") == metadata["uid"]:
                pods.append(pod)
        record.names = [pod["metadata"]["name"] for pod in pods]
        return pods

    def _reconcile_one(
        self, record: JobRecord, pods: list[Object], lost: Iterable[tuple[str, bool]]
    ) -> None:
        """``lost``: its pods removed before they finished since it was last reconciled."""
        spec, now = record.spec, self.cluster.clock.now
        succeeded = sum(1 for p in pods if _phase(p) == "Succeeded")
        failed = [p["metadata"]["name"] for p in pods if _phase(p) == "Failed"]
        active = [p for p in pods if _phase(p) not in FINISHED and not _deleting(p)]
        counted, lost_failed = self._lost_failures(record, lost)
        self._count_finished(record, succeeded, len(failed), (len(counted), lost_failed), now)
        left = spec.completions - succeeded
        if record.indexes is not None:  # (each failed pod once: those counted are gone)
            new_failed = [name for name in failed if name in record.indexes.of_pod]
            succeeded = record.indexes.observe(pods, [*new_failed, *counted], spec)
            left = spec.completions - succeeded - len(record.indexes.failed)
        if spec.suspend or record.started_at is None:
            record.started_at = None if spec.suspend else now
        complete = succeeded >= spec.completions
        ended = None if complete else self._failure(record, now)
        record.complete = complete or ended is not None
        done = spec.suspend or record.complete
        wanted = 0 if done else min(spec.parallelism, left)
        backing_off = record.backoff_until is not None and now < record.backoff_until
        self._make_pods(record, 0 if backing_off else wanted - len(active), active)
        ref = ObjectRef("Job", record.obj["metadata"]["namespace"], record.obj["metadata"]["name"])
        for pod in _excess(active, len(active) - wanted):
            record.own_deletes.add(pod["metadata"]["name"])
            self.cluster.delete_pod(pod)
            message = f"Deleted pod: {pod['metadata']['name']}"
            self.cluster.record(ref, "Normal", "SuccessfulDelete", message)
        if ended is not None:
            self.cluster.record(ref, "Warning", *ended)
        self._write_status(record, max(wanted, 0), succeeded, complete, ended)
        self._set_alarm(record, now, done)

    def _lost_failures(
        self, record: JobRecord, lost: Iterable[tuple[str, bool]]
    ) -> tuple[list[str], int]:
        """Of its pods removed before they finished, but for those it deleted itself: those
        that count against its backoffLimit (not those evicted with DisruptionTarget that
        its podFailurePolicy ignores; one it says fail the Job, does; one whose index it
        says fail, fails the index: ``job_indexes``), and how many
        failed at all (each puts off its next pod, ignored or not, as Kubernetes' does)."""
        counted: list[str] = []
        failed = 0
        for name, disrupted in lost:
            if name in record.own_deletes:
                record.own_deletes.discard(name)
                continue
            action = record.spec.on_disruption if disrupted else "Count"
            record.failed_job |= action == "FailJob"
            if action == "FailIndex" and record.indexes is not None:
                record.indexes.fail_index_of(name)
            elif action != "Ignore":
                counted.append(name)
            failed += 1
        return counted, failed

    def _count_finished(
        self, record: JobRecord, succeeded: int, failed: int, lost: tuple[int, int], now: float
    ) -> None:
        """New failures (``failed``: its failed pods in the state; ``lost``: of those
        removed, how many count and how many failed) count against the backoffLimit and
        put off the next pod (10 s, doubling with each failure since the last success,
        at most 10 minutes)."""
        if succeeded > record.succeeded_seen:
            record.failures_in_row = 0
        new_in_state = max(failed - record.failed_seen, 0)
        counted, lost_failed = lost
        record.failures += new_in_state + counted
        if new_in_state + lost_failed > 0:
            record.failures_in_row += new_in_state + lost_failed
            delay = BACKOFF_FIRST * 2 ** (record.failures_in_row - 1)
            record.backoff_until = now + min(delay, BACKOFF_MOST)
        record.succeeded_seen, record.failed_seen = succeeded, failed

    def _failure(self, record: JobRecord, now: float) -> tuple[str, str] | None:
        """(reason, message) when the Job fails now: past its backoffLimit, or active
        (not suspended) for its activeDeadlineSeconds."""
        spec, started = record.spec, record.started_at
        if record.failed_job:
            return POD_FAILURE_POLICY
        failed_indexes = record.indexes.ended(spec) if record.indexes is not None else None
        if failed_indexes is not None:
            return failed_indexes
        if record.failures > spec.backoff_limit:
            return BACKOFF_LIMIT_EXCEEDED
        if spec.deadline is not None and started is not None and now >= started + spec.deadline:
            return DEADLINE_EXCEEDED
        return None

    def _set_alarm(self, record: JobRecord, now: float, done: bool) -> None:
        """Wake the Job when its backoff is over or its deadline comes, whichever is
        first (``done``: suspended or over, neither matters)."""
        times = []
        if not done and record.backoff_until is not None and record.backoff_until > now:
            times.append(record.backoff_until)
        if not done and record.spec.deadline is not None and record.started_at is not None:
            times.append(record.started_at + record.spec.deadline)
        wake = min(times, default=None)
        if wake != record.wake_at:
            record.wake_at = wake
            if wake is not None:
                self._alarms.set(record.obj["metadata"]["uid"], wake)

    def _make_pods(self, record: JobRecord, count: int, active: list[Object]) -> None:
        job = record.obj
        ref = ObjectRef("Job", job["metadata"]["namespace"], job["metadata"]["name"])
        indexes = record.indexes
        for index in (
            range(count) if indexes is None else indexes.to_make(active, record.spec, count)
        ):
            pod = pod_for(job, record.next_index)
            if indexes is not None:
                pod = indexed(pod, ref.name, index)
            refused = self.cluster.missing_priority_class(pod)
            if refused is not None:
                message = (
                    f"Error creating: pods {pod['metadata']['name']!r} is forbidden: {refused}"
                )
                self.cluster.record(ref, "Warning", "FailedCreate", message)
                break
            self.cluster.create(pod, owned=True)
            if indexes is not None:
                indexes.made(pod["metadata"]["name"], index)
            record.names.append(pod["metadata"]["name"])
            record.next_index += 1
            message = f"Created pod: {pod['metadata']['name']}"
            self.cluster.record(ref, "Normal", "SuccessfulCreate", message)

    def _write_status(
        self,
        record: JobRecord,
        active: int,
        succeeded: int,
        complete: bool,
        ended: tuple[str, str] | None,
    ) -> None:
        old = record.obj.get("status") or {}
        clock_ = self.cluster.clock
        now = clock.timestamp(clock_.now, clock_.keep_timestamps)
        status: Object = {"active": active, "succeeded": succeeded, "failed": record.failures}
        if record.started_at is not None:
            started = clock.timestamp(record.started_at, clock_.keep_timestamps)
            status["startTime"] = started
        if complete:
            status["completionTime"] = old.get("completionTime", now)
            status["conditions"] = [{"type": "Complete", "status": "True"}]
        elif ended is not None:
            reason, message = ended
            failed_condition = {"type": "Failed", "status": "True", "reason": reason}
            status["conditions"] = [{**failed_condition, "message": message}]
        elif record.spec.suspend:
            status["conditions"] = [{"type": "Suspended", "status": "True"}]
        if status != old:
            before, record.obj = record.obj, {**record.obj, "status": status}
            if not kept_fields.same_job(before, record.obj):  # (else the state drops it)
                self._show(record)
            self.cluster.changed()

    def _show(self, record: JobRecord) -> None:
        """Give the scheduler's state the Job as it is now, as its informer would: its
        own deadline ends its pods (``kbatch.cluster.job_records``). Not its counts and
        conditions alone: the state would take such a write as changing nothing it
        reads, and record none of it (``kbatch.cluster.kept_fields``)."""
        self.cluster.state.apply(record.obj)


def _wake_at(records: dict[str, JobRecord], uid: str) -> float | None:
    record = records.get(uid)
    return None if record is None else record.wake_at


def _order_of(records: dict[str, JobRecord], uid: str) -> int:
    return records[uid].order


def _phase(pod: Object) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def _deleting(pod: Object) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def _excess(active: list[Object], count: int) -> list[Object]:
    """The ``count`` pods to delete: unbound before bound, newest first."""
    if count <= 0:
        return []

    def keep_first(pod: Object) -> tuple[bool, str, str]:
        metadata = pod["metadata"]
        unbound = not (pod.get("spec") or {}).get("nodeName")
        return unbound, metadata["creationTimestamp"], metadata["uid"]

    ranked = sorted(active, key=keep_first, reverse=True)
    return ranked[:count]
