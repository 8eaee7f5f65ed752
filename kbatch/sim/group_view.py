"""Where a PodGroup's pods are, in the output's words (DESIGN §12): each role's running
pods against its minimum, the pods running beyond the group's minimum (surplus: an
elastic gang's extra workers, the first to go when room is needed), and, for a group
that asks for a topology level (``kbatch.io/topology-required`` or ``-preferred``), the
domains of that level its pods are on.

The JSON rows of ``podGroups`` carry ``surplus`` (rows of groups with some) and
``topology`` (rows of groups that ask: ``{"mode": "required"|"preferred", "level":
LEVEL, "domains": [...]}``, the domains sorted, empty while none of its pods is on a
node); the table shows ``role_counts`` (ROLES), SURPLUS and TOPOLOGY columns when some
group has them, and the HTML report a line per group in its job table.
"""

from collections.abc import Iterable, Mapping
from typing import Any

from kbatch.api import TOPOLOGY_PREFERRED_ANNOTATION, TOPOLOGY_REQUIRED_ANNOTATION
from kbatch.cluster.records import HOSTNAME_LABEL
from kbatch.sim.pod_objects import group_of

Json = dict[str, Any]
GroupKey = tuple[str, str]  # (namespace, name)
# Pods on a node that no longer hold it do not say where the group runs.
_OVER = ("Succeeded", "Failed")


def surplus(running: int, min_member: int) -> int:
    """Running pods beyond minMember (an elastic gang's surplus)."""
    return max(running - min_member, 0)


def surplus_field(running: int, min_member: int) -> Json:
    """``{"surplus": N}`` for a group with pods running beyond minMember, else {}."""
    extra = surplus(running, min_member)
    return {"surplus": extra} if extra else {}


def topology_request(group: Mapping[str, Any]) -> tuple[str, str] | None:
    """(mode, level) a PodGroup object asks for, or None."""
    annotations = (group.get("metadata") or {}).get("annotations") or {}
    for mode, key in (
        ("required", TOPOLOGY_REQUIRED_ANNOTATION),
        ("preferred", TOPOLOGY_PREFERRED_ANNOTATION),
    ):
        level = annotations.get(key)
        if isinstance(level, str) and level:
            return mode, level
    return None


def topology_fields(
    groups: Iterable[Json], pods: Iterable[Json], nodes: Iterable[Json]
) -> dict[GroupKey, Json]:
    """Per PodGroup that asks for a topology level: its ``topology`` JSON field, the
    domains of that level its pods on nodes are in. A node without the level's label is
    named as ``NODE (no LEVEL)``: the group is not inside any domain there."""
    requests: dict[GroupKey, tuple[str, str]] = {}
    for group in groups:
        asked = topology_request(group)
        if asked is not None:
            metadata = group["metadata"]
            requests[(metadata["namespace"], metadata["name"])] = asked
    if not requests:
        return {}
    labels = {node["metadata"]["name"]: _labels(node) for node in nodes}
    domains: dict[GroupKey, set[str]] = {key: set() for key in requests}
    for pod in pods:
        owner, node = group_of(pod), (pod.get("spec") or {}).get("nodeName")
        key = (pod["metadata"]["namespace"], owner or "")
        phase = (pod.get("status") or {}).get("phase")
        if key not in requests or not node or phase in _OVER:
            continue
        level = requests[key][1]
        value = labels.get(node, {}).get(level)
        domains[key].add(value if value is not None else f"{node} (no {level})")
    return {
        key: {"mode": mode, "level": level, "domains": sorted(domains[key])}
        for key, (mode, level) in requests.items()
    }


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    """A Node's labels, with the hostname label a node has (kubelet sets it)."""
    metadata = node.get("metadata") or {}
    return {HOSTNAME_LABEL: metadata["name"], **(metadata.get("labels") or {})}


def topology_text(topology: Json | None) -> str | None:
    """'kbatch.io/rack: rack-1' (or 'rack-1, rack-2'; 'required kbatch.io/rack: none yet')."""
    if not topology:
        return None
    where = ", ".join(topology["domains"]) or "none yet"
    return f"{topology['mode']} {topology['level']}: {where}"


def role_counts(result: Json) -> dict[GroupKey, str]:
    """'launcher 1/1, worker 3/8' per PodGroup with roles: each role's running pods
    against its minimum (and roles without a minimum, with their running pods)."""
    running: dict[GroupKey, dict[str, int]] = {}
    for pod in result["pods"]:
        if pod.get("role") and pod["podGroup"]:
            counts = running.setdefault((pod["namespace"], pod["podGroup"]), {})
            counts.setdefault(pod["role"], 0)
            counts[pod["role"]] += pod["phase"] == "Running"
    out = {}
    for group in result["podGroups"]:
        key = (group["namespace"], group["name"])
        minimums = group.get("minTaskMember") or {}
        counts = running.get(key, {})
        if not minimums and not counts:
            continue
        parts = [
            f"{role} {counts.get(role, 0)}/{minimums[role]}" if role in minimums
            else f"{role} {counts.get(role, 0)}"
            for role in sorted({*minimums, *counts})
        ]  # fmt: skip
        out[key] = ", ".join(parts)
    return out


def summaries(result: Json) -> dict[GroupKey, str]:
    """One line per PodGroup with something to say beyond its counts: roles, surplus,
    topology ('worker 8/8 · +2 surplus · preferred kbatch.io/rack: rack-1')."""
    roles = role_counts(result)
    out = {}
    for group in result["podGroups"]:
        key = (group["namespace"], group["name"])
        parts = [
            roles.get(key),
            f"+{group['surplus']} surplus" if group.get("surplus") else None,
            topology_text(group.get("topology")),
        ]
        said = [part for part in parts if part]
        if said:
            out[key] = " · ".join(said)
    return out
