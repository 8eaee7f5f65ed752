"""JobSets without a hand-written PodGroup (DESIGN §15): a JobSet
(``jobset.x-k8s.io/v1alpha2``) labelled ``kbatch.io/queue: NAME`` whose Jobs' pod
templates name no PodGroup runs as one PodGroup, the way a labelled Job does
(``jobgroup``), with the JobSet in the Job's place.

On create, the JobSet webhook (``prepare``) points every replicated Job's pod template
(``spec.replicatedJobs[i].template.spec.template``) at the group named as the JobSet,
with kbatch's schedulerName, and holds the JobSet itself (``spec.suspend: true``, marked
``kbatch.io/held``) while that group is not admitted: JobSet's controller makes its Jobs
suspended while the JobSet is, so no pod exists until kbatch releases the JobSet, whole.

The group is made once the JobSet exists (the ownerReference needs its uid): named as
the JobSet, owned by it, minMember the pods its Jobs start with, all at once (the sum
over replicatedJobs of replicas × min(parallelism, completions); with
``startupPolicyOrder: InOrder`` the first replicated Job's only, and without the
replicated Jobs that ``dependsOn`` others: JobSet's controller makes those once the
first run), minResources the requests of every pod of its Jobs, the later ones too
(its room is there when it is admitted), queue the label's.

Bad input is refused naming the field: a JobSet without a name, no replicatedJobs,
``replicas``, ``parallelism`` or ``completions`` 0, an empty queue label, a queue label
the JobSet's namespace may not use (DESIGN §14). A JobSet whose templates name a group
themselves, or that some template's schedulerName gives to another scheduler, is not
kbatch's to group."""

from collections.abc import Iterator, Mapping
from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.api.quantity import format_quantity
from kbatch.cluster import fields
from kbatch.cluster.podspec import pod_request
from kbatch.webhooks.admission import job, jobgroup, result
from kbatch.webhooks.admission.result import Admission, Object
from kbatch.webhooks.admission.view import ClusterView

GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"
RESOURCE = "jobsets"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "JobSet"
REPLICATED = "spec.replicatedJobs"


def replicated_jobs(jobset: Mapping[str, Any]) -> Iterator[tuple[int, int, Mapping[str, Any]]]:
    """(index, replicas, Job template) of each replicated Job; replicas default to 1
    as JobSet's CRD defaults them. Raises FieldError naming a misshapen field."""
    for index, entry in enumerate(fields.mappings(jobset, REPLICATED)):
        at = f"{REPLICATED}[{index}]"
        replicas = fields.integer(entry, "replicas", at=at)
        yield index, 1 if replicas is None else replicas, fields.mapping(entry, "template", at=at)


