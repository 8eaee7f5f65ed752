"""PodGroup admission: PodGroupMinResources (mutating) and validation (DESIGN §7).

PodGroupMinResources fills ``spec.minResources`` when it is absent, from
minMember × the pod request of the Job whose pod template names the group
(Kubernetes request semantics), and rejects a PodGroup whose minResources
would take the sum over its namespace's PodGroups past a ResourceQuota's hard
limit. Completed PodGroups hold nothing and are not counted. A quota counts only
the PodGroups its scope selects: unscoped quotas select all; a PriorityClass scope
(``scopes: [PriorityClass]``, or a ``scopeSelector`` on PriorityClass with In, NotIn,
Exists or DoesNotExist) selects by ``spec.priorityClassName``; a quota with any
other scope (BestEffort, Terminating, ...) bounds pods kbatch cannot tell from a
PodGroup, and is not applied.

A PodGroup created before its Job is filled when the Job comes
(``fill_from_job``): an update of the PodGroup, so the quota applies to it too.

Validation: ``spec.minMember`` is an integer ≥ 1; ``spec.queue`` names a Queue
that exists, is Open, and is a leaf of the queue tree (checked on create, and on
update when the queue changes: a Closed queue keeps the groups it has, and admits no
new ones; a queue with child queues takes no PodGroups; a queue whose
``spec.namespaceSelector``, or an ancestor's, does not select the group's namespace
takes none from it, DESIGN §14).
"""

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kbatch.api import DEFAULT_QUEUE
from kbatch.api.podgroup import PodGroup, PodGroupPhase
from kbatch.api.quantity import format_quantity
from kbatch.api.queue import QueueState
from kbatch.cluster import fields, quantity, records
from kbatch.cluster.fields import shown
from kbatch.cluster.podspec import PODS, pod_request
from kbatch.webhooks.admission import job as jobs
from kbatch.webhooks.admission import queue as queues
from kbatch.webhooks.admission import result
from kbatch.webhooks.admission.result import Admission, Object
from kbatch.webhooks.admission.view import ClusterView, Quota

EPSILON = 1e-9
# ResourceQuota keys that bound what pods request, by the resource they bound.
_QUOTA_PLAIN = ("cpu", "memory", "ephemeral-storage", PODS)
_NOT_POD_REQUESTS = ("requests.storage",)  # PersistentVolumeClaims' storage

_amount = functools.lru_cache(maxsize=8192)(quantity.amount)


# --------------------------------------------------------------------------- mutation
@result.refusing
def mutate(obj: Mapping[str, Any], old: Mapping[str, Any] | None, view: ClusterView) -> Admission:
    """PodGroupMinResources, for a create (``old`` None) or an update."""
    namespace, name = identity(obj)
    spec = fields.mapping(obj, "spec")
    patch: Object = {}
    warnings: tuple[str, ...] = ()
    min_resources = spec.get("minResources")
    if min_resources is None:
        group_jobs = view.group_jobs(namespace, name)
        filled, warnings = min_resources_from_jobs(
            name, spec.get("minMember", 1), group_jobs, _roles(spec)
        )
        if filled is not None:
            patch = {"spec": {"minResources": filled}}
            min_resources = filled
    if min_resources is None:
        return result.allow(warnings=warnings)
    if old is not None and _old_min_resources(old) == min_resources:
        return result.allow(patch, warnings)  # unchanged: the quota was checked when it was set
    try:
        need = amounts(min_resources, "spec.minResources")
    except ValueError as exc:
        field, _, why = str(exc).partition(": ")
        return result.deny(field, why)
    priority_class = fields.string(obj, "spec.priorityClassName") or ""
    rejection = quota_rejection(namespace, name, need, view, priority_class)
    return rejection if rejection is not None else result.allow(patch, warnings)


