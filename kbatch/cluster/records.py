"""Parsed records: each object parsed once, when it is applied.

A bad object raises ObjectError naming the object and the field, and is not stored.
"""

import dataclasses
import functools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kbatch.api import (
    GROUP_NAME_ANNOTATION,
    LIFETIME_ANNOTATION,
    TASK_ROLE_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
    VOLCANO_TASK_ANNOTATION,
)
from kbatch.api.duration import DurationError, parse_duration
from kbatch.api.errors import explain
from kbatch.api.podgroup import PodGroup, PodGroupStatus
from kbatch.api.queue import Queue, QueueStatus
from kbatch.cluster import fields
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.podspec import SHARED_SPECS, SPEC_KEY_FIELDS, ParsedSpec, spec_key
from kbatch.cluster.quantity import amounts
from kbatch.operators.scheduler.core.framework.info import (
    PREFERRED,
    REQUIRED,
    TaskInfo,
    TaskStatus,
    TopologyRequest,
)
from kbatch.operators.scheduler.core.framework.podspec import Taint
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

M = TypeVar("M", bound=BaseModel)
# Every node has it (the kubelet sets it to the node's name): the topology level of one node.
HOSTNAME_LABEL = "kubernetes.io/hostname"

CLUSTER_SCOPED = frozenset({"Node", "Queue", "PriorityClass", "Namespace"})


def ref_of(obj: Mapping[str, Any]) -> str:
    """'Kind namespace/name' (or 'Kind name' when cluster-scoped), whatever the object's
    shape: a malformed object still needs naming when it is refused."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    kind = kind if isinstance(kind, str) and kind else "object"
    name = meta.get("name")
    name = name if isinstance(name, str) and name else "<unnamed>"
    namespace = meta.get("namespace")
    return (
        f"{kind} {namespace}/{name}"
        if isinstance(namespace, str) and namespace and kind not in CLUSTER_SCOPED
        else f"{kind} {name}"
    )


def timestamp(value: object, field: str = "metadata.creationTimestamp") -> float:
    """RFC 3339 to epoch seconds (0 when absent); FieldError naming ``field`` otherwise."""
    if not value:
        return 0.0
    if isinstance(value, datetime):
        return value.timestamp()
    if not isinstance(value, str):
        raise fields.FieldError(field, f"expected an RFC 3339 time, not {fields.shown(value)}")
    try:
        return _seconds_of(value)
    except (ValueError, OverflowError) as exc:
        raise fields.FieldError(
            field, f"expected an RFC 3339 time, not {fields.shown(value)}"
        ) from exc


@functools.lru_cache(maxsize=1024)
def _seconds_of(text: str) -> float:
    """An RFC 3339 text's epoch seconds, kept for the texts read last: the pods made in
    one second, the queues' creation read by every snapshot (a failure is not kept)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _name(obj: Mapping[str, Any], namespaced: bool) -> tuple[str, str]:
    """(namespace, name) of ``obj``: metadata must be a map, its name a non-empty string
    and its namespace a string (``default`` when absent; "" when cluster-scoped)."""
    fields.mapping(obj, "metadata")
    name = fields.string(obj, "metadata.name")
    if not name:
        raise fields.FieldError("metadata.name", "required")
    namespace = fields.string(obj, "metadata.namespace")
    return ((namespace or "default") if namespaced else ""), name


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
    started: float | None = None  # status.startTime (None: not started)
    role: str = ""  # kbatch.io/task (or volcano.sh/task-spec): its role in the gang
    # status.conditions' PodScheduled as (status, reason, message); None: none
    scheduled_condition: tuple[str, str, str] | None = None
    # Worked out by __post_init__ (so by dataclasses.replace too) once per version of the
    # pod, not by every snapshot: ``task_status(pod)``, and the key of the job the
    # snapshot puts it in (its PodGroup's, or its own).
    task_status: TaskStatus | None = dataclasses.field(init=False, repr=False, compare=False)
    unit: str = dataclasses.field(init=False, repr=False, compare=False)
    # The task the snapshot builder made of this record, and that builder's keeper
    # (``kbatch.cluster.reuse.kept_tasks.KeptTasks``): kept on the record itself, which the
    # snapshot's pass reads anyway, rather than in a dict by uid (two look-ups in 50,000,
    # each a miss in the CPU's cache: a seventh of a cold snapshot). Not part of what the
    # pod is; set only by ``KeptTasks.keep``.
    kept_task: TaskInfo | None = dataclasses.field(
        init=False, repr=False, compare=False, default=None
    )
    kept_by: object = dataclasses.field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_status", task_status(self))
        namespace, group = self.namespace, self.group
        unit = f"{namespace}/{group}" if group else f"pod:{namespace}/{self.name}"
        object.__setattr__(self, "unit", unit)


