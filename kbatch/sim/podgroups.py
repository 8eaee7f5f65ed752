"""The PodGroup controller the simulator plays (the podgroup operator's job in a cluster).

After every tick it recounts each touched PodGroup's running, succeeded and failed
pods and moves its phase by the shared rules (``kbatch.api.podgroup.next_phase``).
It reads the pods as the scheduler's snapshot does (``pod_status`` mirrors
``kbatch.cluster.snapshot.task_status``, and a test holds them together), so
both count alike and neither undoes the other's write. Only changed statuses
are written; conditions are the scheduler's and kept as they are.
"""

from collections import Counter
from typing import Any

from kbatch.api.podgroup import PodGroupPhase, PodGroupStatus, next_phase
from kbatch.operators.scheduler.framework.info import TaskStatus
from kbatch.sim.cluster import SimCluster, group_of

_PHASES = {
    "Succeeded": TaskStatus.SUCCEEDED,
    "Failed": TaskStatus.FAILED,
    "Running": TaskStatus.RUNNING,
    "Unknown": TaskStatus.UNKNOWN,
}


def pod_status(pod: dict[str, Any], scheduler_names: frozenset[str]) -> TaskStatus | None:
    """How the scheduler sees a raw pod as a task of a PodGroup (None: not one)."""
    if (pod.get("spec") or {}).get("schedulerName") not in scheduler_names:
        return None
    phase = str((pod.get("status") or {}).get("phase") or "Pending")
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    if phase in ("Succeeded", "Failed"):
        return _PHASES[phase]
    if pod["metadata"].get("deletionTimestamp"):
        return TaskStatus.RELEASING if bound else None
    if phase in _PHASES:
        return _PHASES[phase]
    return TaskStatus.BOUND if bound else TaskStatus.PENDING


def status_of(old: PodGroupStatus, min_member: int, counts: Counter[TaskStatus]) -> PodGroupStatus:
    """What a PodGroup's status should say, given its pods' statuses."""
    succeeded = counts[TaskStatus.SUCCEEDED]
    failed = counts[TaskStatus.FAILED]
    phase = next_phase(
        old.phase,
        min_member=min_member,
        scheduled=counts[TaskStatus.BINDING]
        + counts[TaskStatus.BOUND]
        + counts[TaskStatus.RUNNING],
        succeeded=succeeded,
        unfinished=sum(counts.values()) - succeeded - failed,
        admitted=old.phase is PodGroupPhase.INQUEUE,
    )
    return old.model_copy(
        update={
            "phase": phase,
            "running": counts[TaskStatus.RUNNING],
            "succeeded": succeeded,
            "failed": failed,
        }
    )


def reconcile(cluster: SimCluster) -> None:
    """Write the status of every PodGroup touched since the last call that no longer
    matches its pods."""
    state = cluster.state
    groups = state.pod_groups()
    for namespace, name in sorted(cluster.touched.groups):
        group = groups.get(f"{namespace}/{name}")
        if group is None:
            continue
        counts = _count(cluster, namespace, name)
        status = status_of(group.status, group.spec.min_member, counts)
        if status != group.status:
            cluster.update_pod_group(namespace, name, status)
    cluster.touched.groups.clear()


def _count(cluster: SimCluster, namespace: str, group: str) -> Counter[TaskStatus]:
    """The statuses of the PodGroup's pods, as the scheduler would count them."""
    counts: Counter[TaskStatus] = Counter()
    for name in cluster.group_pods.get((namespace, group), ()):
        pod = cluster.state.get("Pod", namespace, name)
        if pod is None or group_of(pod) != group:
            continue
        status = pod_status(pod, cluster.state.scheduler_names)
        if status is not None:
            counts[status] += 1
    return counts
