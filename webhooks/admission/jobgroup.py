"""Jobs without a hand-written PodGroup (DESIGN §15): a batch/v1 Job labelled
``kbatch.io/queue: NAME`` whose pod template names no PodGroup gets one made for it.

On create, the Job webhook (``prepare``) points the pod template at the group:
the annotation ``scheduling.k8s.io/group-name`` set to the Job's own name, and
kbatch's schedulerName when the template has none or the API server's default.
The template can be written only then (it is immutable afterwards), so the Job
must be named (not only ``generateName``: the name is made after admission).
From there on the Job is like any Job of a PodGroup: held while the group is not
admitted, released whole (``kbatch.webhooks.admission.job``).

The group itself is made once the Job exists (its ownerReference needs the Job's
uid), by the held-Job controller or the simulator (``pod_group_for``): named as
the Job, owned by it (deleting the Job deletes the group), minMember the pods the
Job runs at once (its parallelism, or its completions when fewer: a group of more
pods than the Job makes would never fill), minResources minMember × the template
pod's request, queue the label's. A Job whose template names a group itself keeps
it: that group is the user's to make.

Bad input: ``spec.parallelism`` or ``spec.completions`` 0 (no gang to run) and a
Job without a name are refused naming the field; so is a label naming a queue the
Job's namespace may not use (its ``spec.namespaceSelector``, or an ancestor's, does
not select the namespace: DESIGN §14). A queue that does not exist is
not refused: the Job waits, suspended, and is told so naming the label, until
the queue comes. Nor is a queue with child queues (PodGroups go in leaf queues
only, DESIGN §14): the group is not made while the label names such a queue, and
the Job waits, suspended, told so naming the label and the children; the group is
made once the label names a leaf queue (labels may change) or the queue's children
are gone. Once made, the group keeps its queue: a label changed later moves nothing.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from kbatch.api import API_VERSION, GROUP_NAME_ANNOTATION
from kbatch.api.quantity import format_quantity
from kbatch.cluster import fields
from kbatch.cluster.podspec import pod_request
from kbatch.webhooks.admission import queue as queues
from kbatch.webhooks.admission import result
from kbatch.webhooks.admission.result import Admission, Object
from kbatch.webhooks.admission.view import ClusterView

QUEUE_LABEL = "kbatch.io/queue"
QUEUE_FIELD = f"metadata.labels[{QUEUE_LABEL}]"
DEFAULT_SCHEDULER = "default-scheduler"
REFUSED = "PodGroupRefused"  # the Warning event on a Job whose PodGroup was refused
MADE = "PodGroupCreated"


def queue_of(job: Mapping[str, Any]) -> str | None:
    """The queue a Job's label names (None without the label, or when unreadable)."""
    labels = _map(_map(job, "metadata"), "labels")
    value = labels.get(QUEUE_LABEL)
    return value if isinstance(value, str) else None


def scheduler_for(names: Iterable[str]) -> str:
    """The schedulerName kbatch writes into a template: ``kbatch`` when it serves it,
    else the first of its names."""
    ordered = sorted(names)
    return "kbatch" if "kbatch" in ordered else ordered[0]


def prepare(job: Mapping[str, Any], names: frozenset[str]) -> Admission:
    """The Job webhook's first step: a labelled Job whose template names no group is
    pointed at the group made for it (see the module's docstring); any other Job
    passes unchanged."""
    queue = queue_of(job)
    if queue is None or _template_group(job) is not None:
        return result.allow()
    name = fields.string(job, "metadata.name")
    if not name:
        return result.deny(
            "metadata.name",
            f"a Job labelled {QUEUE_LABEL} needs a name, not only generateName: the "
            "PodGroup kbatch makes for it is named after it",
        )
    for count in ("parallelism", "completions"):
        if fields.integer(job, f"spec.{count}") == 0:
            return result.deny(
                f"spec.{count}",
                f"0 pods make no gang: a Job labelled {QUEUE_LABEL} runs as a PodGroup of "
                "its pods, at least 1",
            )
    if not queue:
        return result.deny(QUEUE_FIELD, "empty: name the Queue the Job's PodGroup goes in")
    scheduler = fields.string(job, "spec.template.spec.schedulerName")
    if scheduler and scheduler != DEFAULT_SCHEDULER and scheduler not in names:
        return result.allow(
            warnings=(
                f"spec.template.spec.schedulerName: {scheduler!r} schedules this Job's pods, "
                f"not kbatch; its label {QUEUE_LABEL} is ignored",
            )
        )
    fields.string_map(job, "spec.template.metadata.annotations")  # refused when misshapen
    template: Object = {"metadata": {"annotations": {GROUP_NAME_ANNOTATION: name}}}
    if scheduler not in names:
        template["spec"] = {"schedulerName": scheduler_for(names)}
    return result.allow({"spec": {"template": template}})


def queue_warning(job: Mapping[str, Any], known: bool) -> tuple[str, ...]:
    """What a labelled Job is told on create when its queue does not exist."""
    queue = queue_of(job)
    if queue is None or known:
        return ()
    return (missing_queue(queue),)


def missing_queue(queue: str) -> str:
    return (
        f"{QUEUE_FIELD}: queue {queue!r} does not exist; the Job waits, suspended, until it "
        "does (its PodGroup is made then)"
    )


