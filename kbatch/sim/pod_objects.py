"""What the simulator reads of a Kubernetes object and writes into a pod's: the pod's key
and group, an object's reference for its events, a condition put in a status in place
of the one of its type, as the API server merges it, and the kubelet's stop of a pod
past its ``activeDeadlineSeconds``; the Jobs that own a pod, and whether it was evicted."""

from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.cluster import records
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.operators.scheduler.core.framework.outcome import DISRUPTION_TARGET
from kbatch.sim import clock

Object = dict[str, Any]
PodKey = tuple[str, str]  # namespace, name


def object_ref(obj: Object) -> ObjectRef:
    metadata = obj["metadata"]
    return ObjectRef(obj["kind"], str(metadata.get("namespace") or ""), str(metadata["name"]))


def pod_key(pod: Object) -> PodKey:
    metadata = pod["metadata"]
    return str(metadata.get("namespace") or "default"), str(metadata["name"])


def group_of(pod: Object) -> str | None:
    """The pod's group: kbatch's annotation, else upstream's ``spec.schedulingGroup``
    (as ``records.parse_pod`` reads them)."""
    annotations = pod["metadata"].get("annotations") or {}
    group = annotations.get(GROUP_NAME_ANNOTATION)
    if group:
        return str(group)
    scheduling = (pod.get("spec") or {}).get("schedulingGroup")
    name = scheduling.get("podGroupName") if isinstance(scheduling, dict) else None
    return name if isinstance(name, str) and name else None


def owning_jobs(pod: Object) -> list[str]:
    """The uids of the batch/v1 Jobs that own ``pod``."""
    owners = pod["metadata"].get("ownerReferences") or ()
    return [str(owner.get("uid")) for owner in owners if owner.get("kind") == "Job"]


def told_disruption(pod: Object) -> bool:
    """Does ``pod`` carry the DisruptionTarget condition (kbatch evicted it)?"""
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(condition.get("type") == DISRUPTION_TARGET for condition in conditions)


def with_condition(
    conditions: object, condition: Object, now: float, kept_timestamps: bool = True
) -> list[Object]:
    """``conditions`` with ``condition`` in place of the one of its type (its transition
    time kept when the status did not change)."""
    others = (
        [c for c in conditions or [] if isinstance(c, dict)] if isinstance(conditions, list) else []
    )
    old = next((c for c in others if c.get("type") == condition["type"]), None)
    same = old is not None and old.get("status") == condition["status"]
    when = (
        old.get("lastTransitionTime")
        if same and old is not None
        else clock.timestamp(now, kept_timestamps)
    )
    kept = [c for c in others if c.get("type") != condition["type"]]
    return [*kept, {**condition, "lastTransitionTime": when}]


# What the kubelet writes of a pod active longer than its spec.activeDeadlineSeconds.
DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


def deadline_end(pod: Object, now: float) -> float | None:
    """When the kubelet stops a pod starting to run at ``now`` (unless its status says it
    started before): its start plus ``spec.activeDeadlineSeconds``; None without one."""
    deadline = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    if not isinstance(deadline, int) or isinstance(deadline, bool) or deadline <= 0:
        return None  # (none, or refused by the state naming the field)
    start_time = (pod.get("status") or {}).get("startTime")
    started = records.timestamp(start_time) if isinstance(start_time, str) else now
    return min(started, now) + deadline


def deadline_exceeded(status: Object) -> Object:
    """``status`` of a pod the kubelet stopped at its deadline."""
    return {**status, "phase": "Failed", "reason": DEADLINE_EXCEEDED, "message": DEADLINE_MESSAGE}
