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
that exists and is Open (checked on create, and on update when the queue
changes: a Closed queue keeps the groups it has, and admits no new ones).
"""

import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kbatch.api import DEFAULT_QUEUE
from kbatch.api.podgroup import PodGroup, PodGroupPhase
from kbatch.api.quantity import format_quantity
from kbatch.api.queue import QueueState
from kbatch.cluster import quantity
from kbatch.cluster.podspec import PODS, pod_request
from kbatch.webhooks.admission import job as jobs
from kbatch.webhooks.admission import result
from kbatch.webhooks.admission.result import Admission, Object
from kbatch.webhooks.admission.view import ClusterView, Quota

EPSILON = 1e-9
# ResourceQuota keys that bound what pods request, by the resource they bound.
_QUOTA_PLAIN = ("cpu", "memory", "ephemeral-storage", PODS)
_NOT_POD_REQUESTS = ("requests.storage",)  # PersistentVolumeClaims' storage

_amount = functools.lru_cache(maxsize=8192)(quantity.amount)


# --------------------------------------------------------------------------- mutation
def mutate(obj: Mapping[str, Any], old: Mapping[str, Any] | None, view: ClusterView) -> Admission:
    """PodGroupMinResources, for a create (``old`` None) or an update."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    namespace, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    patch: Object = {}
    warnings: tuple[str, ...] = ()
    min_resources = spec.get("minResources")
    if min_resources is None:
        group_jobs = view.group_jobs(namespace, name)
        filled, warnings = min_resources_from_jobs(name, spec.get("minMember", 1), group_jobs)
        if filled is not None:
            patch = {"spec": {"minResources": filled}}
            min_resources = filled
    if min_resources is None:
        return result.allow(warnings=warnings)
    old_resources = ((old or {}).get("spec") or {}).get("minResources")
    if old is not None and old_resources == min_resources:
        return result.allow(patch, warnings)  # unchanged: the quota was checked when it was set
    try:
        need = amounts(min_resources, "spec.minResources")
    except ValueError as exc:
        field, _, why = str(exc).partition(": ")
        return result.deny(field, why)
    priority_class = str(spec.get("priorityClassName") or "")
    rejection = quota_rejection(namespace, name, need, view, priority_class)
    return rejection if rejection is not None else result.allow(patch, warnings)


def fill_from_job(job: Mapping[str, Any], view: ClusterView) -> tuple[str, str, Object] | None:
    """For a PodGroup created before its Job: when ``job`` (just created) names an existing
    PodGroup without minResources, (namespace, group, the merge patch that fills them
    from its Jobs, ``job`` included). The caller sends it as an update of the PodGroup,
    through its admission (the quota). None when there is nothing to fill."""
    name = jobs.kbatch_group_of(job, view.scheduler_names())
    if name is None:
        return None
    meta = job.get("metadata") or {}
    namespace, job_name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    group = view.pod_group(namespace, name)
    if group is None or group.spec.min_resources is not None:
        return None
    known = [j for j in view.group_jobs(namespace, name) if j["metadata"]["name"] != job_name]
    filled, _ = min_resources_from_jobs(name, group.spec.min_member, [*known, job])
    return None if filled is None else (namespace, name, {"spec": {"minResources": filled}})


def min_resources_from_jobs(
    group: str, min_member: object, group_jobs: Sequence[Mapping[str, Any]]
) -> tuple[dict[str, str] | None, tuple[str, ...]]:
    """minMember × the pod request of the group's Jobs (None when no Job is known)."""
    if isinstance(min_member, bool) or not isinstance(min_member, int) or min_member < 1:
        return None, ()  # validation says why
    templates = [(j.get("spec") or {}).get("template") or {} for j in group_jobs]
    requests = _requests([t.get("spec") or {} for t in templates])
    if not requests:
        return None, ()
    warnings: tuple[str, ...] = ()
    per_pod = requests[0]
    if any(r != per_pod for r in requests[1:]):
        shared = set.intersection(*(set(r) for r in requests))
        per_pod = {k: min(r[k] for r in requests) for k in shared}
        warnings = (
            f"spec.minResources: {len(requests)} Jobs with different pod templates name "
            f"PodGroup {group}; filled from the smallest request of each resource "
            "(set spec.minResources to be exact)",
        )
    filled = {
        resource: format_quantity(resource, value * min_member)
        for resource, value in sorted(per_pod.items())
        if value > 0
    }
    return filled, warnings


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
            out[str(resource)] = _amount(str(resource), value)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{field}.{resource}: {exc}") from exc
    return out


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
    operator, values = expression.get("operator"), expression.get("values") or ()
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
            total[resource] = total.get(resource, 0.0) + _amount(resource, value)
    return total, count


def _limits(quota: Quota) -> list[tuple[str, str, float]]:
    """(quota key, the resource it bounds, hard amount) for keys that bound pod requests."""
    out = []
    for key, value in sorted(quota.hard.items()):
        resource = _bounded_resource(key)
        if resource is None:
            continue
        try:
            out.append((key, resource, _amount(resource, value)))
        except (ValueError, TypeError):
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
def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None, view: ClusterView) -> Admission:
    """minMember ≥ 1; the queue exists and is Open (on create, or when it changes)."""
    spec = obj.get("spec") or {}
    min_member = spec.get("minMember", 1)
    if isinstance(min_member, bool) or not isinstance(min_member, int) or min_member < 1:
        return result.deny(
            "spec.minMember",
            f"must be an integer ≥ 1 (the pods that must run together), not {min_member!r}",
        )
    queue_name = spec.get("queue") or DEFAULT_QUEUE
    old_queue = ((old or {}).get("spec") or {}).get("queue") or DEFAULT_QUEUE
    if old is not None and queue_name == old_queue:
        return result.allow()
    queue = view.queue(str(queue_name))
    if queue is None:
        return result.deny(
            "spec.queue", f"queue {queue_name!r} does not exist; create it or name another queue"
        )
    if queue.spec.state is QueueState.CLOSED:
        return result.deny(
            "spec.queue", f"queue {queue_name!r} is Closed: it admits no new PodGroups"
        )
    return result.allow()
