"""The narrow interface between the scheduler core and a cluster.

Two implementations: the Kubernetes runtime and the simulator. A snapshot comes in;
a session's outcome (binds, evictions, nominations, statuses, events) goes out,
applied by the backend in one step. Nothing else crosses.
"""

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Protocol

from kbatch.operators.scheduler.core.framework.info import (
    JobInfo,
    QueueInfo,
)
from kbatch.operators.scheduler.core.framework.nodes import NodeSet
from kbatch.operators.scheduler.core.framework.outcome import ObjectRef, Outcome
from kbatch.operators.scheduler.core.framework.resources import Dims

__all__ = ["Backend", "ObjectRef", "OrphanPod", "Outcome", "Snapshot", "follows"]


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
    # ('field: why'), so that their PodGroups are told why, not that the queue is missing.
    refused_queues: dict[str, str] = field(default_factory=dict)
    # PodGroups likewise ('namespace/name' -> why): their pods are told so.
    refused_groups: dict[str, str] = field(default_factory=dict)
    # Where it comes from: its maker and its number in the maker's line of snapshots
    # (None: made on its own). ``handed_on`` is of the snapshot just before it in that line.
    lineage: tuple[object, int] | None = None
    # The jobs (by uid) that are that snapshot's objects, which neither a session nor a
    # write has changed since (``kbatch.cluster.kept_jobs``): exactly what they were.
    handed_on: Mapping[str, JobInfo] = field(default_factory=dict)
    # The uids of that snapshot's jobs and this one's that are not handed on, when its
    # maker knows them without a pass over every job (None: it does not; ``changed_jobs``).
    not_handed_on: frozenset[str] | None = None
    # The uids of its jobs sessions said they touched or moved the phase of since it was
    # made (``JobInfo.change_log``: its maker's log, told until the maker's next
    # snapshot), when its maker keeps one.
    told: list[str] | None = None

    def changed_jobs(self, of: Mapping[str, JobInfo]) -> AbstractSet[str]:
        """The uids of ``of`` (this snapshot's jobs, or the last one's in its line) that
        it does not hand on."""
        return not_handed_on_of(of, self.handed_on, self.not_handed_on)


def not_handed_on_of(
    of: Mapping[str, JobInfo],
    handed_on: Mapping[str, JobInfo],
    not_handed_on: frozenset[str] | None,
) -> AbstractSet[str]:
    """The uids of ``of`` that a snapshot with these ``handed_on`` and ``not_handed_on``
    does not hand on (``Snapshot.changed_jobs``): among those it says, if it says."""
    if not_handed_on is None:
        return of.keys() - handed_on.keys()
    return {uid for uid in not_handed_on if uid in of}


def gone_from(
    last: Mapping[str, object],
    now: Mapping[str, object],
    not_handed_on: frozenset[str] | None,
    changed: Iterable[str],
) -> Iterable[str]:
    """The keys of ``last`` (a snapshot's jobs, or what was kept of them) that ``now``
    (the next one's of its line) has not. Among the units that snapshot says it did not
    hand on, when it says: a set difference of every key costs more than the rest. Else
    none when as many are still there (``changed``: the keys of ``now`` not handed on),
    else that difference."""
    if not_handed_on is not None:
        return [uid for uid in not_handed_on if uid in last and uid not in now]
    still_there = len(now) - sum(1 for uid in changed if uid not in last)
    return last.keys() - now.keys() if still_there < len(last) else ()


def follows(lineage: tuple[object, int] | None, earlier: tuple[object, int] | None) -> bool:
    """Is the snapshot of ``lineage`` the next one after that of ``earlier`` in one line
    (so that its ``handed_on`` is of the one ``earlier`` names)?"""
    return (
        lineage is not None
        and earlier is not None
        and earlier[0] is lineage[0]
        and earlier[1] == lineage[1] - 1
    )


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
