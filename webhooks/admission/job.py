"""Delayed pod creation (DESIGN §6, §7): a batch/v1 Job whose pods kbatch schedules and
whose pod template names a PodGroup is created suspended while that group is not
admitted yet, and released (``spec.suspend: false``) once the group is Inqueue — so a
backlog waits as Jobs, not as thousands of pending pods.

Only a Job whose pod template's ``schedulerName`` is one of kbatch's is held (a
default-scheduler or Volcano Job with the same annotation is not kbatch's), and
only while holding can end well: the group's known Jobs, this one included, make
at least minMember pods, and no other Job of the group was let through unheld (its
pods exist: a group with some pods is admitted only once it has minMember of them,
so holding the rest could wait forever). Otherwise the Job is created as it is,
with a warning saying why; the group then waits Pending, its Unschedulable
condition saying how many pods it lacks. A Job whose group does not exist yet is
held; when the group comes, the same rule decides whether it stays held.

A Job kbatch holds carries the annotation ``kbatch.io/held`` (saying why); only
such Jobs are ever released, never a Job its owner suspended. Every Job of a group
also gets the label ``kbatch.io/pod-group`` (when the name is a valid label value),
so its template can be found when the PodGroup is created (PodGroupMinResources).
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.api.podgroup import PodGroup, PodGroupPhase
from kbatch.cluster import fields
from kbatch.webhooks.admission import jobgroup, result
from kbatch.webhooks.admission.result import Admission, Object
from kbatch.webhooks.admission.view import ClusterView

HELD_ANNOTATION = "kbatch.io/held"
GROUP_LABEL = "kbatch.io/pod-group"
DEFAULT_SCHEDULER = "default-scheduler"
# A group in any of these phases has been admitted (or is past it): its Jobs may run.
ADMITTED = frozenset(
    {PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING, PodGroupPhase.UNKNOWN, PodGroupPhase.COMPLETED}
)
# Kubernetes' label value: at most 63 characters, alphanumerics at both ends, - _ . inside.
_LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")


def group_of(job: Mapping[str, Any]) -> str | None:
    """The PodGroup the Job's pods join, from its pod template's annotation (None when
    there is none, or the template is not of a shape the API server would store)."""
    annotations = _read(job, "spec.template.metadata.annotations")
    group = annotations.get(GROUP_NAME_ANNOTATION)
    return group if isinstance(group, str) and group else None


def kbatch_group_of(job: Mapping[str, Any], scheduler_names: Iterable[str]) -> str | None:
    """The PodGroup of a Job whose pods kbatch schedules; None for any other Job."""
    scheduler = pod_spec_of(job).get("schedulerName") or DEFAULT_SCHEDULER
    if not isinstance(scheduler, str) or scheduler not in scheduler_names:
        return None
    return group_of(job)


def pod_spec_of(job: Mapping[str, Any]) -> Mapping[str, Any]:
    """The Job's pod template's spec ({} when absent or not a map)."""
    return _read(job, "spec.template.spec")


def name_of(job: Mapping[str, Any]) -> str:
    """The Job's name ("" when absent or not a string)."""
    name = _read(job, "metadata").get("name")
    return name if isinstance(name, str) else ""


def is_held(job: Mapping[str, Any]) -> bool:
    """Suspended by kbatch (not by its owner) and not released yet."""
    annotations = _read(job, "metadata.annotations")
    return HELD_ANNOTATION in annotations and _read(job, "spec").get("suspend") is True


def pods_made(job: Mapping[str, Any]) -> int:
    """The pods the Job runs at once: min(parallelism, completions), Kubernetes' defaults."""
    spec = _read(job, "spec")
    parallelism = _count(spec.get("parallelism"), 1)
    return min(parallelism, _count(spec.get("completions"), parallelism))


def label_value_ok(value: str) -> bool:
    return _LABEL_VALUE.fullmatch(value) is not None


@dataclass(frozen=True, slots=True)
class Group:
    """What holding needs to know of a PodGroup."""

    namespace: str
    name: str
    phase: PodGroupPhase
    min_member: int

    @classmethod
    def of(cls, group: PodGroup, phase: PodGroupPhase | None) -> "Group":
        meta, pending = group.metadata, PodGroupPhase.PENDING
        return cls(meta.namespace or "default", meta.name, phase or pending, group.spec.min_member)


@dataclass(frozen=True, slots=True)
class Decision:
    """Whether a Job is (still) to be held, and why; ``admitted``: the usual reason not
    to hold (its group is admitted), which needs no warning."""

    hold: bool
    why: str
    admitted: bool = False


def group_in(view: ClusterView, namespace: str, name: str) -> Group | None:
    """The PodGroup as holding sees it, or None when it does not exist."""
    found = view.pod_group(namespace, name)
    return None if found is None else Group.of(found, view.pod_group_phase(namespace, name))


