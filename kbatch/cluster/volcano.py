"""Volcano's scheduling API (``scheduling.volcano.sh/v1beta1``) in kbatch's terms: a
Volcano PodGroup or Queue becomes the kbatch object it is scheduled as.

Volcano's v1beta1 is kube-batch's v1alpha1 grown (DESIGN §14): the PodGroup's
``minMember``, ``minTaskMember``, ``queue``, ``priorityClassName`` and ``minResources``
and the Queue's ``weight``, ``capability``, ``reclaimable``, ``parent`` (``root``: a
top-level queue), ``guarantee.resource`` and ``deserved`` mean in kbatch what they
mean in Volcano, and pods join a group by the same annotation
``scheduling.k8s.io/group-name``. The mapping keeps the object's metadata and marks it
with ``ORIGIN_ANNOTATION`` so that a writer knows where its status goes.

Of Volcano's other fields, those that change only how Volcano's own tools show a
queue (``spec.type``) are left out and named in ``ignored`` (the caller warns once);
those whose meaning kbatch cannot honour (a queue's ``extendClusters``, ``affinity``,
a ``priority`` other than 0, ``dequeueStrategy: fifo``; a PodGroup's
``networkTopology`` or ``subGroupPolicy``; any field this module does not know) are
refused naming the field, rather than run as something the user did not ask for.

A PodGroup's ``minResources`` as Volcano's Job controller writes it is a pod's
ResourceQuota usage times the gang's minimum: each request under its own name (``cpu``)
and again as ``requests.cpu``, with ``limits.cpu`` and ``count/pods`` beside. Volcano's
scheduler reads the plain names and passes over the others; so does kbatch (a
``requests.`` name whose plain name is missing is refused naming it: it would reserve
nothing).

A PodGroup's ``minTaskMember`` whose minimums add up to more than its ``minMember`` is
left out: Volcano's scheduler then skips its per-task checks (the gang is ready with
any ``minMember`` pods), and its Job controller writes such a group for every elastic
Job (``minAvailable`` below the tasks' replicas, no minimum per task), where kbatch
would hold the gang for every replica.

Volcano's defaults: an absent or zero ``weight`` is 1 (Volcano's webhook sets it so),
an absent ``minMember`` is 1, an absent ``queue`` is ``default``. A Queue's
``status.state`` of ``Closed`` or ``Closing`` (Volcano closes a queue there) is
kbatch's ``spec.state: Closed``; the rest of a Queue's status is the scheduler's to
write, so it is not read. A PodGroup's status has kbatch's shape and is kept.

Pure: no I/O. Bad input raises ObjectError naming the Volcano object and its field.
"""

from collections.abc import Mapping
from typing import Any

from kbatch.api import API_VERSION as KBATCH_API_VERSION
from kbatch.cluster import fields, records
from kbatch.cluster.errors import ObjectError

API_GROUP = "scheduling.volcano.sh"
API_VERSION = f"{API_GROUP}/v1beta1"
KINDS = frozenset({"PodGroup", "Queue"})
# On the kbatch object a Volcano one becomes: the API it came from.
ORIGIN_ANNOTATION = "kbatch.io/volcano-api"

# The spec fields read as kbatch's own, by kind.
_SAME = {
    "PodGroup": ("minMember", "minTaskMember", "queue", "priorityClassName", "minResources"),
    "Queue": ("weight", "capability", "reclaimable", "parent", "guarantee", "deserved"),
}
# Fields that change nothing kbatch schedules by (left out, named once).
_HARMLESS = {"PodGroup": frozenset[str](), "Queue": frozenset({"type"})}
# Fields kbatch cannot honour, and why.
_REFUSED = {
    "PodGroup": {
        "networkTopology": "kbatch places a gang by its kbatch.io/topology-required or "
        "-preferred annotation, not by Volcano's HyperNodes",
        "subGroupPolicy": "kbatch schedules a PodGroup as one gang (roles by "
        "minTaskMember), not as Volcano's sub-groups",
    },
    "Queue": {
        "extendClusters": "kbatch schedules within one cluster",
        "affinity": "kbatch has no node groups per queue (put a nodeSelector on the pods)",
    },
}
_CLOSED_STATES = frozenset({"Closed", "Closing"})


def is_volcano(obj: Mapping[str, Any]) -> bool:
    """Is ``obj`` a Volcano v1beta1 PodGroup or Queue (as given, not yet mapped)?"""
    return obj.get("apiVersion") == API_VERSION and obj.get("kind") in KINDS


def origin_of(obj: Mapping[str, Any] | None) -> str | None:
    """The Volcano API version the kbatch object ``obj`` was made from, or None."""
    annotations = ((obj or {}).get("metadata") or {}).get("annotations") or {}
    origin = annotations.get(ORIGIN_ANNOTATION)
    return origin if origin == API_VERSION else None


