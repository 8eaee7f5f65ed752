"""What admission may read of the cluster: a small Protocol, and its implementation over
a ClusterState (the scheduler's watched cache, or the simulator's cluster).

Jobs are not in a ClusterState (the scheduler does not watch them): the Jobs of a
group come from whoever knows them — a kopf index of Jobs in ``kbatch run``, the
simulated job controller in a simulation.
"""

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from kbatch.api.podgroup import PodGroup, PodGroupPhase
from kbatch.api.queue import Queue
from kbatch.cluster import fields
from kbatch.cluster.state import ClusterState

GroupJobs = Callable[[str, str], Sequence[Mapping[str, Any]]]


@dataclass(frozen=True, slots=True)
class Quota:
    """A ResourceQuota as admission reads it: ``hard`` as written (quantities as strings);
    ``scopes`` and the ``scope_selector``'s matchExpressions as written."""

    namespace: str
    name: str
    hard: Mapping[str, Any]
    scopes: tuple[str, ...] = ()
    scope_selector: tuple[Mapping[str, Any], ...] = ()


class ClusterView(Protocol):
    def queue(self, name: str) -> Queue | None:
        """The Queue of that name, or None."""
        ...

    def queue_refusal(self, name: str) -> str | None:
        """Why kbatch refuses the cluster's Queue of that name ('field: why'), or None when
        it has no such refused Queue (then ``queue`` says whether it exists)."""
        ...

    def queue_children(self, name: str) -> list[str]:
        """The names of the Queues whose spec.parent is ``name``, sorted."""
        ...

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        """The Namespace's labels, or None when it is not known."""
        ...

    def pod_group(self, namespace: str, name: str) -> PodGroup | None:
        """The PodGroup, or None when there is no such PodGroup."""
        ...

    def pod_group_phase(self, namespace: str, name: str) -> PodGroupPhase | None:
        """The PodGroup's phase, or None when there is no such PodGroup."""
        ...

    def pod_groups(self, namespace: str) -> Iterable[PodGroup]:
        """The PodGroups of one namespace."""
        ...

    def pod_groups_in_queue(self, queue: str) -> list[str]:
        """``namespace/name`` of every PodGroup whose spec.queue is ``queue``."""
        ...

    def quotas(self, namespace: str) -> Iterable[Quota]: ...

    def group_jobs(self, namespace: str, group: str) -> Sequence[Mapping[str, Any]]:
        """The Jobs known to make pods of ``group`` (at least their metadata's name and
        annotations, and spec's parallelism, completions, suspend and template)."""
        ...

    def scheduler_names(self) -> frozenset[str]:
        """The pod schedulerNames kbatch schedules."""
        ...


def no_jobs(namespace: str, group: str) -> Sequence[Mapping[str, Any]]:
    return ()


class StateView:
    """A ClusterView over a ClusterState; ``queues`` are known besides the state's
    (a Queue just created that the watch has not brought yet), ``refused_queues``
    (name -> 'field: why') besides those the state refused, and ``namespaces`` (name ->
    labels) besides the state's Namespaces."""

    def __init__(
        self,
        state: ClusterState,
        group_jobs: GroupJobs = no_jobs,
        queues: Mapping[str, Queue] | None = None,
        refused_queues: Mapping[str, str] | None = None,
        namespaces: Mapping[str, Mapping[str, str]] | None = None,
    ) -> None:
        self.state = state
        self._group_jobs = group_jobs
        self._queues = queues or {}
        self._refused_queues = refused_queues or {}
        self._namespaces = namespaces or {}

    def queue(self, name: str) -> Queue | None:
        return self.state.queues().get(name) or self._queues.get(name)

    def queue_refusal(self, name: str) -> str | None:
        return self.state.refusal("Queue", "", name) or self._refused_queues.get(name)

    def queue_children(self, name: str) -> list[str]:
        known = {**self._queues, **self.state.queues()}
        return sorted(child for child, q in known.items() if q.spec.parent == name)

    def namespace_labels(self, namespace: str) -> Mapping[str, str] | None:
        found = self.state.namespace_labels(namespace)
        return found if found is not None else self._namespaces.get(namespace)

    def pod_group(self, namespace: str, name: str) -> PodGroup | None:
        return self.state.pod_group(f"{namespace}/{name}")

    def pod_group_phase(self, namespace: str, name: str) -> PodGroupPhase | None:
        return self.state.pod_group_phase(namespace, name)

    # ClusterState indexes PodGroups by namespace and by queue: a lookup reads only
    # the groups it is about, whatever the size of the cluster.
    def pod_groups(self, namespace: str) -> list[PodGroup]:
        return self.state.pod_groups_in_namespace(namespace)

    def pod_groups_in_queue(self, queue: str) -> list[str]:
        return self.state.pod_groups_in_queue(queue)

    def quotas(self, namespace: str) -> list[Quota]:
        return [
            quota_of(raw)
            for raw in self.state.list("ResourceQuota")
            if (raw["metadata"].get("namespace") or "default") == namespace
        ]

    def group_jobs(self, namespace: str, group: str) -> Sequence[Mapping[str, Any]]:
        return self._group_jobs(namespace, group)

    def scheduler_names(self) -> frozenset[str]:
        return self.state.scheduler_names


def quota_of(raw: Mapping[str, Any]) -> Quota:
    """A ResourceQuota object as admission reads it (``raw`` was parsed by the state, so
    its name and spec.hard are sound). Scopes of another shape than the API server's
    stand for a scope kbatch cannot decide: such a quota is not applied."""
    meta, spec = raw["metadata"], raw.get("spec") or {}
    scopes = spec.get("scopes") or []
    selector = spec.get("scopeSelector") or {}
    expressions = selector.get("matchExpressions") or [] if isinstance(selector, Mapping) else 0
    return Quota(
        str(meta.get("namespace") or "default"),
        str(meta["name"]),
        fields.mapping(raw, "spec.hard"),
        tuple(str(scope) for scope in scopes) if isinstance(scopes, list) else (_UNREAD,),
        tuple(e if isinstance(e, Mapping) else {"scopeName": _UNREAD} for e in expressions)
        if isinstance(expressions, list)
        else ({"scopeName": _UNREAD},),
    )


_UNREAD = "(unreadable)"