def decide(
    job: Mapping[str, Any], group: Group | None, jobs: Sequence[Mapping[str, Any]]
) -> Decision:
    """Whether ``job`` is to be held for its group (``None``: it does not exist yet), given
    the Jobs known to make the group's pods (``job`` among them or not)."""
    namespace, name = _namespace(job), _name(job)
    ref = f"PodGroup {namespace}/{group_of(job)}"
    if group is not None and group.phase in ADMITTED:
        return Decision(False, f"{ref} is {group.phase.value}", admitted=True)
    others = [j for j in jobs if _name(j) != name]
    unheld = sorted(_name(j) for j in others if _read(j, "spec").get("suspend") is not True)
    if unheld:
        why = f"Job {namespace}/{unheld[0]} of {ref} was not held (its pods exist)"
        return Decision(False, f"{why}, so the group's other Jobs are not held either")
    if group is None:
        return Decision(True, f"{ref} does not exist yet")
    pods = pods_made(job) + sum(pods_made(j) for j in others)
    if pods < group.min_member:
        made = f"the Jobs of {ref} make {pods} pod{'s' * (pods != 1)}"
        return Decision(
            False,
            f"{made}, fewer than its minMember {group.min_member}: they are not held, and the "
            "group waits Pending for more pods (its Unschedulable condition says why)",
        )
    return Decision(True, f"{ref} is {group.phase.value}")


@result.refusing
def mutate(job: Mapping[str, Any], view: ClusterView, suspend_supported: bool = True) -> Admission:
    """A Job created: a Job labelled ``kbatch.io/queue`` without a group of its own
    pointed at the group kbatch makes for it (``jobgroup.prepare``); then labelled with
    its group, and held while the group is not admitted (when holding can end well:
    see the module's docstring).

    ``suspend_supported`` False (an API server before Job suspend): labelled only.
    """
    prepared = jobgroup.prepare(job, view.scheduler_names())
    if not prepared.allowed:
        return prepared
    if not prepared.patch:
        return prepared.then(_hold(job, view, suspend_supported))
    barred = jobgroup.namespace_barred(job, view)
    if barred is not None:
        return barred
    job = prepared.applied_to(job)
    queue = jobgroup.queue_of(job) or ""
    known = view.queue(queue) is not None
    not_leaf = jobgroup.queue_not_leaf(job, view)
    told = (not_leaf,) if not_leaf is not None else ()
    warned = result.allow(warnings=(*jobgroup.queue_warning(job, known), *told))
    return prepared.then(warned).then(_hold(job, view, suspend_supported))


def _hold(job: Mapping[str, Any], view: ClusterView, suspend_supported: bool) -> Admission:
    group = kbatch_group_of(job, view.scheduler_names())
    if group is None:
        return result.allow()
    fields.string(job, "metadata.namespace")  # a refusal naming it, when not a string
    patch: Object = {}
    if (
        label_value_ok(group)
        and fields.string_map(job, "metadata.labels").get(GROUP_LABEL) != group
    ):
        patch["metadata"] = {"labels": {GROUP_LABEL: group}}
    if not suspend_supported or fields.value(job, "spec.suspend") is True:
        return result.allow(patch)
    namespace = _namespace(job)
    decision = decide(job, group_in(view, namespace, group), view.group_jobs(namespace, group))
    if not decision.hold:
        return result.allow(patch, () if decision.admitted else (f"Job not held: {decision.why}",))
    held = f"{decision.why}; kbatch creates the pods once it is Inqueue"
    patch.setdefault("metadata", {})["annotations"] = {HELD_ANNOTATION: held}
    patch["spec"] = {"suspend": True}
    return result.allow(patch, (f"Job suspended: {held}",))


def to_release(
    jobs: Iterable[Mapping[str, Any]], view: ClusterView, group: Group | None = None
) -> list[tuple[Mapping[str, Any], str]]:
    """The held Jobs among ``jobs`` that are no longer to be held, each with why.
    ``group``: the PodGroup, when the view does not have it yet (it is being created)."""
    out = []
    for job in jobs:
        name = group_of(job)
        if not is_held(job) or name is None:
            continue
        namespace = _namespace(job)
        known = group is not None and (group.namespace, group.name) == (namespace, name)
        found = group if known else group_in(view, namespace, name)
        decision = decide(job, found, view.group_jobs(namespace, name))
        if not decision.hold:
            out.append((job, decision.why))
    return out


def release_patch() -> Object:
    """The merge patch that releases a held Job."""
    return {"metadata": {"annotations": {HELD_ANNOTATION: None}}, "spec": {"suspend": False}}


def _read(job: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    """The map at ``path`` in a Job the API server stored (or is admitting): {} when it is
    absent or of another shape — what holding reads is then as if unset."""
    try:
        return fields.mapping(job, path)
    except fields.FieldError:
        return {}


def _namespace(job: Mapping[str, Any]) -> str:
    namespace = _read(job, "metadata").get("namespace")
    return namespace if isinstance(namespace, str) and namespace else "default"


def _name(job: Mapping[str, Any]) -> str:
    return name_of(job)


def _count(value: object, default: int) -> int:
    if value is None:
        return default
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0
