"""What the simulated API server refuses of an object before admission: the wrong shape
(its schema) or a value out of range (its validation), in kbatch's words naming the field.

    refusal(obj)   # "spec.minMember: must be >= 1, not -1"; None when acceptable

The checks are the cluster layer's own parsers (``kbatch.cluster.records``, which
refuse the same object in ``kbatch run``), plus what only the simulator reads: a Job's
spec and its pod template (the pod its controller makes must itself be acceptable), a
JobSet's spec and the Jobs it makes (``kbatch.sim.jobset_spec``), a
PriorityClass's fields, and the simulation annotations ``kbatch.io/sim-submit-at`` and
``kbatch.io/sim-duration``. A missing PriorityClass is the API server's priority
admission (``SimBackend.refusal``); the webhooks' checks are ``kbatch.sim.admission``.
"""

from collections.abc import Callable, Mapping
from typing import Any

from kbatch.api.quantity import format_quantity
from kbatch.cluster import dra_records, fields, podspec, records, upstream_groups, volcano
from kbatch.cluster.errors import ObjectError
from kbatch.sim import (
    clock,
    job_spec,
    jobs,
    jobset_spec,
    manifests,
    vcjob_spec,
    volume_validation,
)

Object = Mapping[str, Any]
# The highest value of a PriorityClass not named system-* (HighestUserDefinablePriority).
HIGHEST_USER_PRIORITY = 1_000_000_000


def refusal(obj: Object) -> str | None:
    """Why the API server refuses ``obj`` (``field: why``), or None."""
    try:
        _metadata(obj)
        _CHECKS.get(str(obj["kind"]), _nothing)(_as_created(obj))
    except ObjectError as exc:
        return f"{exc.field}: {exc.why}" if exc.field else exc.why
    except (fields.FieldError, clock.DurationError) as exc:
        return str(exc)
    return None


def _metadata(obj: Object) -> None:
    """What every kind shares: metadata's types, the simulation annotations, and a
    ``spec`` and ``status`` that are maps."""
    fields.string(obj, "metadata.namespace")
    fields.string_map(obj, "metadata.labels")
    annotations = fields.string_map(obj, "metadata.annotations")
    for key in (manifests.SUBMIT_AT, manifests.DURATION):
        if key in annotations:
            clock.parse_duration(annotations[key], f"metadata.annotations.{key}")
    for i, owner in enumerate(fields.mappings(obj, "metadata.ownerReferences")):
        for key in ("apiVersion", "kind", "name", "uid"):
            if not fields.string(owner, key, at=f"metadata.ownerReferences[{i}]"):
                raise fields.FieldError(f"metadata.ownerReferences[{i}].{key}", "required")
    fields.mapping(obj, "spec")
    fields.mapping(obj, "status")


def _as_created(obj: Object) -> Object:
    """``obj`` without what the API server sets itself on creation (uid, creationTimestamp):
    whatever the input says there is not kept, so it is not checked either."""
    metadata = {k: v for k, v in obj["metadata"].items() if k not in ("uid", "creationTimestamp")}
    return {**obj, "metadata": metadata}


def _nothing(obj: Object) -> None:
    pass


def _pod(obj: Object) -> None:
    pod = records.parse_pod(obj)
    if pod.gates and pod.node_name:
        raise fields.FieldError(
            "spec.nodeName", "cannot be set until all schedulingGates have been removed"
        )
    _pod_level_requests(obj["spec"])
    volume_validation.ephemeral_claims(obj)


def _pod_level_requests(spec: Object) -> None:
    """A pod's own request of a resource (``spec.resources``) is at least what its
    containers request of it, as the API server validates it."""
    containers = podspec.containers_request(spec)
    for name, value in podspec.pod_level(spec, containers).items():
        if value < containers.get(name, 0.0):
            at_least = format_quantity(name, containers[name])
            raise fields.FieldError(
                f"spec.resources.requests[{name}]",
                f"must be at least its containers' requests of {at_least}, "
                f"not {format_quantity(name, value)}",
            )