def task_status(pod: PodRecord) -> TaskStatus | None:
    """The scheduler's view of a pod's lifecycle (None: nothing to schedule or account)."""
    if pod.phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if pod.phase == "Failed":
        return TaskStatus.FAILED
    if pod.deleting:
        return TaskStatus.RELEASING if pod.node_name else None
    if pod.phase == "Running":
        return TaskStatus.RUNNING
    if pod.phase == "Unknown":
        return TaskStatus.UNKNOWN
    return TaskStatus.BOUND if pod.node_name else TaskStatus.PENDING


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
    """Within it, a FieldError or a bad value becomes an ObjectError naming ``ref`` and the
    field (a ValueError's text reads 'field: why', as ``quantity.amounts`` words it)."""
    try:
        yield
    except ObjectError:
        raise
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from exc
    except ValueError as exc:
        field, why = split_field(str(exc))
        raise ObjectError(ref, field, why) from exc


_FIELD_PATH = re.compile(r"[A-Za-z_][\w./\-]*(\[\d+\])*(\.[^\s:]+)*")


def split_field(text: str) -> tuple[str, str]:
    """'spec.x[0].y: why' as ('spec.x[0].y', 'why'); ('', text) when no field leads it."""
    field, sep, why = text.partition(": ")
    if sep and _FIELD_PATH.fullmatch(field):
        return field, why
    return "", text


