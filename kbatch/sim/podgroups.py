"""The PodGroup controller the simulator plays (the podgroup operator's job in a cluster).

After every tick it recounts each touched PodGroup's running, succeeded and failed
pods and moves its phase by the shared rules (``core.framework.podgroup_status``).
It reads the pods' parsed records with the snapshot's own ``task_status`` and
counts them as the session close does, so both count alike and neither undoes
the other's write. Only changed statuses
are written; conditions are the scheduler's and kept as they are.
"""

from collections import Counter

from kbatch.cluster.records import task_status
from kbatch.operators.scheduler.core.framework import podgroup_status as pod_group_status
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.outcome import phase_event
from kbatch.sim.backend import SimBackend


def reconcile(cluster: SimBackend) -> None:
    """Write the status of every PodGroup touched since the last call that no longer
    matches its pods."""
    for namespace, name in sorted(cluster.touched.groups):
        group = cluster.state.pod_group(f"{namespace}/{name}")
        if group is None:
            continue
        counts = _count(cluster, namespace, name)
        status = pod_group_status.counted(group.status, group.spec.min_member, counts)
        if status != group.status:
            cluster.update_pod_group(namespace, name, status)
            if status.phase is not group.status.phase:  # an event, as the session close makes it
                event = phase_event(namespace, name, group.status.phase, status.phase)
                cluster.record(event.ref, event.type, event.reason, event.message)
    cluster.touched.groups.clear()


def _count(cluster: SimBackend, namespace: str, group: str) -> Counter[TaskStatus]:
    """The statuses of the PodGroup's pods, as the scheduler would count them."""
    counts: Counter[TaskStatus] = Counter()
    for name in cluster.group_pods.get((namespace, group), ()):
        pod = cluster.state.pod_record(namespace, name)
        if (
            pod is None
            or pod.group != group
            or pod.scheduler_name not in cluster.state.scheduler_names
        ):
            continue
        status = task_status(pod)
        if status is not None:
            counts[status] += 1
    return counts
