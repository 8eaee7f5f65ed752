"""Parsed records: each object parsed once, when it is applied. Nodes, PodGroups,
Queues, PriorityClasses and ResourceQuotas here; pods in ``pod_records`` (their names
are given here too, so that a reader of records finds every kind in one place); what
every parser shares in ``record_parsing``.

A bad object raises ObjectError naming the object and the field, and is not stored.
"""

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kbatch.api import (
    LIFETIME_ANNOTATION,
    TOPOLOGY_PREFERRED_ANNOTATION,
    TOPOLOGY_REQUIRED_ANNOTATION,
)
from kbatch.api.duration import DurationError, parse_duration
from kbatch.api.podgroup import PodGroup, PodGroupStatus
from kbatch.api.queue import Queue, QueueStatus
from kbatch.cluster import dra_records, fields, node_images
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.job_records import parse_job, parse_jobset
from kbatch.cluster.pod_records import (
    PodRecord,
    parse_pod,
    role_of,
    scheduling_group,
    task_status,
)
from kbatch.cluster.podspec import preemption_policy
from kbatch.cluster.quantity import amounts
from kbatch.cluster.record_parsing import (
    CLUSTER_SCOPED,
    HOSTNAME_LABEL,
    field_of,
    naming,
    object_name,
    ref_of,
    split_field,
    timestamp,
    validate_model,
)
from kbatch.cluster.volume_records import (
    parse_claim,
    parse_csi_node,
    parse_storage_class,
    parse_volume,
)
from kbatch.operators.scheduler.core.framework.info import (
    PREFERRED,
    REQUIRED,
    TopologyRequest,
)
from kbatch.operators.scheduler.core.framework.model_copies import replaced
from kbatch.operators.scheduler.core.framework.podspec import Taint
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

__all__ = [
    "CLUSTER_SCOPED",
    "HOSTNAME_LABEL",
    "PARSERS",
    "NodeRecord",
    "PodRecord",
    "PriorityClassRecord",
    "QuotaRecord",
    "field_of",
    "lifetime_of",
    "parse_namespace",
    "parse_node",
    "parse_pod",
    "parse_pod_group",
    "parse_priority_class",
    "parse_queue",
    "parse_quota",
    "ref_of",
    "role_of",
    "scheduling_group",
    "split_field",
    "task_status",
    "timestamp",
    "topology_of",
    "validate_model",
]


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    labels: dict[str, str]
    allocatable: dict[str, float]
    taints: tuple[Taint, ...]
    unschedulable: bool
    conditions: dict[str, str]


@dataclass(frozen=True, slots=True)
class PriorityClassRecord:
    name: str
    value: int
    global_default: bool
    never_preempts: bool = False  # preemptionPolicy: Never (non-preempting priority)


@dataclass(frozen=True, slots=True)
class QuotaRecord:
    namespace: str
    name: str
    hard: dict[str, float]


def parse_node(obj: Mapping[str, Any]) -> NodeRecord:
    ref = ref_of(obj)
    with naming(ref):
        _, name = object_name(obj, namespaced=False)
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
        node_images.read(obj)  # (a bad list refuses the Node; NodeImages keeps them)
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
    with naming(ref_of(obj)):
        object_name(obj, namespaced=True)
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
        return replaced(previous, {"status": given})
    try:
        status = status_model() if written is None else status_model.model_validate(written)
    except ValidationError:
        return None
    return replaced(previous, {"status": status})


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
    with naming(ref_of(obj)):
        object_name(obj, namespaced=False)
    queue = validate_model(Queue, obj)
    _check_quantities(obj, queue.spec.capability, "spec.capability")
    return queue


def _check_quantities(obj: Mapping[str, Any], values: Mapping[str, str] | None, field: str) -> None:
    """What the quantity pattern lets through and the kubernetes parser still refuses."""
    with naming(ref_of(obj)):
        amounts(values, field)


def parse_priority_class(obj: Mapping[str, Any]) -> PriorityClassRecord:
    ref = ref_of(obj)
    with naming(ref):
        _, name = object_name(obj, namespaced=False)
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ObjectError(ref, "value", f"expected an integer, not {fields.shown(value)}")
    try:
        policy = preemption_policy(obj.get("preemptionPolicy"), "preemptionPolicy")
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from None
    return PriorityClassRecord(name, value, bool(obj.get("globalDefault")), policy == "Never")


def non_preempting(classes: Iterable[PriorityClassRecord]) -> frozenset[str]:
    """The names of the classes whose preemptionPolicy is Never, and '' if the
    globalDefault class's is (``Snapshot.non_preempting``)."""
    classes = list(classes)
    never = {c.name for c in classes if c.never_preempts}
    defaults = [c for c in classes if c.global_default]
    if defaults and max(defaults, key=lambda c: c.value).never_preempts:
        never.add("")
    return frozenset(never)


def parse_quota(obj: Mapping[str, Any]) -> QuotaRecord:
    with naming(ref_of(obj)):
        namespace, name = object_name(obj, namespaced=True)
        hard = amounts(fields.mapping(obj, "spec.hard"), "spec.hard")
    return QuotaRecord(namespace, name, hard)


# Every kind kbatch reads from the cluster, and its parser (ObjectError if refused).
def parse_namespace(obj: Mapping[str, Any]) -> dict[str, str]:
    """A Namespace's labels, which a Queue's spec.namespaceSelector reads."""
    with naming(ref_of(obj)):
        object_name(obj, namespaced=False)
        return fields.string_map(obj, "metadata.labels")


PARSERS: dict[str, Callable[[Mapping[str, Any]], object]] = {
    "Node": parse_node,
    "Pod": parse_pod,
    "PodGroup": parse_pod_group,
    "Queue": parse_queue,
    "PriorityClass": parse_priority_class,
    "ResourceQuota": parse_quota,
    "Namespace": parse_namespace,
    "Job": parse_job,  # (batch/v1: its own deadline, ``job_records``)
    "JobSet": parse_jobset,  # (whether kbatch holds it, ``job_records``)
    # (where a pod's volumes let it go, ``volumes``)
    "PersistentVolumeClaim": parse_claim,
    "PersistentVolume": parse_volume,
    "StorageClass": parse_storage_class,
    "CSINode": parse_csi_node,  # (how many volumes a node may attach, ``volume_use``)
    # (dynamic resource allocation: the devices a pod's claims may have, ``devices``)
    "ResourceClaim": dra_records.parse_resource_claim,
    "DeviceClass": dra_records.parse_device_class,
    "ResourceSlice": dra_records.parse_resource_slice,
}
