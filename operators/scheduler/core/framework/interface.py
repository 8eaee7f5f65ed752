"""The narrow interface between the scheduler core and a cluster.

Two implementations: the Kubernetes backend and the simulator. A snapshot comes
in; binds, evictions, status and events go out. Nothing else crosses.
"""

from dataclasses import dataclass, field
from typing import Protocol

from kbatch.api.podgroup import PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.operators.scheduler.core.framework.info import JobInfo, NodeSet, QueueInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.resources import Dims


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    namespace: str
    name: str


@dataclass(slots=True)
class Snapshot:
    """A consistent view of the cluster for one session (the session may change it freely)."""

    dims: Dims
    nodes: NodeSet
    jobs: dict[str, JobInfo]
    queues: dict[str, QueueInfo]
    # Pods named by a group annotation whose PodGroup does not exist: uid -> group name.
    orphans: dict[str, str] = field(default_factory=dict)
    # PodGroups (job uids) with pods, all of them another scheduler's: not ours to write.
    foreign_groups: frozenset[str] = frozenset()


class Binder(Protocol):
    def bind(self, task: TaskInfo, node: str) -> None:
        """The task is bound to ``node``: the cluster (and its next snapshot) sees it so,
        though the binding itself may be sent only at ``flush``."""

    def flush(self) -> None:
        """The session has ended: send the binds it made."""

    def nominate(self, task: TaskInfo, node: str | None) -> None:
        """Keep ``node``'s room for pending ``task`` (its pod's status.nominatedNodeName),
        or stop keeping it (None)."""


class Evictor(Protocol):
    def evict(self, task: TaskInfo, reason: str) -> None: ...


class StatusWriter(Protocol):
    def update_pod_group(self, namespace: str, name: str, status: PodGroupStatus) -> None: ...

    def update_queue(self, name: str, status: QueueStatus) -> None: ...


class EventRecorder(Protocol):
    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None: ...


class Cluster(Protocol):
    """What a scheduler needs of a cluster: a snapshot in, side effects out."""

    @property
    def binder(self) -> Binder: ...

    @property
    def evictor(self) -> Evictor: ...

    @property
    def status(self) -> StatusWriter: ...

    @property
    def events(self) -> EventRecorder: ...

    def snapshot(self) -> Snapshot: ...
