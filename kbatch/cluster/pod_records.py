"""Pod records: each pod parsed once, when it is applied, into what the scheduler reads
of it (``PodRecord``), its spec shared with the pods alike (``podspec``), and kept
whole when only its status was written.

A bad pod raises ObjectError naming the pod and the field, and is not stored.
"""

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION, TASK_ROLE_ANNOTATION, VOLCANO_TASK_ANNOTATION
from kbatch.cluster import dra_records, fields, resized
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.job_records import owner_job
from kbatch.cluster.pod_fields import PodFields, claims_of
from kbatch.cluster.pod_fields import plain_fields as _plain_fields
from kbatch.cluster.podspec import SHARED_SPECS, SPEC_KEY_FIELDS, ParsedSpec, spec_key
from kbatch.cluster.record_parsing import naming, object_name, ref_of, timestamp
from kbatch.operators.scheduler.core.framework.info import TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts


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
    walltime: float | None = None  # spec.activeDeadlineSeconds (None: none)
    owner_job: str = ""  # the uid of the batch/v1 Job that controls it ('': none)
    # spec.schedulingGates' names: while any is left the pod is not scheduled (no task)
    gates: tuple[str, ...] = ()
    # The PersistentVolumeClaims its volumes name (an ephemeral volume's: pod-volume),
    # which say where it may go (``kbatch.cluster.volumes``)
    claims: tuple[str, ...] = ()
    # Its spec.resourceClaims as (name, ResourceClaim name; '': not made yet from its
    # template), which DRA allocates devices for (``kbatch.cluster.devices``)
    device_claims: tuple[tuple[str, str], ...] = ()
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
    if pod.node_name:
        return TaskStatus.BOUND
    # held by its scheduling gates: no task until they are removed, as kube-scheduler
    # leaves it out of its queue (the API server refuses its binding)
    return None if pod.gates else TaskStatus.PENDING


