"""Parsed records: each object parsed once, when it is applied.

A bad object raises ObjectError naming the object and the field, and is not stored.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.api.podgroup import PodGroup
from kbatch.api.queue import Queue
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.podspec import ParsedSpec, parse_spec, parse_tolerations
from kbatch.cluster.quantity import amounts
from kbatch.operators.scheduler.framework.podspec import Taint

M = TypeVar("M", bound=BaseModel)

CLUSTER_SCOPED = frozenset({"Node", "Queue", "PriorityClass", "Namespace"})


def ref_of(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    kind = obj.get("kind", "object")
    name = meta.get("name", "<unnamed>")
    namespace = meta.get("namespace")
    return (
        f"{kind} {namespace}/{name}"
        if namespace and kind not in CLUSTER_SCOPED
        else f"{kind} {name}"
    )


def timestamp(value: object) -> float:
    """RFC 3339 to epoch seconds (0 when absent)."""
    if not value:
        return 0.0
    if isinstance(value, datetime):
        return value.timestamp()
    return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    labels: dict[str, str]
    allocatable: dict[str, float]
    taints: tuple[Taint, ...]
    unschedulable: bool
    conditions: dict[str, str]


@dataclass(frozen=True, slots=True)
class PodRecord:
    uid: str
    namespace: str
    name: str
    created: float
    scheduler_name: str
    group: str | None
    node_name: str | None
    phase: str
    deleting: bool
    priority: int | None
    spec: ParsedSpec


@dataclass(frozen=True, slots=True)
class PriorityClassRecord:
    name: str
    value: int
    global_default: bool


@dataclass(frozen=True, slots=True)
class QuotaRecord:
    namespace: str
    name: str
    hard: dict[str, float]


def parse_node(obj: Mapping[str, Any]) -> NodeRecord:
    ref = ref_of(obj)
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    try:
        allocatable = amounts(
            status.get("allocatable") or status.get("capacity") or {}, "status.allocatable"
        )
    except ValueError as exc:
        raise ObjectError(ref, "", str(exc)) from exc
    taints = []
    for i, taint in enumerate(spec.get("taints") or []):
        effect = taint.get("effect")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute") or not taint.get("key"):
            raise ObjectError(
                ref,
                f"spec.taints[{i}]",
                "needs a key and an effect (NoSchedule, PreferNoSchedule or NoExecute)",
            )
        taints.append(Taint(str(taint["key"]), str(taint.get("value") or ""), effect))
    conditions = {str(c.get("type")): str(c.get("status")) for c in status.get("conditions") or []}
    return NodeRecord(
        name=meta["name"],
        labels={"kubernetes.io/hostname": meta["name"], **(meta.get("labels") or {})},
        allocatable=allocatable,
        taints=tuple(taints),
        unschedulable=bool(spec.get("unschedulable", False)),
        conditions=conditions,
    )


def parse_pod(obj: Mapping[str, Any], previous: PodRecord | None = None) -> PodRecord:
    """``previous``: the record of the same pod before this update. A pod's spec is
    immutable but for a few fields, so its parse is reused while the uid, labels and
    tolerations (the mutable parts the scheduler reads) stay the same."""
    ref = ref_of(obj)
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    namespace = meta.get("namespace") or "default"
    if not spec.get("containers"):
        raise ObjectError(ref, "spec.containers", "a pod needs at least one container")
    labels = meta.get("labels") or {}
    uid = str(meta.get("uid") or f"{namespace}/{meta['name']}")
    if previous is not None and _same_spec(previous, uid, labels, spec):
        parsed = previous.spec
    else:
        try:
            parsed = parse_spec(namespace, labels, spec)
        except (ValueError, KeyError, TypeError) as exc:
            raise ObjectError(ref, "", str(exc)) from exc
    priority = spec.get("priority")
    return PodRecord(
        uid=uid,
        namespace=namespace,
        name=meta["name"],
        created=timestamp(meta.get("creationTimestamp")),
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        group=(meta.get("annotations") or {}).get(GROUP_NAME_ANNOTATION) or None,
        node_name=spec.get("nodeName") or None,
        phase=str(status.get("phase") or "Pending"),
        deleting=bool(meta.get("deletionTimestamp")),
        priority=int(priority) if isinstance(priority, int) else None,
        spec=parsed,
    )


def _same_spec(
    previous: PodRecord, uid: str, labels: Mapping[str, str], spec: Mapping[str, Any]
) -> bool:
    if previous.uid != uid or dict(previous.spec.labels) != labels:
        return False
    try:
        return parse_tolerations(spec.get("tolerations")) == previous.spec.tolerations
    except (ValueError, KeyError, TypeError):
        return False  # parse again, and report it


def validate_model(model: type[M], obj: Mapping[str, Any]) -> M:
    """Validate with a pydantic model; errors name the object and the field."""
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ObjectError(ref_of(obj), field, first["msg"]) from exc


def parse_pod_group(obj: Mapping[str, Any]) -> PodGroup:
    group = validate_model(PodGroup, obj)
    _check_quantities(obj, group.spec.min_resources, "spec.minResources")
    return group


def parse_queue(obj: Mapping[str, Any]) -> Queue:
    queue = validate_model(Queue, obj)
    _check_quantities(obj, queue.spec.capability, "spec.capability")
    return queue


def _check_quantities(obj: Mapping[str, Any], values: Mapping[str, str] | None, field: str) -> None:
    try:
        amounts(values, field)
    except ValueError as exc:
        raise ObjectError(ref_of(obj), "", str(exc)) from exc


def parse_priority_class(obj: Mapping[str, Any]) -> PriorityClassRecord:
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ObjectError(ref_of(obj), "value", f"expected an integer, not {value!r}")
    return PriorityClassRecord(obj["metadata"]["name"], value, bool(obj.get("globalDefault")))


def parse_quota(obj: Mapping[str, Any]) -> QuotaRecord:
    meta = obj["metadata"]
    try:
        hard = amounts((obj.get("spec") or {}).get("hard") or {}, "spec.hard")
    except ValueError as exc:
        raise ObjectError(ref_of(obj), "", str(exc)) from exc
    return QuotaRecord(meta.get("namespace") or "default", meta["name"], hard)
