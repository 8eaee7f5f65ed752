"""What a pod record reads of a pod's fields (but its spec's parse and its conditions),
for a pod whose every such field has the plain type decoded JSON gives it: the types
checked together, not field by field (``pod_records._pod_fields`` reads any other pod
field by field, which names a bad field); and the claims its volumes name (``claims_of``)."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.cluster import fields
from kbatch.cluster.record_parsing import timestamp


@dataclass(slots=True)
class PodFields:
    """What a record reads of a pod but its spec's parse and its conditions, checked."""

    namespace: str
    name: str
    spec: Mapping[str, Any]
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    node_name: str | None
    scheduler_name: str | None
    priority: int | None
    phase: str | None
    nominated_node: str | None
    uid: str
    created: float
    started: float | None
    deleting: bool
    group: str | None
    # status.conditions, when checked to be a list of maps; None: read them later (so
    # that a pod with more than one bad field is refused naming the same one first)
    conditions: list[Mapping[str, Any]] | None


# The types of a pod's fields as decoded JSON gives them (exactly these: a subclass, a
# bool for an integer, a falsy value for a map, ... are read field by field).
_TEXT = frozenset({str})
_TEXT_OR_NONE = frozenset({str, type(None)})
_INTEGER_OR_NONE = frozenset({int, type(None)})
_MAP = frozenset({dict})


def plain_fields(obj: Mapping[str, Any]) -> PodFields | None:
    """``pod_records._pod_fields(obj)`` for a pod whose every field a record reads has
    the plain type decoded JSON gives it (a listed or watched pod): the types checked
    together (the set of those met), not field by field from the pod down. None, before
    anything is refused, when a field has another (maybe a bad one): read field by
    field, which names it."""
    meta, spec, status = obj.get("metadata"), obj.get("spec"), obj.get("status")
    if type(meta) is not dict or type(spec) is not dict:
        return None
    status = {} if status is None else status
    if type(status) is not dict:
        return None
    labels, annotations = meta.get("labels"), meta.get("annotations")
    containers, conditions = spec.get("containers"), status.get("conditions")
    # (absent or null: empty, as fields.mapping reads them)
    labels = {} if labels is None else labels
    annotations = {} if annotations is None else annotations
    conditions = [] if conditions is None else conditions
    if (
        type(labels) is not dict
        or type(annotations) is not dict
        or type(containers) is not list
        or type(conditions) is not list
        or {*map(type, labels), *map(type, labels.values())} - _TEXT
        or {*map(type, annotations), *map(type, annotations.values())} - _TEXT
        or {*map(type, containers)} != _MAP  # (none: refused, read field by field)
        or {*map(type, conditions)} - _MAP
    ):
        return None
    name, namespace, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
    node_name, scheduler_name = spec.get("nodeName"), spec.get("schedulerName")
    phase, nominated = status.get("phase"), status.get("nominatedNodeName")
    priority = spec.get("priority")
    texts = (
        namespace,
        uid,
        node_name,
        scheduler_name,
        phase,
        nominated,
        spec.get("priorityClassName"),
    )
    if (
        not name
        or type(name) is not str
        or {*map(type, texts)} - _TEXT_OR_NONE
        or {type(priority), type(spec.get("terminationGracePeriodSeconds"))} - _INTEGER_OR_NONE
    ):
        return None
    group = annotations.get(GROUP_NAME_ANNOTATION)
    if not group:  # (the upstream PodGroup is read only when the annotation names none)
        scheduling = spec.get("schedulingGroup")
        if scheduling is not None:
            group = scheduling.get("podGroupName") if type(scheduling) is dict else 0
            if group is not None and type(group) is not str:
                return None
        group = group or None
    namespace = namespace or "default"
    start_time = status.get("startTime")
    return PodFields(
        namespace, name, spec, labels, annotations, node_name, scheduler_name, priority,
        phase, nominated, uid or f"{namespace}/{name}",
        timestamp(meta.get("creationTimestamp")),
        timestamp(start_time, "status.startTime") if start_time else None,
        bool(meta.get("deletionTimestamp")), group, conditions,
    )  # fmt: skip


def claims_of(spec: Mapping[str, Any], pod: str) -> tuple[str, ...]:
    """The PersistentVolumeClaims ``spec.volumes`` names: a ``persistentVolumeClaim``'s
    claimName, and for an ``ephemeral`` volume the claim Kubernetes makes for it,
    named pod-volume (FieldError when either name is missing)."""
    if not spec.get("volumes"):
        return ()
    found = []
    for i, volume in enumerate(fields.mappings(spec, "volumes", at="spec")):
        where = f"spec.volumes[{i}]"
        if volume.get("persistentVolumeClaim") is not None:
            claim = fields.string(volume, "persistentVolumeClaim.claimName", at=where)
            if not claim:
                raise fields.FieldError(f"{where}.persistentVolumeClaim.claimName", "required")
            found.append(claim)
        elif volume.get("ephemeral") is not None:
            name = fields.string(volume, "name", at=where)
            if not name:
                raise fields.FieldError(f"{where}.name", "required")
            found.append(f"{pod}-{name}")
    return tuple(found)
