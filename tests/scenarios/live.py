"""A "live cluster" made by the simulator, for the CLI's visibility and ETA tests.

``cluster_at(documents, seconds)`` simulates ``documents`` up to ``seconds`` and returns
the objects as an API server would list them then (``ClusterObjects``, ``now`` =
``seconds``): pods that finished carry the containers' ``finishedAt`` a kubelet writes
(start + their ``kbatch.io/sim-duration``). ``start_of(documents, group)`` is when the
same simulation, left to run on, starts the PodGroup: what an ETA is checked against.
"""

from typing import Any

from kbatch import sim
from kbatch.api.times import rfc3339
from kbatch.cluster.records import timestamp
from kbatch.sim import clock, manifests
from kbatch.visibility import standing as visibility
from scenarios import objects as o

Obj = dict[str, Any]


def gang(
    name: str,
    size: int,
    cpu: str = "1",
    *,
    queue: str | None = None,
    duration: str | None = None,
    deadline: int | None = None,
    lifetime: str | None = None,
    submit_at: str | None = None,
) -> list[Obj]:
    """A PodGroup of ``size`` and its pods; ``duration``: how long they run in the
    simulation; ``deadline``: their activeDeadlineSeconds; ``lifetime``: the group's
    kbatch.io/lifetime."""
    group = o.pod_group(name, size, queue)
    if lifetime is not None:
        group["metadata"]["annotations"] = {"kbatch.io/lifetime": lifetime}
    extra: dict[str, Any] = {} if deadline is None else {"activeDeadlineSeconds": deadline}
    pods = [
        o.pod(f"{name}-{i}", cpu=cpu, group=name, duration=duration, **extra) for i in range(size)
    ]
    documents = [group, *pods]
    if submit_at is not None:
        documents = [o.at(doc, submit_at) for doc in documents]
    return documents


def cluster_at(documents: list[Obj], seconds: float) -> visibility.ClusterObjects:
    """(A scheduler conf goes in ``documents`` as ``objects.conf_map``.)"""
    outcome = sim.run(documents=documents, until=seconds, warn=lambda _: None)
    state = outcome.cluster.state
    return visibility.ClusterObjects(
        now=seconds,
        nodes=state.list("Node"),
        pods=[_with_finish(pod) for pod in state.list("Pod")],
        pod_groups=state.list("PodGroup"),
        queues=state.list("Queue"),
        priority_classes=state.list("PriorityClass"),
        quotas=state.list("ResourceQuota"),
        jobs=[record.obj for record in outcome.jobs.jobs.values()],
        claims=state.list("PersistentVolumeClaim"),
        volumes=state.list("PersistentVolume"),
        storage_classes=state.list("StorageClass"),
        csi_nodes=state.list("CSINode"),
    )


def _with_finish(pod: Obj) -> Obj:
    status = pod.get("status") or {}
    duration = (pod["metadata"].get("annotations") or {}).get(manifests.DURATION)
    if status.get("phase") != "Succeeded" or duration is None or not status.get("startTime"):
        return pod
    finished = timestamp(status["startTime"]) + clock.parse_duration(duration, "test")
    terminated = {"exitCode": 0, "reason": "Completed", "finishedAt": rfc3339(finished)}
    containers = [{"name": "main", "state": {"terminated": terminated}}]
    return {**pod, "status": {**status, "containerStatuses": containers}}


def start_of(documents: list[Obj], group: str) -> float | None:
    """When the simulation of ``documents`` moves PodGroup ``group`` to Running."""
    result = sim.simulate(documents=documents, warn=lambda _: None)
    for event in result["events"]:
        if (event["kind"], event["name"], event["reason"]) == ("PodGroup", group, "Running"):
            return float(event["time"])
    return None
