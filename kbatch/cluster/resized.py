"""A pod resized in place (``InPlacePodVerticalScaling``, GA in Kubernetes 1.35): what
its containers hold of a node, as kube-scheduler counts it.

A running pod's container requests may be changed in its spec; the kubelet then
actuates the change, or not yet (``PodResizePending``: ``Deferred``, ``Infeasible``),
and reports in the container's status what it has allocated (``allocatedResources``)
and what the container runs with (``resources``). Until both agree, the node holds
the larger: kube-scheduler counts, for each container (and sidecar: an init container
that always restarts) whose status reports ``resources``, each resource's largest of
the spec's request, the status's and the allocated one; for a pod whose resize is
``Infeasible``, the largest of the status's and the allocated (the spec's request will
never be). Counting the spec alone, kbatch bound a pod to a node whose kubelet still
held the old, larger requests, and the kubelet refused it (``OutOfcpu``).

``counted_spec`` gives the spec with those requests in place, for the pod's record to
be parsed from, or None when they are the spec's own (almost every pod): the spec's
parse stays shared with the other pods of its template.
"""

from collections.abc import Mapping
from typing import Any

from kbatch.cluster import fields
from kbatch.cluster.quantity import amounts

RESIZE_PENDING = "PodResizePending"
INFEASIBLE = "Infeasible"


def reported(status: object) -> tuple[Any, ...] | None:
    """What of ``status`` the counted requests are read from (each container status
    that reports its resources), to compare two versions of a pod by; None: nothing."""
    if type(status) is not dict:
        return None
    found: list[Any] = []
    for part in ("containerStatuses", "initContainerStatuses"):
        listed = status.get(part)
        if type(listed) is not list:
            continue
        for cs in listed:
            if type(cs) is dict and ("resources" in cs or "allocatedResources" in cs):
                found.append((cs.get("name"), cs.get("resources"), cs.get("allocatedResources")))
    if not found:
        return None
    return (*found, _infeasible(status))


def counted_spec(spec: Mapping[str, Any], status: object) -> Mapping[str, Any] | None:
    """``spec`` with each container's requests as a node holds them for this status;
    None when they are the spec's own. FieldError naming the status's field if bad."""
    if reported(status) is None:
        return None
    assert isinstance(status, dict)
    statuses = _statuses_by_name(status)
    infeasible = _infeasible(status)
    changed: dict[tuple[str, int], dict[str, Any]] = {}
    for part in ("containers", "initContainers"):
        for i, container in enumerate(fields.mappings(spec, part, at="spec")):
            if part == "initContainers" and container.get("restartPolicy") != "Always":
                continue
            found = statuses.get(str(container.get("name")))
            if found is None:
                continue
            cs, where = found
            requests = _counted(container, cs, where, infeasible, f"spec.{part}[{i}]")
            if requests is not None:
                changed[(part, i)] = requests
    if not changed:
        return None
    counted = dict(spec)
    for part in ("containers", "initContainers"):
        if any(key[0] == part for key in changed):
            counted[part] = [
                _with_requests(c, changed[(part, i)]) if (part, i) in changed else c
                for i, c in enumerate(spec[part])
            ]
    return counted


def _statuses_by_name(status: Mapping[str, Any]) -> dict[str, tuple[Mapping[str, Any], str]]:
    found: dict[str, tuple[Mapping[str, Any], str]] = {}
    for part in ("containerStatuses", "initContainerStatuses"):
        for i, cs in enumerate(fields.mappings(status, part, at="status")):
            if "resources" in cs:  # (kube-scheduler reads a status only with resources)
                found[str(cs.get("name"))] = (cs, f"status.{part}[{i}]")
    return found


def _infeasible(status: Mapping[str, Any]) -> bool:
    conditions = status.get("conditions")
    for condition in conditions if type(conditions) is list else ():
        if type(condition) is dict and condition.get("type") == RESIZE_PENDING:
            return condition.get("reason") == INFEASIBLE
    return False


def _counted(
    container: Mapping[str, Any],
    cs: Mapping[str, Any],
    where: str,
    infeasible: bool,
    spec_where: str,
) -> dict[str, Any] | None:
    """The container's counted requests (raw quantities), or None if the spec's."""
    own = {  # (each request defaults to its limit, as the API server defaults it)
        **fields.mapping(container, "resources.limits", at=spec_where),
        **fields.mapping(container, "resources.requests", at=spec_where),
    }
    running = fields.mapping(cs, "resources.requests", at=where)
    allocated = fields.mapping(cs, "allocatedResources", at=where)
    if not infeasible and (not running or running == own) and (not allocated or allocated == own):
        return None  # (the common case: the kubelet reports what the spec asks)
    sources = [(running, f"{where}.resources.requests"), (allocated, f"{where}.allocatedResources")]
    if not infeasible:
        sources.insert(0, (own, f"{spec_where}.resources.requests"))
    largest: dict[str, tuple[float, Any]] = {}
    for raw, at in sources:
        for name, amount in amounts(raw, at).items():
            if name not in largest or amount > largest[name][0]:
                largest[name] = (amount, raw[name])
    counted = {name: quantity for name, (_, quantity) in largest.items()}
    own_amounts = {name: v for name, v in amounts(own, spec_where).items() if v}
    if {name: amount for name, (amount, _) in largest.items() if amount} == own_amounts:
        return None  # (the same amounts, written otherwise: '1' and '1000m')
    return counted


def _with_requests(container: Mapping[str, Any], requests: dict[str, Any]) -> dict[str, Any]:
    resources = dict(container.get("resources") or {})
    resources["requests"] = requests
    return {**container, "resources": resources}
