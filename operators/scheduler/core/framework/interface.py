"""The narrow interface between the scheduler core and a cluster.

Two implementations: the Kubernetes runtime and the simulator. A snapshot comes in;
a session's outcome (binds, evictions, nominations, statuses, events) goes out,
applied by the backend in one step. Nothing else crosses.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from kbatch.operators.scheduler.core.framework.delta import Delta
from kbatch.operators.scheduler.core.framework.device_needs import NodeDevices
from kbatch.operators.scheduler.core.framework.info import (
    JobDeadline,
    JobInfo,
    QueueInfo,
)
from kbatch.operators.scheduler.core.framework.nodes import NodeSet
from kbatch.operators.scheduler.core.framework.outcome import ObjectRef, Outcome
from kbatch.operators.scheduler.core.framework.resources import Dims
from kbatch.operators.scheduler.core.framework.volume_needs import NodeVolumes

__all__ = ["Backend", "Delta", "ObjectRef", "OrphanPod", "Outcome", "Snapshot"]


@dataclass(frozen=True, slots=True)
class OrphanPod:
    """A pod that waits for a PodGroup that does not exist (``group``, its namespace's)."""

    namespace: str
    name: str
    group: str


@dataclass(slots=True)
class Snapshot:
    """A consistent view of the cluster for one session (the session may change it freely)."""

    dims: Dims
    nodes: NodeSet
    jobs: dict[str, JobInfo]
    queues: dict[str, QueueInfo]
    # Our pending pods named by a group annotation whose PodGroup does not exist.
    orphans: list[OrphanPod] = field(default_factory=list)
    # PodGroups (job uids) with pods, all of them another scheduler's: not ours to write.
    foreign_groups: frozenset[str] = frozenset()
    # Queues the cluster has but kbatch refused (a negative capability, ...): name -> why
    # ('field: why'), so that their PodGroups' conditions say why, not that the queue is
    # missing.
    refused_queues: dict[str, str] = field(default_factory=dict)
    # PodGroups likewise ('namespace/name' -> why): their pods' events say so.
    refused_groups: dict[str, str] = field(default_factory=dict)
    # Namespace name -> its labels, for the queues' spec.namespaceSelector (a namespace
    # not here is read by its name alone: ``kbatch.api.selector.namespace_labels``).
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    # Node name -> the images its status lists (name -> bytes), for image locality; a
    # node not here lists none. Read only: the state hands the same dict to snapshots.
    node_images: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    # The deadlines of the batch/v1 Jobs that have one, by Job uid (``TaskInfo.owner_job``).
    job_deadlines: dict[str, JobDeadline] = field(default_factory=dict)
    # PriorityClasses whose preemptionPolicy is Never, '' among them when the
    # globalDefault class's is (a pod naming no class is given that one's)
    non_preempting: frozenset[str] = frozenset()
    # What the pods on nodes hold of volumes (claims only one pod may use, volumes
    # counted against CSI attach limits); None while no pending pod of ours has a claim.
    node_volumes: NodeVolumes | None = None
    # The devices of the ResourceSlices and those claims hold (DRA); None while no
    # pending pod of ours has a resource claim.
    node_devices: NodeDevices | None = None
    # What changed since the snapshot before it in its maker's line, for the caches
    # that reuse work across sessions (None: no snapshot before it to compare with).
    delta: Delta | None = None


class Backend(Protocol):
    """What a scheduler needs of the cluster it schedules for: a snapshot in, an outcome
    applied. Two implement it: the live Kubernetes backend
    (``runtime.kube_backend.KubeBackend``) and the simulator's (``kbatch.sim.backend.
    SimBackend``); both hold the cluster state (``kbatch.cluster``) the snapshot is
    taken from."""

    def snapshot(self) -> Snapshot: ...

    def apply(self, outcome: Outcome) -> None:
        """Carry out a session's outcome: binds, evictions and nominations, then the
        PodGroup and Queue statuses (which count those binds), then the events. The
        next snapshot sees the binds and evictions, even those still being sent."""
        ...