def _pod_fields(obj: Mapping[str, Any]) -> PodFields:
    """The fields of ``obj`` (not yet named: FieldError or ObjectError names the field)."""
    plain = _plain_fields(obj)
    if plain is not None:
        return plain
    namespace, name = object_name(obj, namespaced=True)
    spec = fields.mapping(obj, "spec")
    if not fields.mappings(obj, "spec.containers"):
        raise ObjectError(ref_of(obj), "spec.containers", "a pod needs at least one container")
    fields.mapping(obj, "status")
    fields.integer(obj, "spec.terminationGracePeriodSeconds")
    fields.string(obj, "spec.priorityClassName")
    labels = fields.string_map(obj, "metadata.labels")
    annotations = fields.string_map(obj, "metadata.annotations")
    node_name = fields.string(obj, "spec.nodeName")
    scheduler_name = fields.string(obj, "spec.schedulerName")
    priority = fields.integer(obj, "spec.priority")
    phase = fields.string(obj, "status.phase")
    nominated_node = fields.string(obj, "status.nominatedNodeName")
    uid = fields.string(obj, "metadata.uid") or f"{namespace}/{name}"
    created = timestamp(fields.value(obj, "metadata.creationTimestamp"))
    start_time = fields.value(obj, "status.startTime")
    started = timestamp(start_time, "status.startTime") if start_time else None
    deleting = bool(fields.value(obj, "metadata.deletionTimestamp"))
    group = annotations.get(GROUP_NAME_ANNOTATION) or scheduling_group(obj)
    return PodFields(
        namespace, name, spec, labels, annotations, node_name, scheduler_name, priority,
        phase, nominated_node, uid, created, started, deleting, group, None,
    )  # fmt: skip


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
    (``Shortcuts.pod_record_of_status_writes``; off: parsed whole). A bad pod is
    refused naming it and the field (the pod named only then: ``ref_of`` once a pod
    was a tenth of a list's parse)."""
    if previous is not None and previous_raw is not None and shortcuts.pod_record_of_status_writes:
        kept = _pod_of_status_write(obj, previous, previous_raw)
        if kept is not None:
            return kept
    try:
        pod = _pod_fields(obj)
        uid, namespace, labels, spec = pod.uid, pod.namespace, pod.labels, pod.spec
        counted = resized.counted_spec(spec, obj.get("status")) or spec  # (resized in place)
        if previous is not None and (
            (shortcuts.pod_spec_of_equal_inputs and _same_inputs(previous, previous_raw, obj, uid))
            or _same_spec(previous, uid, namespace, labels, counted)
        ):
            parsed = previous.spec
        else:
            parsed = _parsed_spec(obj, namespace, labels, counted)
        conditions = pod.conditions
        condition = _scheduled_condition(obj) if conditions is None else _scheduled_of(conditions)
        walltime = _walltime(spec)
        gates = fields.names(spec, "schedulingGates", at="spec")
        claims = claims_of(spec, pod.name)
        device_claims = dra_records.pod_claims(obj) if spec.get("resourceClaims") else ()
    except ValueError:
        with naming(ref_of(obj)):  # (an ObjectError, named already, passes as it is)
            raise
    return PodRecord(
        uid=uid,
        namespace=namespace,
        name=pod.name,
        created=pod.created,
        scheduler_name=pod.scheduler_name or "default-scheduler",
        group=pod.group,
        node_name=pod.node_name or None,
        phase=pod.phase or "Pending",
        deleting=pod.deleting,
        priority=pod.priority,
        spec=parsed,
        nominated_node=pod.nominated_node or None,
        started=pod.started,
        role=role_of(pod.annotations),
        scheduled_condition=condition,
        walltime=walltime,
        owner_job=owner_job(obj),
        gates=gates,
        claims=claims,
        device_claims=device_claims,
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
    if previous.device_claims:  # (its status names the claims made from templates)
        return None
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
    status = obj.get("status")
    if not isinstance(status, dict | None):
        return None
    if resized.reported(status) != resized.reported(previous_raw.get("status")):
        return None  # (what the node holds of it may have changed: a resize)
    try:
        node_name = fields.string(obj, "spec.nodeName")
        phase, nominated, started, condition = _status_parts(status)
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
        walltime=previous.walltime,
        owner_job=previous.owner_job,
        gates=previous.gates,
        claims=previous.claims,
        device_claims=previous.device_claims,
    )


# What a record reads of a pod's annotations (its group and its role in it).
_READ_ANNOTATIONS = (GROUP_NAME_ANNOTATION, TASK_ROLE_ANNOTATION, VOLCANO_TASK_ANNOTATION)


def pod_made_of(
    obj: Mapping[str, Any], source: PodRecord, source_raw: Mapping[str, Any]
) -> PodRecord | None:
    """The record of ``obj``, a pod made of another (the one ``source`` was parsed from,
    ``source_raw``: a listed pod the ETA's forward run starts from) with its spec and
    labels the very same objects, the annotations a record reads equal, and another
    uid, creation time, status and metadata else: ``source`` with what ``obj`` says of
    those. None: parse ``obj`` whole (which also names a bad field)."""
    meta, source_meta = obj.get("metadata"), source_raw.get("metadata")
    if type(meta) is not dict or type(source_meta) is not dict or source.device_claims:
        return None
    if obj.get("spec") is not source_raw.get("spec") or meta.get("labels") is not (
        source_meta.get("labels")
    ):
        return None
    if (meta.get("namespace") or "default") != source.namespace or meta.get("name") != (
        source.name
    ):
        return None
    annotations, source_annotations = (
        meta.get("annotations") or {},
        source_meta.get("annotations") or {},
    )
    if type(annotations) is not dict:
        return None
    for value in annotations.values():  # (loops, not any() of a generator: once a pod)
        if type(value) is not str:
            return None
    for key in _READ_ANNOTATIONS:
        if annotations.get(key) != source_annotations.get(key):
            return None
    status = obj.get("status")
    if not isinstance(status, dict | None):
        return None
    uid = meta.get("uid")  # (``meta`` is a dict: read as fields.string would)
    if uid is not None and not isinstance(uid, str):
        return None
    try:
        created = timestamp(meta.get("creationTimestamp"))
        phase, nominated, started, condition = _status_parts(status)
    except ValueError:
        return None
    return PodRecord(
        uid=uid or f"{source.namespace}/{source.name}",
        namespace=source.namespace,
        name=source.name,
        created=created,
        scheduler_name=source.scheduler_name,
        group=source.group,
        node_name=source.node_name,
        phase=phase or "Pending",
        deleting=bool(meta.get("deletionTimestamp")),
        priority=source.priority,
        spec=source.spec,
        nominated_node=nominated or None,
        started=started,
        role=source.role,
        scheduled_condition=condition,
        walltime=source.walltime,
        owner_job=owner_job(obj),
        gates=source.gates,
        claims=source.claims,
        device_claims=source.device_claims,
    )


def _walltime(spec: Mapping[str, Any]) -> float | None:
    """``spec.activeDeadlineSeconds`` (None: none); ValueError unless a positive integer,
    as the API server has it."""
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is None:
        return None
    if type(deadline) is not int or deadline <= 0:
        raise fields.FieldError(
            "spec.activeDeadlineSeconds", f"{deadline!r} is not a positive integer"
        )
    return float(deadline)


def scheduling_group(obj: Mapping[str, Any]) -> str | None:
    """The upstream PodGroup a pod names in ``spec.schedulingGroup.podGroupName``
    (Kubernetes' own gang API, ``kbatch.cluster.upstream_groups``), or None. kbatch's
    annotation, when a pod gives both, is the one read."""
    return fields.string(obj, "spec.schedulingGroup.podGroupName") or None


def _status_parts(
    status: Mapping[str, Any] | None,
) -> tuple[str | None, str | None, float | None, tuple[str, str, str] | None]:
    """What a record reads of a pod's status (a map, or None: its callers have checked
    which): its phase, nominated node, start time and PodScheduled condition (ValueError
    names a bad field). Read from the status map itself, not walked to from the pod
    field by field: a simulated bind and each pod of the ETA's forward run come here."""
    if not status:
        return None, None, None, None
    start_time = status.get("startTime")
    conditions = status.get("conditions")
    return (
        _status_text(status, "phase"),
        _status_text(status, "nominatedNodeName"),
        timestamp(start_time, "status.startTime") if start_time else None,
        None
        if conditions is None
        else _scheduled_of(fields.mappings(status, "conditions", at="status")),
    )


def _status_text(status: Mapping[str, Any], key: str) -> str | None:
    """``status[key]``, a string or None (``fields.string``'s check and error)."""
    found = status.get(key)
    if found is not None and not isinstance(found, str):
        return fields.string(status, key, at="status")  # (raises, naming the field)
    return found


def _scheduled_condition(obj: Mapping[str, Any]) -> tuple[str, str, str] | None:
    return _scheduled_of(fields.mappings(obj, "status.conditions"))


def _scheduled_of(conditions: list[Mapping[str, Any]]) -> tuple[str, str, str] | None:
    """The PodScheduled condition of ``conditions`` as (status, reason, message)."""
    for condition in conditions:
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
    obj: Mapping[str, Any], namespace: str, labels: Mapping[str, str], spec: Mapping[str, Any]
) -> ParsedSpec:
    """``parse_spec``, whose field errors read 'spec.x: why'; a field of a shape it does
    not expect (a KeyError, TypeError, ...) is refused naming ``spec``."""
    try:
        return SHARED_SPECS.parse(namespace, labels, spec)
    except ValueError:
        raise  # 'field: why', named by _naming
    except (KeyError, TypeError, AttributeError) as exc:
        raise ObjectError(
            ref_of(obj), "spec", f"not a valid pod spec ({type(exc).__name__})"
        ) from exc


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
        and resized.reported(obj.get("status")) == resized.reported(previous_raw.get("status"))
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