def kbatch_object(obj: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The kbatch object the Volcano PodGroup or Queue ``obj`` is scheduled as, and the
    fields left out as harmless (``spec.type``); ObjectError naming a field kbatch
    cannot honour or a misshapen one."""
    kind = str(obj.get("kind"))
    ref = records.ref_of(obj)
    try:
        return _kbatch_object(obj, kind)
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from exc


def _kbatch_object(obj: Mapping[str, Any], kind: str) -> tuple[dict[str, Any], list[str]]:
    given = fields.mapping(obj, "spec")
    spec: dict[str, Any] = {key: given[key] for key in _SAME[kind] if key in given}
    ignored: list[str] = []
    for key in given:
        if key in _SAME[kind]:
            continue
        if key in _HARMLESS[kind]:
            ignored.append(f"spec.{key}")
        elif key in _REFUSED[kind]:
            raise fields.FieldError(f"spec.{key}", _REFUSED[kind][key])
        elif kind == "Queue" and key in ("priority", "dequeueStrategy"):
            _queue_order(given, key)
        else:
            why = f"a Volcano field kbatch does not know, so cannot honour ({API_VERSION})"
            raise fields.FieldError(f"spec.{key}", why)
    metadata = dict(fields.mapping(obj, "metadata"))
    annotations = dict(fields.string_map(obj, "metadata.annotations"))
    annotations[ORIGIN_ANNOTATION] = API_VERSION
    metadata["annotations"] = annotations
    made: dict[str, Any] = {"apiVersion": KBATCH_API_VERSION, "kind": kind, "metadata": metadata}
    if kind == "Queue":
        if spec.get("weight") == 0:
            del spec["weight"]  # Volcano's webhook makes 0 (or absent) 1, kbatch's default
        state = fields.string(obj, "status.state") if "status" in obj else ""
        if state in _CLOSED_STATES:
            spec["state"] = "Closed"
    else:
        if spec.get("minResources") is not None:
            spec["minResources"] = _min_resources(fields.mapping(obj, "spec.minResources"))
        if _role_minimums_exceed(spec):
            del spec["minTaskMember"]
        if "status" in obj:
            made["status"] = obj["status"]
    made["spec"] = spec
    return made, ignored


# ResourceQuota's names for a pod's usage (``requests.cpu``, ``limits.cpu``,
# ``count/pods``), which Volcano's Job controller writes into minResources beside the
# plain names (``cpu``) and Volcano's scheduler does not read.
_QUOTA_PREFIXES = ("requests.", "limits.", "count/")


def _min_resources(given: Mapping[str, Any]) -> dict[str, Any]:
    """A Volcano PodGroup's minResources without ResourceQuota's names; FieldError for a
    ``requests.`` name whose plain name is not given."""
    for key in given:
        plain = key.removeprefix("requests.")
        if plain != key and plain not in given:
            why = (
                f"a ResourceQuota name, which Volcano's scheduler does not read: give "
                f"{plain!r} (Volcano's Job controller writes both)"
            )
            raise fields.FieldError(f"spec.minResources.{key}", why)
    return {k: v for k, v in given.items() if not k.startswith(_QUOTA_PREFIXES)}


def _role_minimums_exceed(spec: Mapping[str, Any]) -> bool:
    """Do the PodGroup's role minimums add up to more than its minMember (integers
    only: a misshapen value is left for the model to refuse, naming it)?"""
    roles, member = spec.get("minTaskMember"), spec.get("minMember", 1)
    if not isinstance(roles, Mapping) or type(member) is not int:
        return False
    counts = list(roles.values())
    return all(type(c) is int for c in counts) and sum(counts) > member


def _queue_order(spec: Mapping[str, Any], key: str) -> None:
    """Volcano's ``priority`` (reclaim order among queues) and ``dequeueStrategy``:
    kbatch honours only what it does itself (no priority, and ``traverse``: a job that
    does not fit does not hold back the ones behind it)."""
    value = spec[key]
    if key == "priority" and value not in (0, None):
        why = f"kbatch orders queues by their share, not by a priority (given {value!r})"
        raise fields.FieldError("spec.priority", why)
    if key == "dequeueStrategy" and value not in ("traverse", None):
        why = f"kbatch lets later jobs pass one that does not fit (traverse), not {value!r}"
        raise fields.FieldError("spec.dequeueStrategy", why)


# The live API: the collections watched where served, and where kbatch's status of a
# Volcano object is written.
POD_GROUPS = f"/apis/{API_VERSION}/podgroups"
QUEUES = f"/apis/{API_VERSION}/queues"


def status_path(kind: str, namespace: str, name: str) -> str:
    """Where the status of Volcano's ``kind`` object is written: a Queue's status
    subresource; a PodGroup's object itself (Volcano's PodGroup CRD has no status
    subresource; its own scheduler writes the status with the object)."""
    if kind == "Queue":
        return f"{QUEUES}/{name}/status"
    return f"/apis/{API_VERSION}/namespaces/{namespace}/podgroups/{name}"


def queue_status(status: Mapping[str, Any], closed: bool) -> dict[str, Any]:
    """kbatch's status of a queue (dumped) in Volcano's QueueStatus fields: ``state``
    and the counts of groups by phase, and ``allocated``. Volcano's schema has no
    ``deserved``, ``request`` or flow, so they are not written (the flow plugin's
    memory of a Volcano queue starts afresh when the scheduler restarts)."""
    written: dict[str, Any] = {"state": "Closed" if closed else "Open"}
    for key in ("pending", "inqueue", "running", "allocated"):
        if key in status:
            written[key] = status[key]
    return written
