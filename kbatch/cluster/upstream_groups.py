"""Upstream's gang API (KEP-4671) in kbatch's terms: a ``scheduling.k8s.io`` PodGroup
(``v1beta1`` or ``v1alpha3``) becomes the kbatch PodGroup object it is scheduled as,
and kbatch's status of it becomes the conditions upstream defines for it.

Kubernetes' own PodGroup names a scheduling policy (``gang`` with ``minCount``, or
``basic``: each pod on its own), a priority class and, optionally, the Workload it was
made from; pods join it by ``spec.schedulingGroup.podGroupName``. kbatch schedules such
a group as one of its own gangs: ``minMember`` is ``gang.minCount`` (1 for ``basic``),
the queue is the group's label ``kbatch.io/queue`` (else the default queue), the
priority its ``priorityClassName``, and a topology constraint its
``kbatch.io/topology-required``. The object made here carries the upstream object's
name, namespace and uid, and ``ORIGIN_ANNOTATION`` saying where it came from, so the
scheduler core sees an ordinary job and the backends know where its status goes.

kbatch's status of the group (its phase and counts) has no field upstream: the backend
keeps it beside the object (``status``), and writes upstream only the condition
``PodGroupInitiallyScheduled``: True once the gang is placed (terminal, as upstream
says), else False with reason ``Unschedulable`` and kbatch's message while it waits.

Pure: no I/O. Bad input raises ObjectError naming the upstream object and its field.
"""

from collections.abc import Mapping
from typing import Any

from kbatch.api import API_VERSION as KBATCH_API_VERSION
from kbatch.api import DEFAULT_QUEUE, TOPOLOGY_REQUIRED_ANNOTATION
from kbatch.api.podgroup import ConditionType, PodGroupPhase, PodGroupStatus
from kbatch.cluster import fields, records
from kbatch.cluster.errors import ObjectError

API_GROUP = "scheduling.k8s.io"
API_VERSION = f"{API_GROUP}/v1alpha3"
# The versions read, the one preferred first: the same objects (a server serving both
# keeps one store), of the same shape in Kubernetes 1.37 (beta there, alpha before).
API_VERSIONS = (f"{API_GROUP}/v1beta1", API_VERSION)
RESOURCE = "podgroups"
COLLECTION = f"/apis/{API_VERSION}/{RESOURCE}"
# The queue of an upstream PodGroup (absent: the default queue).
QUEUE_LABEL = "kbatch.io/queue"
# On the kbatch object an upstream PodGroup becomes: the API it came from.
ORIGIN_ANNOTATION = "kbatch.io/upstream-api"
# Upstream's condition types and reasons (k8s.io/api scheduling/v1alpha3).
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
DISRUPTION_TARGET = "DisruptionTarget"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_PREEMPTION = "PreemptionByScheduler"
_PLACED = (PodGroupPhase.RUNNING, PodGroupPhase.COMPLETED, PodGroupPhase.UNKNOWN)


def status_path(namespace: str, name: str, api_version: str = API_VERSION) -> str:
    """An upstream PodGroup's status subresource (at ``api_version``)."""
    return f"/apis/{api_version}/namespaces/{namespace}/{RESOURCE}/{name}/status"


def origin_of(obj: Mapping[str, Any] | None) -> str | None:
    """The upstream API version ``obj`` (a PodGroup as the state holds it) was made
    from, or None when it is kbatch's own."""
    if not obj:
        return None
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    origin = annotations.get(ORIGIN_ANNOTATION)
    return origin if origin in API_VERSIONS else None


def is_upstream(obj: Mapping[str, Any] | None) -> bool:
    """Is ``obj`` (a PodGroup as the state holds it) made from an upstream PodGroup?"""
    return origin_of(obj) is not None