def identity(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of an object under admission; FieldError when metadata is not a
    map or they are not strings. The name may be "" (generateName, before it is made)."""
    fields.mapping(obj, "metadata")
    namespace = fields.string(obj, "metadata.namespace") or "default"
    return namespace, fields.string(obj, "metadata.name") or ""


def _old_min_resources(old: Mapping[str, Any]) -> object:
    """The old object's minResources (the API server stored it: None if unreadable)."""
    spec = old.get("spec") if isinstance(old, Mapping) else None
    return spec.get("minResources") if isinstance(spec, Mapping) else None


def fill_from_job(job: Mapping[str, Any], view: ClusterView) -> tuple[str, str, Object] | None:
    """For a PodGroup created before its Job: when ``job`` (just created) names an existing
    PodGroup without minResources, (namespace, group, the merge patch that fills them
    from its Jobs, ``job`` included). The caller sends it as an update of the PodGroup,
    through its admission (the quota). None when there is nothing to fill."""
    name = jobs.kbatch_group_of(job, view.scheduler_names())
    if name is None:
        return None
    try:
        namespace, job_name = identity(job)
    except fields.FieldError:
        return None  # the Job webhook refuses it
    group = view.pod_group(namespace, name)
    if group is None or group.spec.min_resources is not None:
        return None
    known = [j for j in view.group_jobs(namespace, name) if jobs.name_of(j) != job_name]
    filled, _ = min_resources_from_jobs(
        name, group.spec.min_member, [*known, job], group.spec.min_task_member or {}
    )
    return None if filled is None else (namespace, name, {"spec": {"minResources": filled}})


def min_resources_from_jobs(
    group: str,
    min_member: object,
    group_jobs: Sequence[Mapping[str, Any]],
    roles: Mapping[str, int] | None = None,
) -> tuple[dict[str, str] | None, tuple[str, ...]]:
    """minMember × the pod request of the group's Jobs (None when no Job is known); with
    roles (minTaskMember), each role's minimum × the request of its Jobs' pods (their
    template's kbatch.io/task), and the rest of minMember × the smallest request."""
    if isinstance(min_member, bool) or not isinstance(min_member, int) or min_member < 1:
        return None, ()  # validation says why
    requests = _requests([jobs.pod_spec_of(j) for j in group_jobs])
    if not requests:
        return None, ()
    per_pod, warnings = _smallest(group, requests)
    total: dict[str, float] = {}
    counted = 0
    for role, minimum in sorted((roles or {}).items()):
        of_role = _requests([jobs.pod_spec_of(j) for j in group_jobs if _role_of(j) == role])
        if of_role and minimum:  # a role with no Job known yet counts at the smallest
            role_pod, _ = _smallest(group, of_role)
            counted += minimum
            _add(total, role_pod, minimum)
    _add(total, per_pod, max(min_member - counted, 0))
    filled = {
        resource: format_quantity(resource, value)
        for resource, value in sorted(total.items())
        if value > 0
    }
    return filled, warnings


def _add(total: dict[str, float], per_pod: Mapping[str, float], times: int) -> None:
    for resource, value in per_pod.items():
        total[resource] = total.get(resource, 0.0) + value * times


def _smallest(
    group: str, requests: list[dict[str, float]]
) -> tuple[dict[str, float], tuple[str, ...]]:
    """The per-pod request of the Jobs' templates: their smallest of each resource."""
    per_pod = requests[0]
    if all(r == per_pod for r in requests[1:]):
        return per_pod, ()
    shared = set.intersection(*(set(r) for r in requests))
    warning = (
        f"spec.minResources: {len(requests)} Jobs with different pod templates name "
        f"PodGroup {group}; filled from the smallest request of each resource "
        "(set spec.minResources to be exact)"
    )
    return {k: min(r[k] for r in requests) for k in shared}, (warning,)


def _role_of(job: Mapping[str, Any]) -> str:
    """The role of a Job's pods: its template's kbatch.io/task (or Volcano's)."""
    annotations: object = job
    for key in ("spec", "template", "metadata", "annotations"):
        annotations = annotations.get(key) if isinstance(annotations, Mapping) else None
    return records.role_of(annotations) if isinstance(annotations, Mapping) else ""


def _roles(spec: Mapping[str, Any]) -> dict[str, int]:
    """minTaskMember as far as it is well formed (validation refuses the rest)."""
    roles = spec.get("minTaskMember")
    if not isinstance(roles, Mapping):
        return {}
    return {
        str(role): n
        for role, n in roles.items()
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0
    }


def _requests(pod_specs: Sequence[Mapping[str, Any]]) -> list[dict[str, float]]:
    out = []
    for spec in pod_specs:
        try:
            out.append(pod_request(spec))
        except (ValueError, TypeError, AttributeError):
            continue  # a template the API server would refuse anyway
    return out


def amounts(values: object, field: str) -> dict[str, float]:
    """A ResourceList as scheduler amounts; ValueError('field.resource: why')."""
    if not isinstance(values, Mapping):
        raise ValueError(f"{field}: expected a map of resource names to quantities")
    out = {}
    for resource, value in values.items():
        try:
            out[str(resource)] = _amount_of(str(resource), value)
        except ValueError as exc:
            raise ValueError(f"{field}.{resource}: {exc}") from exc
    return out


def _amount_of(resource: str, value: object) -> float:
    """``quantity.amount``, cached for the quantities it can hash (strings and numbers)."""
    if isinstance(value, (str, int, float)):
        return _amount(resource, value)
    return quantity.amount(resource, value)


# --------------------------------------------------------------------------- quota
def quota_rejection(
    namespace: str,
    name: str,
    need: Mapping[str, float],
    view: ClusterView,
    priority_class: str = "",
) -> Admission | None:
    """A rejection if ``need`` on top of the namespace's other PodGroups passes a quota
    whose scope selects a PodGroup of ``priority_class``."""
    if not need:
        return None
    quotas = [q for q in view.quotas(namespace) if quota_selects(q, priority_class)]
    if not quotas:
        return None
    groups = list(view.pod_groups(namespace))
    for quota in sorted(quotas, key=lambda q: q.name):
        others, count = _others(groups, name, quota)
        for key, resource, hard in _limits(quota):
            if resource not in need:
                continue
            total = others.get(resource, 0.0) + need[resource]
            if total <= hard + EPSILON:
                continue
            fmt = functools.partial(format_quantity, resource)
            if count:
                s = "" if count == 1 else "s"
                needed = (
                    f"the PodGroups of namespace {namespace} would need {fmt(total)} "
                    f"({fmt(others.get(resource, 0.0))} for {count} other PodGroup{s} "
                    f"+ {fmt(need[resource])} for this one)"
                )
            else:
                needed = f"this PodGroup alone needs {fmt(total)}"
            return result.deny(
                f"spec.minResources.{resource}",
                f"{needed}, more than ResourceQuota {namespace}/{quota.name} allows "
                f"(hard {key}: {fmt(hard)})",
                result.FORBIDDEN,
            )
    return None


def quota_selects(quota: Quota, priority_class: str) -> bool:
    """Whether the quota's scopes select a PodGroup of ``priority_class`` ("" for none),
    as Kubernetes selects pods: every scope and every scopeSelector expression must."""
    expressions = [
        *({"scopeName": scope, "operator": "Exists"} for scope in quota.scopes),
        *quota.scope_selector,
    ]
    return all(_priority_class_matches(e, priority_class) for e in expressions)


def _priority_class_matches(expression: Mapping[str, Any], priority_class: str) -> bool:
    if expression.get("scopeName") != "PriorityClass":
        return False  # BestEffort, Terminating, ...: not decidable for a PodGroup
    operator, values = expression.get("operator"), expression.get("values") or []
    if not isinstance(values, list):
        return False  # not a quota the API server would have stored
    if operator == "Exists":
        return bool(priority_class)
    if operator == "DoesNotExist":
        return not priority_class
    if operator == "In":
        return bool(priority_class) and priority_class in values
    if operator == "NotIn":
        return not priority_class or priority_class not in values
    return False


def _others(groups: Iterable[PodGroup], name: str, quota: Quota) -> tuple[dict[str, float], int]:
    """What the other PodGroups the quota selects hold, and how many there are."""
    total: dict[str, float] = {}
    count = 0
    for group in groups:
        if group.metadata.name == name or group.status.phase is PodGroupPhase.COMPLETED:
            continue
        if not group.spec.min_resources or not quota_selects(
            quota, group.spec.priority_class_name or ""
        ):
            continue  # it holds nothing, or nothing this quota bounds
        count += 1
        for resource, value in (group.spec.min_resources or {}).items():
            total[resource] = total.get(resource, 0.0) + _amount_of(resource, value)
    return total, count


def _limits(quota: Quota) -> list[tuple[str, str, float]]:
    """(quota key, the resource it bounds, hard amount) for keys that bound pod requests."""
    out = []
    for key, value in sorted(quota.hard.items()):
        resource = _bounded_resource(key)
        if resource is None:
            continue
        try:
            out.append((key, resource, _amount_of(resource, value)))
        except ValueError:
            continue  # the API server validates quotas; a bad one bounds nothing here
    return out


def _bounded_resource(key: str) -> str | None:
    if key in _NOT_POD_REQUESTS:
        return None
    if key.startswith("requests."):
        return key.removeprefix("requests.")
    if key in _QUOTA_PLAIN or key.startswith("hugepages-"):
        return key
    return None  # limits.*, count/*, object counts


# --------------------------------------------------------------------------- validation
@result.refusing
def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None, view: ClusterView) -> Admission:
    """minMember ≥ 1; every field of the shape kbatch reads (``records.parse_pod_group``:
    minResources not negative, ...); the queue exists, kbatch has not refused it, it is
    Open, has no child queues and its namespace may use it (on create, or when it
    changes)."""
    spec = fields.mapping(obj, "spec")
    min_member = spec.get("minMember", 1)
    if isinstance(min_member, bool) or not isinstance(min_member, int) or min_member < 1:
        return result.deny(
            "spec.minMember",
            f"must be an integer ≥ 1 (the pods that must run together), not {shown(min_member)}",
        )
    group = records.parse_pod_group(obj)
    roles = group.spec.min_task_member or {}
    if sum(roles.values()) > min_member:
        listed = ", ".join(f"{role} {n}" for role, n in sorted(roles.items()))
        return result.deny(
            "spec.minTaskMember",
            f"the roles' minimums ({listed}) add up to {sum(roles.values())}, more than "
            f"minMember {min_member}: raise minMember or lower a role's minimum",
        )
    queue_name = group.spec.queue
    if old is not None and queue_name == _old_queue(old):
        return result.allow()
    queue = view.queue(queue_name)
    if queue is None:
        refused = view.queue_refusal(queue_name)
        if refused is not None:
            return result.deny(
                "spec.queue",
                f"queue {queue_name!r} is ignored by kbatch ({refused}); "
                "fix the queue or name another",
            )
        return result.deny(
            "spec.queue", f"queue {queue_name!r} does not exist; create it or name another queue"
        )
    if queue.spec.state is QueueState.CLOSED:
        return result.deny(
            "spec.queue", f"queue {queue_name!r} is Closed: it admits no new PodGroups"
        )
    children = view.queue_children(queue_name)
    if children:
        return result.deny("spec.queue", queues.not_a_leaf(queue_name, children))
    barred = queues.namespace_refusal(queue_name, identity(obj)[0], view)
    if barred is not None:
        return result.deny("spec.queue", barred, result.FORBIDDEN)
    return result.allow()


def _old_queue(old: Mapping[str, Any]) -> object:
    """The old object's queue (``default`` when unset or unreadable)."""
    spec = old.get("spec") if isinstance(old, Mapping) else None
    return (spec.get("queue") if isinstance(spec, Mapping) else None) or DEFAULT_QUEUE