def _job(obj: Object) -> None:
    """The Job's own fields, then the pod its controller would make from the template."""
    if vcjob_spec.is_vcjob(obj):
        _vcjob(obj)
        return
    job_spec.job_spec(dict(obj))
    annotations = manifests.template_annotations(dict(obj))
    if manifests.DURATION in annotations:
        where = f"spec.template.metadata.annotations.{manifests.DURATION}"
        clock.parse_duration(annotations[manifests.DURATION], where)
    try:
        pod = jobs.pod_for(dict(obj), 0)
        records.parse_pod(pod)
        volume_validation.ephemeral_claims(pod)
    except ObjectError as exc:
        # The pod's fields (spec..., metadata...) are the template's, one level down.
        detail = f"{exc.field}: {exc.why}" if exc.field else exc.why
        raise ObjectError(exc.ref, "", f"spec.template.{detail}") from exc


def _vcjob(obj: Object) -> None:
    """A vcjob's own fields, then each task's first pod (its fields one level down)."""
    job = {**obj, "metadata": {**obj["metadata"], "uid": ""}}
    spec = vcjob_spec.vcjob_spec(job)
    for i, task in enumerate(spec.tasks):
        where = f"spec.tasks[{i}].template.metadata.annotations.{manifests.DURATION}"
        duration = (task.template.get("metadata") or {}).get("annotations", {})
        if manifests.DURATION in duration:
            clock.parse_duration(duration[manifests.DURATION], where)
        try:
            records.parse_pod(vcjob_spec.pod_for(job, spec, task, 0, 0))
        except ObjectError as exc:
            detail = f"{exc.field}: {exc.why}" if exc.field else exc.why
            raise ObjectError(exc.ref, "", f"spec.tasks[{i}].template.{detail}") from exc


def _jobset(obj: Object) -> None:
    """The JobSet's own fields, then each Job it would make (their fields one level down,
    under the replicated Job's template)."""
    spec = jobset_spec.jobset_spec(dict(obj))
    for which in range(len(spec.replicated)):
        try:
            _job(jobset_spec.child_job(dict(obj), spec, which, 0, 0))
        except ObjectError as exc:
            detail = f"{exc.field}: {exc.why}" if exc.field else exc.why
            at = f"spec.replicatedJobs[{which}].template"
            raise ObjectError(exc.ref, "", f"{at}.{detail}") from exc


def _priority_class(obj: Object) -> None:
    record = records.parse_priority_class(obj)
    ref = records.ref_of(obj)
    if record.value > HIGHEST_USER_PRIORITY and not record.name.startswith("system-"):
        raise ObjectError(
            ref,
            "value",
            f"must be <= {HIGHEST_USER_PRIORITY} (higher values are reserved for system-* "
            f"classes), not {record.value}",
        )
    global_default = obj.get("globalDefault")
    if global_default is not None and not isinstance(global_default, bool):
        raise ObjectError(
            ref, "globalDefault", f"expected true or false, not {fields.shown(global_default)}"
        )


def _pod_group(obj: Object) -> object:
    """kbatch's PodGroup, or upstream's that could not be read as one (``manifests``):
    refused naming its field."""
    if obj.get("apiVersion") in upstream_groups.API_VERSIONS:
        return upstream_groups.kbatch_object(obj)
    if volcano.is_volcano(obj):
        return volcano.kbatch_object(obj)
    return records.parse_pod_group(obj)


def _queue(obj: Object) -> object:
    """kbatch's Queue, or Volcano's that could not be read as one (``manifests``):
    refused naming its field."""
    if volcano.is_volcano(obj):
        return volcano.kbatch_object(obj)
    return records.parse_queue(obj)


_CHECKS: dict[str, Callable[[Object], object]] = {
    "Namespace": _nothing,
    "Node": records.parse_node,
    "Pod": _pod,
    "PodGroup": _pod_group,
    "Queue": _queue,
    "ResourceQuota": records.parse_quota,
    "PriorityClass": _priority_class,
    "Job": _job,
    "JobSet": _jobset,
    "PersistentVolumeClaim": volume_validation.claim,
    "PersistentVolume": volume_validation.volume,
    "StorageClass": volume_validation.storage_class,
    "CSINode": volume_validation.csi_node,
    "ResourceClaim": dra_records.parse_resource_claim,
    "DeviceClass": dra_records.parse_device_class,
    "ResourceSlice": dra_records.parse_resource_slice,
}
