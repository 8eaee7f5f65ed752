"""What a snapshot takes from the objects besides their pods' tasks and jobs: the
resource names they mention (its dimensions) and the queues."""

from collections.abc import Mapping

import numpy as np

from kbatch.api.podgroup import PodGroup
from kbatch.api.queue import ROOT_QUEUE, Queue, QueueState
from kbatch.cluster.quantity import amounts
from kbatch.cluster.records import NodeRecord, PodRecord, timestamp
from kbatch.operators.scheduler.core.framework.info import QueueInfo
from kbatch.operators.scheduler.core.framework.resources import Dims


def resource_names(
    nodes: list[NodeRecord],
    pods: list[PodRecord],
    pod_groups: Mapping[str, PodGroup],
    queues: Mapping[str, Queue],
) -> set[str]:
    """Every resource name the objects mention: a name only a PodGroup's minResources
    or a Queue's capability uses is a dimension too (one the cluster has none of)."""
    names: set[str] = set()
    for objects in (nodes, pods, pod_groups.values(), queues.values()):
        for record in objects:
            names.update(resource_names_of(record))
    return names


def resource_names_of(record: object) -> tuple[str, ...]:
    """The resource names one parsed object mentions (a dimension each): a Node's
    allocatable, a Pod's request, a PodGroup's minResources, a Queue's capability."""
    if isinstance(record, NodeRecord):
        return tuple(record.allocatable)
    if isinstance(record, PodRecord):
        return tuple(name for name, _ in record.spec.request)
    if isinstance(record, PodGroup):
        return tuple(record.spec.min_resources or ())
    if isinstance(record, Queue):
        spec = record.spec
        guarantee = spec.guarantee.resource if spec.guarantee is not None else {}
        limits = (*(spec.borrowing_limit or ()), *(spec.lending_limit or ()))
        return (*(spec.capability or ()), *guarantee, *(spec.deserved or ()), *limits)
    return ()


def queue_info(queue: Queue, dims: Dims) -> QueueInfo:
    spec = queue.spec
    capability = None
    if spec.capability:
        capability = _vector(spec.capability, "spec.capability", dims, np.inf)
    guarantee = claim = None
    if spec.guarantee is not None and spec.guarantee.resource:
        guarantee = _vector(spec.guarantee.resource, "spec.guarantee.resource", dims, 0.0)
    if spec.deserved:
        claim = _vector(spec.deserved, "spec.deserved", dims, 0.0)
    borrowing = lending = None
    if spec.borrowing_limit:
        borrowing = _vector(spec.borrowing_limit, "spec.borrowingLimit", dims, np.inf)
    if spec.lending_limit:
        lending = _vector(spec.lending_limit, "spec.lendingLimit", dims, np.inf)
    parent = spec.parent if spec.parent != ROOT_QUEUE else None
    return QueueInfo(
        name=queue.metadata.name,
        weight=spec.weight,
        created=timestamp(queue.metadata.creation_timestamp),
        capability=capability,
        reclaimable=spec.reclaimable,
        open=spec.state is QueueState.OPEN,
        old_status=queue.status,
        parent=parent,
        guarantee=guarantee,
        claim=claim,
        namespace_selector=spec.namespace_selector,
        borrowing_limit=borrowing,
        lending_limit=lending,
    )


def _vector(values: Mapping[str, str], field: str, dims: Dims, unset: float) -> np.ndarray:
    """A Queue's resource list as a vector in ``dims``, ``unset`` where it names none."""
    out = np.full(len(dims), unset)
    for name, value in amounts(values, field).items():
        out[dims.index[name]] = value
    return out


def foreign_groups(pods: list[PodRecord], ours: frozenset[str]) -> frozenset[str]:
    """The PodGroups (by unit, a pod's group's key) with pods, none of them of a
    scheduler named in ``ours``: another scheduler's groups, not ours to write. Ours are
    gathered only for the groups that have one of theirs (a set addition per pod would
    cost every snapshot a pass)."""
    theirs = {pod.unit for pod in pods if pod.group and pod.scheduler_name not in ours}
    if not theirs:
        return frozenset()
    mine = {
        pod.unit for pod in pods if pod.group and pod.unit in theirs and pod.scheduler_name in ours
    }
    return frozenset(theirs - mine)