def refusal_message(job: Mapping[str, Any], refusal: str, kind: str = "Job") -> str:
    """What a Job (or a JobSet: ``kind``) is told when its PodGroup is refused: the API
    server's answer (it names the field); a refused queue is the Job's label."""
    meta = job["metadata"]
    name = f"{meta.get('namespace') or 'default'}/{meta['name']}"
    said = refusal.split(": ", 1)[1] if refusal.startswith("HTTP ") else refusal
    where = f"{QUEUE_FIELD}: " if "spec.queue" in said else ""
    return f"{where}PodGroup {name} not made, the {kind} waits, suspended: {said}"


def queue_not_leaf(job: Mapping[str, Any], view: ClusterView, kind: str = "Job") -> str | None:
    """What a labelled Job (or JobSet: ``kind``) is told while its label names a queue
    with child queues, whose group is not made then; None when the queue has none."""
    queue = queue_of(job)
    children = view.queue_children(queue) if queue else []
    if not queue or not children:
        return None
    meta = job["metadata"]
    name = f"{meta.get('namespace') or 'default'}/{meta['name']}"
    return (
        f"{QUEUE_FIELD}: PodGroup {name} not made, the {kind} waits, suspended: "
        f"{queues.not_a_leaf(queue, children)} (the group is made once the label names "
        "a leaf queue)"
    )


def namespace_barred(job: Mapping[str, Any], view: ClusterView) -> Admission | None:
    """A refusal of a labelled Job (or JobSet) whose label names a queue its namespace
    may not use (the queue's or an ancestor's spec.namespaceSelector, DESIGN §14).
    The Job webhook reads only what is watched: a Namespace not seen yet is not
    refused here (the PodGroup webhook, which reads it from the API server, decides
    when the group is made)."""
    queue = queue_of(job)
    if not queue:
        return None
    namespace = _map(job, "metadata").get("namespace")
    namespace = namespace if isinstance(namespace, str) and namespace else "default"
    if view.namespace_labels(namespace) is None:
        return None  # not known yet: the group's own admission decides, when it is made
    barred = queues.namespace_refusal(queue, namespace, view)
    return None if barred is None else result.deny(QUEUE_FIELD, barred, result.FORBIDDEN)


def makes_group(job: Mapping[str, Any], names: frozenset[str]) -> bool:
    """Whether kbatch makes the PodGroup of this (created) Job: labelled, its pods
    scheduled by kbatch and named into the group called as the Job."""
    if queue_of(job) is None:
        return False
    scheduler = _map(_map(job, "spec"), "template")
    scheduler_name = _map(scheduler, "spec").get("schedulerName") or DEFAULT_SCHEDULER
    name = _map(job, "metadata").get("name")
    return scheduler_name in names and bool(name) and _template_group(job) == name


def pod_group_for(job: Mapping[str, Any], min_member: int) -> Object:
    """The PodGroup kbatch makes for a Job it ``makes_group`` for, of ``min_member``
    pods (the pods the Job runs at once)."""
    min_member = max(min_member, 1)
    pod_spec = _map(_map(_map(job, "spec"), "template"), "spec")
    return group_body(
        job, "batch/v1", "Job", min_member, min_resources_of(pod_spec, min_member), pod_spec
    )


def group_body(
    owner: Mapping[str, Any],
    api_version: str,
    kind: str,
    min_member: int,
    min_resources: Mapping[str, str] | None,
    pod_spec: Mapping[str, Any],
) -> Object:
    """The PodGroup kbatch makes for a labelled workload (a Job, a JobSet): named as
    it, in its namespace and queue, owned by it (deleting it deletes the group);
    ``pod_spec`` gives the priority class."""
    meta = owner["metadata"]
    name = str(meta["name"])
    spec: Object = {"minMember": min_member, "queue": queue_of(owner)}
    if min_resources is not None:
        spec["minResources"] = dict(min_resources)
    priority_class = pod_spec.get("priorityClassName")
    if isinstance(priority_class, str) and priority_class:
        spec["priorityClassName"] = priority_class
    reference = {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": str(meta.get("uid") or ""),
        "controller": True,
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": str(meta.get("namespace") or "default"),
            "labels": {QUEUE_LABEL: queue_of(owner)},
            "ownerReferences": [reference],
        },
        "spec": spec,
    }


def min_resources_of(pod_spec: Mapping[str, Any], min_member: int) -> dict[str, str] | None:
    """minMember × the pod's request (Kubernetes' rule, ``podspec.pod_request``), as
    quantities; None for a template the API server would not have stored."""
    try:
        per_pod = pod_request(pod_spec)
    except (ValueError, TypeError, AttributeError):
        return None
    return {
        resource: format_quantity(resource, value * min_member)
        for resource, value in sorted(per_pod.items())
        if value > 0
    }


def _template_group(job: Mapping[str, Any]) -> str | None:
    template_meta = _map(_map(_map(job, "spec"), "template"), "metadata")
    group = _map(template_meta, "annotations").get(GROUP_NAME_ANNOTATION)
    return group if isinstance(group, str) and group else None


def _map(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = obj.get(key) if isinstance(obj, Mapping) else None
    return value if isinstance(value, Mapping) else {}