def parse_node(obj: Mapping[str, Any]) -> NodeRecord:
    ref = ref_of(obj)
    with _naming(ref):
        _, name = _name(obj, namespaced=False)
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
    return NodeRecord(
        name=name,
        labels={HOSTNAME_LABEL: name, **labels},
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


def parse_pod(
    obj: Mapping[str, Any],
    previous: PodRecord | None = None,
    previous_raw: Mapping[str, Any] | None = None,
    shortcuts: Shortcuts = ALL,
) -> PodRecord:
    """``previous``: the record of the same pod before this update. Its parsed spec is
    reused while everything it was parsed from is the same (``_same_spec``).
    ``previous_raw``: the object ``previous`` was parsed from, if nothing changes it any
    more (the state's own copy): when what the spec is parsed from equals its, the
    spec is the same without keying it again (``Shortcuts.pod_spec_of_equal_inputs``),
    and a write of its status and node alone keeps the rest of ``previous``
    (``Shortcuts.pod_record_of_status_writes``; off: parsed whole)."""
    if previous is not None and previous_raw is not None and shortcuts.pod_record_of_status_writes:
        kept = _pod_of_status_write(obj, previous, previous_raw)
        if kept is not None:
            return kept
    ref = ref_of(obj)
    with _naming(ref):
        namespace, name = _name(obj, namespaced=True)
        spec = fields.mapping(obj, "spec")
        if not fields.mappings(obj, "spec.containers"):
            raise ObjectError(ref, "spec.containers", "a pod needs at least one container")
        pod = _pod_fields(obj)
        uid = fields.string(obj, "metadata.uid") or f"{namespace}/{name}"
        created = timestamp(fields.value(obj, "metadata.creationTimestamp"))
        start_time = fields.value(obj, "status.startTime")
        started = timestamp(start_time, "status.startTime") if start_time else None
        deleting = bool(fields.value(obj, "metadata.deletionTimestamp"))
        group = pod.annotations.get(GROUP_NAME_ANNOTATION) or scheduling_group(obj)
        if previous is not None and (
            (shortcuts.pod_spec_of_equal_inputs and _same_inputs(previous, previous_raw, obj, uid))
            or _same_spec(previous, uid, namespace, pod.labels, spec)
        ):
            parsed = previous.spec
        else:
            parsed = _parsed_spec(ref, namespace, pod.labels, spec)
    return PodRecord(
        uid=uid,
        namespace=namespace,
        name=name,
        created=created,
        scheduler_name=pod.scheduler_name or "default-scheduler",
        group=group,
        node_name=pod.node_name or None,
        phase=pod.phase or "Pending",
        deleting=deleting,
        priority=pod.priority,
        spec=parsed,
        nominated_node=pod.nominated_node or None,
        started=started,
        role=role_of(pod.annotations),
        scheduled_condition=_scheduled_condition(obj),
    )


def _pod_of_status_write(
    obj: Mapping[str, Any], previous: PodRecord, previous_raw: Mapping[str, Any]
) -> PodRecord | None:
    """``previous`` with what ``obj`` says of its node and status, when ``obj`` is
    ``previous_raw`` but for its status (either may have none) and its spec's nodeName,
    every other part the very same object (a simulated bind or finish: made of the
    state's last version, whose parts nothing changes in place); None: parse ``obj``
    whole (which also names a bad field). What else a record holds is read from those
    same parts."""
    for key, part in obj.items():
        if key != "status" and key != "spec" and part is not previous_raw.get(key):
            return None
    spec, old_spec = obj.get("spec"), previous_raw.get("spec")
    if spec is not old_spec:
        if (
            type(spec) is not dict
            or type(old_spec) is not dict
            or spec.keys() - {"nodeName"} != old_spec.keys() - {"nodeName"}
        ):
            return None
        if any(part is not old_spec[key] for key, part in spec.items() if key != "nodeName"):
            return None
    # (no other part than these: the first status write of a pod made without one, its
    # bind, adds it)
    if len(obj) - ("status" in obj) != len(previous_raw) - ("status" in previous_raw):
        return None
    if not isinstance(obj.get("status"), dict | None):
        return None
    try:
        node_name = fields.string(obj, "spec.nodeName")
        phase = fields.string(obj, "status.phase")
        nominated = fields.string(obj, "status.nominatedNodeName")
        start_time = fields.value(obj, "status.startTime")
        started = timestamp(start_time, "status.startTime") if start_time else None
        condition = _scheduled_condition(obj)
    except ValueError:
        return None
    return PodRecord(  # (dataclasses.replace, each field named: a third less per write)
        uid=previous.uid,
        namespace=previous.namespace,
        name=previous.name,
        created=previous.created,
        scheduler_name=previous.scheduler_name,
        group=previous.group,
        node_name=node_name or None,
        phase=phase or "Pending",
        deleting=previous.deleting,
        priority=previous.priority,
        spec=previous.spec,
        nominated_node=nominated or None,
        started=started,
        role=previous.role,
        scheduled_condition=condition,
    )


def scheduling_group(obj: Mapping[str, Any]) -> str | None:
    """The upstream PodGroup a pod names in ``spec.schedulingGroup.podGroupName``
    (Kubernetes' own gang API, ``kbatch.cluster.upstream_groups``), or None. kbatch's
    annotation, when a pod gives both, is the one read."""
    return fields.string(obj, "spec.schedulingGroup.podGroupName") or None


def _scheduled_condition(obj: Mapping[str, Any]) -> tuple[str, str, str] | None:
    for condition in fields.mappings(obj, "status.conditions"):
        if condition.get("type") == "PodScheduled":
            status, reason, message = (
                str(condition.get(key) or "") for key in ("status", "reason", "message")
            )
            return status, reason, message
    return None


def role_of(annotations: Mapping[str, str]) -> str:
    """A pod's role in its gang: kbatch.io/task, else Volcano's volcano.sh/task-spec."""
    return annotations.get(TASK_ROLE_ANNOTATION) or annotations.get(VOLCANO_TASK_ANNOTATION) or ""


def _parsed_spec(
    ref: str, namespace: str, labels: Mapping[str, str], spec: Mapping[str, Any]
) -> ParsedSpec:
    """``parse_spec``, whose field errors read 'spec.x: why'; a field of a shape it does
    not expect (a KeyError, TypeError, ...) is refused naming ``spec``."""
    try:
        return SHARED_SPECS.parse(namespace, labels, spec)
    except ValueError:
        raise  # 'field: why', named by _naming
    except (KeyError, TypeError, AttributeError) as exc:
        raise ObjectError(ref, "spec", f"not a valid pod spec ({type(exc).__name__})") from exc


def _same_inputs(
    previous: PodRecord,
    previous_raw: Mapping[str, Any] | None,
    obj: Mapping[str, Any],
    uid: str,
) -> bool:
    """Is ``obj`` the same pod as ``previous``, with the labels and spec fields that
    ``previous``'s spec was parsed from equal to those of ``previous_raw`` (compared as
    they are: no key made; a simulated bind shares them with the object before)?"""
    if previous_raw is None or previous.uid != uid:
        return False
    spec, old_spec = obj.get("spec"), previous_raw.get("spec")
    meta, old_meta = obj.get("metadata"), previous_raw.get("metadata")
    if not isinstance(spec, Mapping) or not isinstance(old_spec, Mapping):
        return False
    if not isinstance(meta, Mapping) or not isinstance(old_meta, Mapping):
        return False
    return (
        meta.get("namespace") == old_meta.get("namespace")
        and meta.get("labels") == old_meta.get("labels")
        and all(spec.get(key) == old_spec.get(key) for key in SPEC_KEY_FIELDS)
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
    immutable. A spec that cannot even be keyed (keys of mixed types) is parsed anew,
    to be refused naming its field."""
    if previous.uid != uid:
        return False
    try:
        return previous.spec.key == spec_key(namespace, labels, spec)
    except (TypeError, ValueError):
        return False


def validate_model(model: type[M], obj: Mapping[str, Any]) -> M:
    """Validate with a pydantic model; errors name the object and the field, in kbatch's
    words (``explain``)."""
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ObjectError(ref_of(obj), field_of(first["loc"]), explain(first)) from exc


def field_of(loc: Sequence[int | str]) -> str:
    """A pydantic error's location as a field path: ``spec.conditions[0].type``. A map's
    key that is refused (``..., key, '[key]'``) names the map."""
    path = ""
    parts = list(loc)
    for index, part in enumerate(parts):
        if part == "[key]" or parts[index + 1 : index + 2] == ["[key]"]:
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(the object)"


# What a pydantic error type says the field should have been.
def parse_pod_group(
    obj: Mapping[str, Any],
    previous: PodGroup | None = None,
    previous_raw: Mapping[str, Any] | None = None,
    status: BaseModel | None = None,
    shortcuts: Shortcuts = ALL,
) -> PodGroup:
    """A PodGroup, or ObjectError naming the field (negative minResources included).
    ``previous``, ``previous_raw``: the state's last version of it, parsed and as given;
    a write of its status alone (the scheduler's, every session a group's status moves)
    keeps the rest as parsed then and validates the status only, or takes ``status``,
    the model it was dumped from, when the writer gives it
    (``Shortcuts.parsed_of_status_writes``; off: validated whole)."""
    if not shortcuts.parsed_of_status_writes:
        previous_raw = None  # (what _status_alone_written then says: validated whole)
    kept = _parsed_of_status_write(obj, previous, previous_raw, PodGroupStatus, status)
    if kept is not None:
        return kept
    with _naming(ref_of(obj)):
        _name(obj, namespaced=True)
    group = validate_model(PodGroup, obj)
    _check_quantities(obj, group.spec.min_resources, "spec.minResources")
    lifetime_of(group, ref_of(obj))
    topology_of(group, ref_of(obj))
    return group


_Parsed = TypeVar("_Parsed", PodGroup, Queue)


def _parsed_of_status_write(
    obj: Mapping[str, Any],
    previous: _Parsed | None,
    previous_raw: Mapping[str, Any] | None,
    status_model: type[BaseModel],
    given: BaseModel | None = None,
) -> _Parsed | None:
    """``previous`` with ``obj``'s status, when ``obj`` is ``previous_raw`` but for its
    status and that status is valid; None: parse ``obj`` whole (which names a bad
    status' field). ``given``: the model ``obj``'s status was dumped from (built by the
    scheduler's rules, so valid: the same model a validation of the dump gives), taken
    as it is."""
    if previous is None or not _status_alone_written(obj, previous_raw):
        return None
    written = obj.get("status")
    if type(given) is status_model and written is not None:
        return previous.model_copy(update={"status": given})
    try:
        status = status_model() if written is None else status_model.model_validate(written)
    except ValidationError:
        return None
    return previous.model_copy(update={"status": status})


def _status_alone_written(obj: Mapping[str, Any], previous_raw: Mapping[str, Any] | None) -> bool:
    """Is ``obj`` ``previous_raw`` but for its status (compared as given)? A status
    missing from ``obj`` counts as written too (the default one)."""
    if previous_raw is None:
        return False
    if "status" in obj and obj["status"] is None:
        return False  # refused the long way
    return obj.keys() - {"status"} == previous_raw.keys() - {"status"} and all(
        obj[key] == previous_raw[key] for key in obj if key != "status"
    )


def lifetime_of(group: PodGroup, ref: str = "PodGroup") -> float | None:
    """The group's ``kbatch.io/lifetime`` in seconds (None: none given), or ObjectError."""
    text = (group.metadata.annotations or {}).get(LIFETIME_ANNOTATION)
    if text is None:
        return None
    try:
        return parse_duration(text, "")
    except DurationError as exc:
        field = f"metadata.annotations.{LIFETIME_ANNOTATION}"
        why = f"{text!r} is not a duration (e.g. 0, 30s, 2m, 1h30m)"
        raise ObjectError(ref, field, why) from exc


_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_LABEL_NAME}$")


def topology_of(group: PodGroup, ref: str = "PodGroup") -> TopologyRequest | None:
    """The group's kbatch.io/topology-required or -preferred (None: neither), or
    ObjectError: the level must be a node label key, and only one may be given."""
    annotations = group.metadata.annotations
    if not annotations:
        return None  # nothing to look up (and every snapshot asks, per group)
    given = [
        (mode, key, annotations[key])
        for mode, key in ((REQUIRED, TOPOLOGY_REQUIRED_ANNOTATION),
                          (PREFERRED, TOPOLOGY_PREFERRED_ANNOTATION))
        if key in annotations
    ]  # fmt: skip
    if not given:
        return None
    if len(given) > 1:
        why = "give one of kbatch.io/topology-required and kbatch.io/topology-preferred, not both"
        raise ObjectError(ref, f"metadata.annotations.{TOPOLOGY_PREFERRED_ANNOTATION}", why)
    mode, key, level = given[0]
    if not _LABEL_KEY.match(level):
        why = f"{level!r} is not a node label key (e.g. kbatch.io/rack)"
        raise ObjectError(ref, f"metadata.annotations.{key}", why)
    return TopologyRequest(mode, level)


def parse_queue(
    obj: Mapping[str, Any],
    previous: Queue | None = None,
    previous_raw: Mapping[str, Any] | None = None,
    status: BaseModel | None = None,
    shortcuts: Shortcuts = ALL,
) -> Queue:
    """A Queue, or ObjectError naming the field (a negative capability included).
    ``previous``, ``previous_raw``, ``status``, ``shortcuts``: as ``parse_pod_group``'s
    (the scheduler writes a queue's status every session its allocation moves)."""
    if not shortcuts.parsed_of_status_writes:
        previous_raw = None  # (what _status_alone_written then says: validated whole)
    kept = _parsed_of_status_write(obj, previous, previous_raw, QueueStatus, status)
    if kept is not None:
        return kept
    with _naming(ref_of(obj)):
        _name(obj, namespaced=False)
    queue = validate_model(Queue, obj)
    _check_quantities(obj, queue.spec.capability, "spec.capability")
    return queue


def _check_quantities(obj: Mapping[str, Any], values: Mapping[str, str] | None, field: str) -> None:
    """What the quantity pattern lets through and the kubernetes parser still refuses."""
    with _naming(ref_of(obj)):
        amounts(values, field)


def parse_priority_class(obj: Mapping[str, Any]) -> PriorityClassRecord:
    ref = ref_of(obj)
    with _naming(ref):
        _, name = _name(obj, namespaced=False)
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ObjectError(ref, "value", f"expected an integer, not {fields.shown(value)}")
    return PriorityClassRecord(name, value, bool(obj.get("globalDefault")))


def parse_quota(obj: Mapping[str, Any]) -> QuotaRecord:
    with _naming(ref_of(obj)):
        namespace, name = _name(obj, namespaced=True)
        hard = amounts(fields.mapping(obj, "spec.hard"), "spec.hard")
    return QuotaRecord(namespace, name, hard)


# Every kind kbatch reads from the cluster, and its parser (ObjectError if refused).
PARSERS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "Node": parse_node,
    "Pod": parse_pod,
    "PodGroup": parse_pod_group,
    "Queue": parse_queue,
    "PriorityClass": parse_priority_class,
    "ResourceQuota": parse_quota,
}
