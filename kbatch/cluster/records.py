"""Parsed records: each object parsed once, when it is applied.

A bad object raises ObjectError naming the object and the field, and is not stored.
"""

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.api.podgroup import PodGroup
from kbatch.api.queue import Queue
from kbatch.cluster import fields
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.podspec import ParsedSpec, parse_spec, spec_key
from kbatch.cluster.quantity import amounts
from kbatch.operators.scheduler.core.framework.podspec import Taint

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
    nominated_node: str | None = None  # status.nominatedNodeName: room kept for it there


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


@contextmanager
def _naming(ref: str) -> Iterator[None]:
    """Within it, a FieldError or a bad quantity becomes an ObjectError naming ``ref``."""
    try:
        yield
    except ObjectError:
        raise
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from exc
    except ValueError as exc:
        raise ObjectError(ref, "", str(exc)) from exc


def parse_node(obj: Mapping[str, Any]) -> NodeRecord:
    ref = ref_of(obj)
    with _naming(ref):
        status = fields.mapping(obj, "status")
        allocatable = amounts(
            status.get("allocatable") or status.get("capacity") or {}, "status.allocatable"
        )
        raw_taints = fields.mappings(obj, "spec.taints")
        conditions = {
            str(c.get("type")): str(c.get("status"))
            for c in fields.mappings(obj, "status.conditions")
        }
        labels = fields.string_map(obj, "metadata.labels")
        unschedulable = fields.value(obj, "spec.unschedulable")
    taints = []
    for i, taint in enumerate(raw_taints):
        effect = taint.get("effect")
        if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute") or not taint.get("key"):
            raise ObjectError(
                ref,
                f"spec.taints[{i}]",
                "needs a key and an effect (NoSchedule, PreferNoSchedule or NoExecute)",
            )
        taints.append(Taint(str(taint["key"]), str(taint.get("value") or ""), effect))
    name = obj["metadata"]["name"]
    return NodeRecord(
        name=name,
        labels={"kubernetes.io/hostname": name, **labels},
        allocatable=allocatable,
        taints=tuple(taints),
        unschedulable=bool(unschedulable),
        conditions=conditions,
    )


@dataclass(frozen=True, slots=True)
class _PodFields:
    """The scalar fields of a pod the scheduler reads, type-checked."""

    labels: dict[str, str]
    annotations: dict[str, str]
    node_name: str | None
    scheduler_name: str | None
    priority: int | None
    phase: str | None
    nominated_node: str | None


def _pod_fields(obj: Mapping[str, Any]) -> _PodFields:
    fields.mapping(obj, "status")
    fields.integer(obj, "spec.terminationGracePeriodSeconds")
    fields.string(obj, "spec.priorityClassName")
    return _PodFields(
        labels=fields.string_map(obj, "metadata.labels"),
        annotations=fields.string_map(obj, "metadata.annotations"),
        node_name=fields.string(obj, "spec.nodeName"),
        scheduler_name=fields.string(obj, "spec.schedulerName"),
        priority=fields.integer(obj, "spec.priority"),
        phase=fields.string(obj, "status.phase"),
        nominated_node=fields.string(obj, "status.nominatedNodeName"),
    )


def parse_pod(obj: Mapping[str, Any], previous: PodRecord | None = None) -> PodRecord:
    """``previous``: the record of the same pod before this update. Its parsed spec is
    reused while everything it was parsed from is the same (``_same_spec``)."""
    ref = ref_of(obj)
    meta = obj["metadata"]
    namespace = meta.get("namespace") or "default"
    with _naming(ref):
        spec = fields.mapping(obj, "spec")
        if not fields.mappings(obj, "spec.containers"):
            raise ObjectError(ref, "spec.containers", "a pod needs at least one container")
        pod = _pod_fields(obj)
    uid = str(meta.get("uid") or f"{namespace}/{meta['name']}")
    if previous is not None and _same_spec(previous, uid, namespace, pod.labels, spec):
        parsed = previous.spec
    else:
        try:
            parsed = parse_spec(namespace, pod.labels, spec)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ObjectError(ref, "", str(exc)) from exc
    return PodRecord(
        uid=uid,
        namespace=namespace,
        name=meta["name"],
        created=timestamp(meta.get("creationTimestamp")),
        scheduler_name=pod.scheduler_name or "default-scheduler",
        group=pod.annotations.get(GROUP_NAME_ANNOTATION) or None,
        node_name=pod.node_name or None,
        phase=pod.phase or "Pending",
        deleting=bool(meta.get("deletionTimestamp")),
        priority=pod.priority,
        spec=parsed,
        nominated_node=pod.nominated_node or None,
    )


def _same_spec(
    previous: PodRecord,
    uid: str,
    namespace: str,
    labels: Mapping[str, str],
    spec: Mapping[str, Any],
) -> bool:
    """Whether ``previous``'s parsed spec still holds: the same pod, parsed from the same
    labels and spec fields (requests, selectors, affinity, tolerations, ports, priority
    class). Resources may change in place (in-place pod resize), so nothing is assumed
    immutable."""
    return previous.uid == uid and previous.spec.key == spec_key(namespace, labels, spec)


def validate_model(model: type[M], obj: Mapping[str, Any]) -> M:
    """Validate with a pydantic model; errors name the object and the field, in kbatch's
    words (``explain``)."""
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise ObjectError(ref_of(obj), field, explain(first)) from exc


# What a pydantic error type says the field should have been.
_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a map",
    "model_type": "a map",
    "model_attributes_type": "a map",
    "list_type": "a list",
    "tuple_type": "a list",
}
_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}


def explain(error: Mapping[str, Any]) -> str:
    """Why one pydantic error (an item of ``ValidationError.errors()``) refuses its field,
    as kbatch says it: never pydantic's own text."""
    kind, value, context = error["type"], error.get("input"), error.get("ctx") or {}
    shown = fields.shown(value)
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, not {shown}"
    if kind in _BOUNDS:
        sign, key = _BOUNDS[kind]
        return f"must be {sign} {context.get(key)}, not {shown}"
    if kind in ("enum", "literal_error"):
        return f"must be {context.get('expected')}, not {shown}"
    if kind == "value_error" and "error" in context:
        return str(context["error"])
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "string_too_long":
        return f"must be at most {context.get('max_length')} characters"
    return f"not a valid value: {shown}"


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
    with _naming(ref_of(obj)):
        hard = amounts(fields.mapping(obj, "spec.hard"), "spec.hard")
    return QuotaRecord(meta.get("namespace") or "default", meta["name"], hard)