def pod_templates(jobset: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod template of each replicated Job ({} where absent or misshapen)."""
    out = []
    for entry in _list(_map(jobset, "spec").get("replicatedJobs")):
        out.append(_map(_map(_map(entry, "template"), "spec"), "template"))
    return out


def min_member(jobset: Mapping[str, Any]) -> int:
    """The pods JobSet's controller starts first, which must start together: those all
    its Jobs run at once; with ``startupPolicyOrder: InOrder``, the first replicated
    Job's only (the next is made once those run); a replicated Job that ``dependsOn``
    another comes later too. A gang of every pod would wait for ever for pods that come
    only once the first have started."""
    entries = fields.mappings(jobset, REPLICATED)
    in_order = fields.string(jobset, "spec.startupPolicy.startupPolicyOrder") == "InOrder"
    first = 0
    for index, replicas, template in replicated_jobs(jobset):
        if fields.value(entries[index], "dependsOn"):
            continue
        first += replicas * job.pods_made(template)
        if in_order:
            break
    return first


def min_resources(jobset: Mapping[str, Any]) -> dict[str, str] | None:
    """The requests of the pods all its Jobs run at once, those made later too
    (Kubernetes' rule per pod); None for a template the API server would not have
    stored."""
    total: dict[str, float] = {}
    try:
        for _, replicas, template in replicated_jobs(jobset):
            pods = replicas * job.pods_made(template)
            for resource, value in pod_request(job.pod_spec_of(template)).items():
                total[resource] = total.get(resource, 0) + value * pods
    except (ValueError, TypeError, AttributeError):
        return None
    return {r: format_quantity(r, v) for r, v in sorted(total.items()) if v > 0}


@result.refusing
def prepare(jobset: Mapping[str, Any], names: frozenset[str]) -> Admission:
    """A labelled JobSet whose templates name no group is pointed at the group made
    for it (see the module's docstring); any other JobSet passes unchanged."""
    queue = jobgroup.queue_of(jobset)
    templates = pod_templates(jobset)
    if queue is None or any(_group(t) is not None for t in templates):
        return result.allow()
    name = fields.string(jobset, "metadata.name")
    if not name:
        return result.deny(
            "metadata.name",
            f"a JobSet labelled {jobgroup.QUEUE_LABEL} needs a name, not only generateName: "
            "the PodGroup kbatch makes for it is named after it",
        )
    if not queue:
        return result.deny(
            jobgroup.QUEUE_FIELD, "empty: name the Queue the JobSet's PodGroup goes in"
        )
    entries = fields.mappings(jobset, REPLICATED)
    if not entries:
        return result.deny(REPLICATED, "empty: a JobSet runs at least one replicated Job")
    for index, replicas, template in replicated_jobs(jobset):
        at = f"{REPLICATED}[{index}]"
        if replicas == 0:
            return result.deny(f"{at}.replicas", _no_gang("JobSet"))
        for count in ("parallelism", "completions"):
            if fields.integer(template, f"spec.{count}", at=f"{at}.template") == 0:
                return result.deny(f"{at}.template.spec.{count}", _no_gang("JobSet"))
    other = _other_scheduler(templates, names)
    if other:
        return result.allow(warnings=(other,))
    patched = []
    for index, entry in enumerate(entries):
        at = f"{REPLICATED}[{index}].template.spec.template"
        fields.string_map(entry, "template.spec.template.metadata.annotations", at=at)
        patched.append(_pointed(entry, name, names))
    return result.allow({"spec": {"replicatedJobs": patched}})


def mutate(jobset: Mapping[str, Any], view: ClusterView, hold: bool = True) -> Admission:
    """A JobSet created: pointed at its group (``prepare``), then held while the group
    is not admitted. ``hold`` False (JobSets cannot be held now): pointed only."""
    prepared = prepare(jobset, view.scheduler_names())
    if not prepared.allowed or not prepared.patch:
        return prepared
    barred = jobgroup.namespace_barred(jobset, view)
    if barred is not None:
        return barred
    jobset = prepared.applied_to(jobset)
    queue = jobgroup.queue_of(jobset) or ""
    not_leaf = jobgroup.queue_not_leaf(jobset, view, KIND)
    told = (not_leaf,) if not_leaf is not None else ()
    warned = result.allow(warnings=(*_queue_warning(queue, view.queue(queue) is not None), *told))
    return prepared.then(warned).then(_hold(jobset, view, hold))


def _hold(jobset: Mapping[str, Any], view: ClusterView, hold: bool) -> Admission:
    if not hold or _map(jobset, "spec").get("suspend") is True:
        return result.allow()  # its owner suspended it: kbatch never releases it
    namespace = _map(jobset, "metadata").get("namespace") or "default"
    name = str(_map(jobset, "metadata").get("name"))
    group = job.group_in(view, namespace, name)
    if group is not None and group.phase in job.ADMITTED:
        return result.allow()
    ref = f"PodGroup {namespace}/{name}"
    why = f"{ref} {'does not exist yet' if group is None else 'is ' + group.phase.value}"
    held = f"{why}; kbatch resumes the JobSet once it is Inqueue"
    patch = {"metadata": {"annotations": {job.HELD_ANNOTATION: held}}, "spec": {"suspend": True}}
    return result.allow(patch, (f"JobSet suspended: {held}",))


def makes_group(jobset: Mapping[str, Any], names: frozenset[str]) -> bool:
    """Whether kbatch makes this (created) JobSet's PodGroup: labelled, every pod
    template scheduled by kbatch and named into the group called as the JobSet."""
    name = _map(jobset, "metadata").get("name")
    templates = pod_templates(jobset)
    if jobgroup.queue_of(jobset) is None or not name or not templates:
        return False
    return all(
        (_map(t, "spec").get("schedulerName") or job.DEFAULT_SCHEDULER) in names
        and _group(t) == name
        for t in templates
    )


def pod_group_for(jobset: Mapping[str, Any]) -> Object:
    """The PodGroup kbatch makes for a JobSet it ``makes_group`` for."""
    templates = pod_templates(jobset)
    pod_spec = _map(templates[0], "spec") if templates else {}
    try:
        count = max(min_member(jobset), 1)
    except fields.FieldError:
        count = 1
    return jobgroup.group_body(jobset, API_VERSION, KIND, count, min_resources(jobset), pod_spec)


def to_release(jobset: Mapping[str, Any], view: ClusterView) -> str | None:
    """Why a held JobSet is to be released now (its group is admitted), else None."""
    if not job.is_held(jobset):
        return None
    meta = _map(jobset, "metadata")
    namespace = meta.get("namespace") or "default"
    group = job.group_in(view, namespace, str(meta.get("name")))
    if group is None or group.phase not in job.ADMITTED:
        return None
    return f"PodGroup {namespace}/{group.name} is {group.phase.value}"


def _pointed(entry: Mapping[str, Any], name: str, names: frozenset[str]) -> Object:
    """A replicated Job whose pod template names the group and kbatch's scheduler."""
    out = fields.copied(dict(entry))
    template = out.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
    meta = template.setdefault("metadata", {})
    meta["annotations"] = {**(meta.get("annotations") or {}), GROUP_NAME_ANNOTATION: name}
    spec = template.setdefault("spec", {})
    if spec.get("schedulerName") not in names:
        spec["schedulerName"] = jobgroup.scheduler_for(names)
    return out


def _other_scheduler(templates: list[Mapping[str, Any]], names: frozenset[str]) -> str:
    for index, template in enumerate(templates):
        scheduler = _map(template, "spec").get("schedulerName")
        if scheduler and scheduler != job.DEFAULT_SCHEDULER and scheduler not in names:
            return (
                f"{REPLICATED}[{index}].template.spec.template.spec.schedulerName: "
                f"{scheduler!r} schedules these pods, not kbatch; the JobSet's label "
                f"{jobgroup.QUEUE_LABEL} is ignored"
            )
    return ""


def _queue_warning(queue: str, known: bool) -> tuple[str, ...]:
    if known:
        return ()
    return (
        f"{jobgroup.QUEUE_FIELD}: queue {queue!r} does not exist; the JobSet waits, "
        "suspended, until it does (its PodGroup is made then)",
    )


def _no_gang(kind: str) -> str:
    return (
        f"0 pods make no gang: a {kind} labelled {jobgroup.QUEUE_LABEL} runs as a PodGroup "
        "of its pods, at least 1"
    )


def _group(template: Mapping[str, Any]) -> str | None:
    group = _map(_map(template, "metadata"), "annotations").get(GROUP_NAME_ANNOTATION)
    return group if isinstance(group, str) and group else None


def _map(obj: Any, key: str) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