def kbatch_object(
    obj: Mapping[str, Any], status: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The kbatch PodGroup object the upstream PodGroup ``obj`` is scheduled as, with
    ``status`` (kbatch's, kept by the backend; None: as upstream's conditions say:
    admitted once it was placed, else pending). ObjectError naming the field."""
    ref = records.ref_of({**obj, "kind": "PodGroup"})
    try:
        return _kbatch_object(obj, status)
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from exc


def _kbatch_object(obj: Mapping[str, Any], status: Mapping[str, Any] | None) -> dict[str, Any]:
    name = fields.string(obj, "metadata.name")
    if not name:
        raise fields.FieldError("metadata.name", "required")
    fields.mapping(obj, "spec")
    if fields.string(obj, "spec.parentCompositePodGroupName"):
        why = "kbatch schedules a PodGroup on its own, not as part of a CompositePodGroup"
        raise fields.FieldError("spec.parentCompositePodGroupName", why)
    labels = fields.string_map(obj, "metadata.labels")
    annotations = dict(fields.string_map(obj, "metadata.annotations"))
    given = obj.get("apiVersion")
    annotations[ORIGIN_ANNOTATION] = given if given in API_VERSIONS else API_VERSION
    topology = _topology_key(obj)
    if topology:
        annotations[TOPOLOGY_REQUIRED_ANNOTATION] = topology
    spec: dict[str, Any] = {
        "minMember": min_member(obj),
        "queue": labels.get(QUEUE_LABEL) or DEFAULT_QUEUE,
    }
    priority_class = fields.string(obj, "spec.priorityClassName")
    if priority_class:
        spec["priorityClassName"] = priority_class
    meta = fields.mapping(obj, "metadata")
    metadata = {
        "name": name,
        "namespace": fields.string(obj, "metadata.namespace") or "default",
        "labels": labels,
        "annotations": annotations,
    }
    for key in ("uid", "creationTimestamp", "resourceVersion", "generation"):
        if meta.get(key) is not None:
            metadata[key] = meta[key]
    return {
        "apiVersion": KBATCH_API_VERSION,
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": spec,
        "status": dict(status) if status is not None else _first_status(obj),
    }


def min_member(obj: Mapping[str, Any]) -> int:
    """``spec.schedulingPolicy.gang.minCount``, or 1 for ``basic``; FieldError when the
    policy is missing, names both or neither, or the count is not a positive integer."""
    policy = fields.mapping(obj, "spec.schedulingPolicy")
    if not policy:
        raise fields.FieldError("spec.schedulingPolicy", "required: set gang or basic")
    gang, basic = policy.get("gang"), policy.get("basic")
    if gang is not None and basic is not None:
        raise fields.FieldError("spec.schedulingPolicy", "set one of gang and basic, not both")
    if gang is None:
        if basic is None:
            raise fields.FieldError("spec.schedulingPolicy", "set gang or basic")
        fields.mapping(obj, "spec.schedulingPolicy.basic")
        return 1
    fields.mapping(obj, "spec.schedulingPolicy.gang")
    count = fields.integer(obj, "spec.schedulingPolicy.gang.minCount")
    if count is None:
        raise fields.FieldError("spec.schedulingPolicy.gang.minCount", "required")
    if count < 1:
        why = f"must be at least 1, not {count}"
        raise fields.FieldError("spec.schedulingPolicy.gang.minCount", why)
    return count


def _topology_key(obj: Mapping[str, Any]) -> str:
    """The node label key of ``spec.schedulingConstraints.topology[0]`` ("" when none)."""
    constraints = fields.mappings(obj, "spec.schedulingConstraints.topology")
    if not constraints:
        return ""
    if len(constraints) > 1:
        why = "kbatch places a group within one topology level; give one"
        raise fields.FieldError("spec.schedulingConstraints.topology", why)
    key = fields.string(constraints[0], "key", at="spec.schedulingConstraints.topology[0]")
    if not key:
        raise fields.FieldError("spec.schedulingConstraints.topology[0].key", "required")
    return key


def _first_status(obj: Mapping[str, Any]) -> dict[str, Any]:
    """kbatch's status of a group it has kept none for (a new one, or a new leader's):
    admitted (Inqueue) once upstream says it was placed, else Pending. The phase rules
    move it on from its pods."""
    scheduled = initially_scheduled(obj)
    placed = scheduled is not None and scheduled.get("status") == "True"
    phase = PodGroupPhase.INQUEUE if placed else PodGroupPhase.PENDING
    return {"phase": phase.value}


def initially_scheduled(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The upstream object's ``PodGroupInitiallyScheduled`` condition, if it has one."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == INITIALLY_SCHEDULED:
            return condition
    return None


def disruption_to_write(
    upstream: Mapping[str, Any], message: str, now: str
) -> dict[str, Any] | None:
    """The ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``) that tells
    the upstream object ``upstream`` kbatch evicts its pods, as kube-scheduler tells a
    group it preempts; None when the object says so already."""
    status = upstream.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for current in conditions if isinstance(conditions, list) else ():
        if (
            isinstance(current, Mapping)
            and current.get("type") == DISRUPTION_TARGET
            and current.get("status") == "True"
        ):
            return None
    condition: dict[str, Any] = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": REASON_PREEMPTION,
        "message": message[:32768],
        "lastTransitionTime": now,
    }
    generation = (upstream.get("metadata") or {}).get("generation")
    if isinstance(generation, int):
        condition["observedGeneration"] = generation
    return condition


def condition_to_write(
    status: PodGroupStatus, upstream: Mapping[str, Any], now: str
) -> dict[str, Any] | None:
    """The ``PodGroupInitiallyScheduled`` condition kbatch's ``status`` of the group says,
    for the upstream object ``upstream`` as last seen; None when there is nothing new to
    write (the same words, a True already: terminal, as upstream keeps it, or a status
    that says neither placed nor why not). ``now``: RFC 3339, the transition's time."""
    current = initially_scheduled(upstream)
    if current is not None and current.get("status") == "True":
        return None
    by_type = {c.type: c for c in status.conditions}
    if status.phase in _PLACED:
        scheduled = by_type.get(ConditionType.SCHEDULED)
        message = scheduled.message if scheduled is not None and scheduled.message else ""
        wanted = ("True", REASON_SCHEDULED, message or "kbatch placed the gang")
    else:
        waiting = by_type.get(ConditionType.UNSCHEDULABLE)
        if waiting is None or waiting.status != "True":
            return None
        why = waiting.message or waiting.reason or "the gang does not fit yet"
        wanted = ("False", REASON_UNSCHEDULABLE, why)
    if (
        current is not None
        and (
            current.get("status"),
            current.get("reason"),
            current.get("message"),
        )
        == wanted
    ):
        return None
    same_status = current is not None and current.get("status") == wanted[0]
    condition: dict[str, Any] = {
        "type": INITIALLY_SCHEDULED,
        "status": wanted[0],
        "reason": wanted[1],
        "message": wanted[2][:32768],
        "lastTransitionTime": (current or {}).get("lastTransitionTime") if same_status else now,
    }
    generation = (upstream.get("metadata") or {}).get("generation")
    if isinstance(generation, int):
        condition["observedGeneration"] = generation
    return condition
