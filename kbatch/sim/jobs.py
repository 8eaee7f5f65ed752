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
template does not set one. ``backoffLimit`` is not modelled: the simulator
never fails a pod.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kbatch.cluster import fields
from kbatch.cluster.errors import ObjectError
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.sim import clock, manifests
from kbatch.sim.backend import FINISHED, SimBackend
from kbatch.webhooks.admission import job as holding

Object = dict[str, Any]


@dataclass(slots=True)
class JobRecord:
    obj: Object
    next_index: int = 0
    complete: bool = False  # a complete Job is done with: it makes and deletes nothing more
    names: list[str] = field(default_factory=list)  # the pods it made that may still exist
    spec_ints: tuple[int, int, bool] = (1, 1, False)  # ``job_spec_ints`` of ``obj``, as applied


def job_spec_ints(job: Object) -> tuple[int, int, bool]:
    """(parallelism, completions, suspend), or ObjectError naming the field; the pod
    template must be well formed, too."""
    ref = manifests.ref_of(job)
    try:
        parallelism, completions = (
            fields.integer(job, f"spec.{name}") for name in ("parallelism", "completions")
        )
        suspend = fields.value(job, "spec.suspend")
        _template_meta(job)
        template_spec = fields.value(job, "spec.template.spec")
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from exc
    for name, number in (("parallelism", parallelism), ("completions", completions)):
        if number is not None and number < 0:
            raise ObjectError(
                ref, f"spec.{name}", f"expected a non-negative integer, not {number!r}"
            )
    if not isinstance(suspend, bool | None):
        raise ObjectError(ref, "spec.suspend", f"expected true or false, not {suspend!r}")
    if not isinstance(template_spec, dict):
        raise ObjectError(ref, "spec.template.spec", "a Job needs a pod template")
    parallelism = 1 if parallelism is None else parallelism
    completions = parallelism if completions is None else completions
    return parallelism, completions, bool(suspend)


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

    def apply(self, job: Object) -> None:
        """Create or replace a Job (a replacement keeps its pods and its count)."""
        spec_ints = job_spec_ints(job)
        metadata = job["metadata"]
        key = (metadata["namespace"], metadata["name"])
        record = self.jobs.get(key)
        identity = self.cluster.identity(record.obj if record is not None else None)
        if record is None:
            record = self.jobs[key] = JobRecord({})
            if self.cluster.history:
                self.cluster.created_at[manifests.ref_of(job)] = self.cluster.clock.now
        status = record.obj.get("status", {})
        record.obj = {**job, "metadata": {**metadata, **identity}, "status": status}
        record.spec_ints = spec_ints  # (its spec changes here only)
        self._by_uid[identity["uid"]] = record
        self.cluster.touched.jobs.add(identity["uid"])
        group = holding.group_of(job)
        if group is not None:
            self.cluster.touched.holding.add((metadata["namespace"], group))
        self.cluster.changed()

    def done_with(self, pod: Object) -> bool:
        """May ``pod`` leave the state? Not while a Job that owns it is not complete (it
        counts its finished pods)."""
        for owner in pod["metadata"].get("ownerReferences") or []:
            if owner.get("kind") == "Job":
                record = self._by_uid.get(str(owner.get("uid")))
                if record is not None and not record.complete:
                    return False
        return True

    def forget_complete(self, uids: Iterable[str]) -> list[tuple[str, str]]:
        """Of the Jobs of ``uids``, forget those complete with no pod left in the state,
        as the API server's TTL-after-finished controller would delete them (a run that
        keeps no history: ``runner.Options.history``); their keys."""
        forgotten = []
        for uid in sorted(uids):
            record = self._by_uid.get(uid)
            if record is None or not record.complete or self._pods_of(record):
                continue
            metadata = record.obj["metadata"]
            key = (metadata["namespace"], metadata["name"])
            del self._by_uid[uid]
            if self.jobs.get(key) is record:
                del self.jobs[key]
            self.cluster.touched.jobs.discard(uid)
            self.cluster.forget_object("Job", *key)
            forgotten.append(key)
        return forgotten

    def touch_all(self) -> None:
        """Have every Job reconciled at the next call (something they may wait for came)."""
        self.cluster.touched.jobs.update(self._by_uid)

    def reconcile(self) -> None:
        """Bring every Job whose pods or spec changed to what its spec asks."""
        touched = sorted(self.cluster.touched.jobs)
        for uid in touched:
            record = self._by_uid.get(uid)
            if record is not None and not record.complete:
                self._reconcile_one(record, self._pods_of(record))
        self.cluster.touched.jobs.difference_update(touched)

    def _pods_of(self, record: JobRecord) -> list[Object]:
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

    def _reconcile_one(self, record: JobRecord, pods: list[Object]) -> None:
        job = record.obj
        parallelism, completions, suspend = record.spec_ints
        succeeded = sum(1 for p in pods if _phase(p) == "Succeeded")
        failed = sum(1 for p in pods if _phase(p) == "Failed")
        active = [p for p in pods if _phase(p) not in FINISHED and not _deleting(p)]
        complete = record.complete = succeeded >= completions
        wanted = 0 if suspend or complete else min(parallelism, completions - succeeded)
        ref = ObjectRef("Job", job["metadata"]["namespace"], job["metadata"]["name"])
        for _ in range(wanted - len(active)):
            pod = pod_for(job, record.next_index)
            refused = self.cluster.missing_priority_class(pod)
            if refused is not None:
                message = (
                    f"Error creating: pods {pod['metadata']['name']!r} is forbidden: {refused}"
                )
                self.cluster.record(ref, "Warning", "FailedCreate", message)
                break
            self.cluster.create(pod, owned=True)
            record.names.append(pod["metadata"]["name"])
            record.next_index += 1
            message = f"Created pod: {pod['metadata']['name']}"
            self.cluster.record(ref, "Normal", "SuccessfulCreate", message)
        for pod in _excess(active, len(active) - wanted):
            self.cluster.delete_pod(pod)
            message = f"Deleted pod: {pod['metadata']['name']}"
            self.cluster.record(ref, "Normal", "SuccessfulDelete", message)
        self._write_status(record, max(wanted, 0), succeeded, failed, complete, suspend)

    def _write_status(
        self,
        record: JobRecord,
        active: int,
        succeeded: int,
        failed: int,
        complete: bool,
        suspend: bool,
    ) -> None:
        old = record.obj.get("status") or {}
        now = clock.timestamp(self.cluster.clock.now, self.cluster.clock.keep_timestamps)
        status: Object = {"active": active, "succeeded": succeeded, "failed": failed}
        if "startTime" in old or not suspend:
            status["startTime"] = old.get("startTime", now)
        if complete:
            status["completionTime"] = old.get("completionTime", now)
            status["conditions"] = [{"type": "Complete", "status": "True"}]
        elif suspend:
            status["conditions"] = [{"type": "Suspended", "status": "True"}]
        if status != old:
            record.obj = {**record.obj, "status": status}
            self.cluster.changed()


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
