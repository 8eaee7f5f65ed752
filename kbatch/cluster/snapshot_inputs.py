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


class QueueInfos:
    """Each queue's QueueInfo for one snapshot after another. What a queue's spec and
    metadata make of it (its vectors, weight, parent, creation time) is worked out once
    for the same spec and metadata objects and the same dimensions (by name): a status write keeps
    the rest of the parsed queue (``records.parse_queue``), and every snapshot read
    every queue's spec again. The kept vectors are shared, read-only; each snapshot
    gets its own QueueInfo, which the session fills in. ``keep`` off
    (``Shortcuts.queue_vectors``): ``queue_info`` every time."""

    def __init__(self, keep: bool = True) -> None:
        self._keep = keep
        self._kept: dict[str, tuple[object, object, tuple[str, ...], QueueInfo]] = {}

    def of(self, queues: Mapping[str, Queue], dims: Dims) -> dict[str, QueueInfo]:
        if not self._keep:
            return {name: queue_info(queue, dims) for name, queue in queues.items()}
        kept, now = self._kept, {}
        infos = {}
        for name, queue in queues.items():
            held = kept.get(name)
            if (
                held is None
                or held[0] is not queue.spec
                or held[1] is not queue.metadata
                or held[2] != dims.names
            ):
                made = _read_only(queue_info(queue, dims))
                held = (queue.spec, queue.metadata, dims.names, made)
            now[name] = held
            made = held[3]
            infos[name] = QueueInfo(
                name=made.name,
                weight=made.weight,
                created=made.created,
                capability=made.capability,
                reclaimable=made.reclaimable,
                open=made.open,
                old_status=queue.status,
                parent=made.parent,
                guarantee=made.guarantee,
                claim=made.claim,
                namespace_selector=made.namespace_selector,
                borrowing_limit=made.borrowing_limit,
                lending_limit=made.lending_limit,
            )
        self._kept = now  # (a queue gone is dropped)
        return infos


def _read_only(info: QueueInfo) -> QueueInfo:
    """``info`` with its spec's vectors made read-only: they are shared from one
    snapshot to the next, and nothing may change them in place."""
    for vector in (
        info.capability,
        info.guarantee,
        info.claim,
        info.borrowing_limit,
        info.lending_limit,
    ):
        if vector is not None:
            vector.flags.writeable = False
    return info


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
