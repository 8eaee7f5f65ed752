"""Finished work leaves the simulated cluster; what the output says of it stays.

A simulated day runs hundreds of thousands of pods, and a cluster state that kept every
one it ever ran would grow with the run's history, not with what is alive. A job that
is over is of no more use to the scheduler: the state already leaves it out of every
snapshot once it has *settled* (``kbatch.cluster.reuse.settled``: none of its pods
unfinished, its PodGroup Completed, and a session saw it so and wrote nothing for it).
The simulator then deletes it from the state, as the API server would delete it (the
state's caches see it go as they see any deleted pod), and keeps only what the output
and the metrics read of it: per pod a ``PodRow``, per PodGroup a slim copy of the
object (its name, annotations, spec and status).

A pod owned by a Job that is not complete stays (the Job controller counts its
finished pods), and so does its whole unit. A departed PodGroup is not judged again
when a Queue comes or goes later (a settled one would be shown to one more session
then; its status is final anyway: Completed).

A run that keeps no history (``runner.Options.history`` False: ``kbatch bench
--trace``, which reads only its totals) keeps no rows either: what it holds then
follows what is alive, not what the run has done.
"""

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kbatch.cluster.pod_records import role_of
from kbatch.sim.pod_objects import PodKey, group_of, owning_jobs, pod_key

if TYPE_CHECKING:
    from kbatch.sim.backend import SimBackend

Object = dict[str, Any]
GroupKey = tuple[str, str]  # namespace, name


@dataclass(frozen=True, slots=True)
class PodRow:
    """What the output and the metrics read of a pod that is no longer in the state."""

    namespace: str
    name: str
    node: str | None
    phase: str
    group: str | None
    role: str
    evictions: int


def pod_row(pod: Object, evictions: int, node: str | None) -> PodRow:
    namespace, name = pod_key(pod)
    annotations = pod["metadata"].get("annotations") or {}
    return PodRow(
        namespace,
        name,
        node,
        (pod.get("status") or {}).get("phase") or "Pending",
        group_of(pod),
        role_of(annotations),
        evictions,
    )


def slim_group(group: Object) -> Object:
    """The parts of a PodGroup object the output reads (``output.pod_group_row``, the
    topology request's annotations, the metrics' queue), and its owner."""
    metadata = group["metadata"]
    kept = {"namespace": metadata["namespace"], "name": metadata["name"]}
    for key in ("annotations", "ownerReferences"):
        if metadata.get(key):
            kept[key] = metadata[key]
    return {"metadata": kept, "spec": group.get("spec") or {}, "status": group.get("status") or {}}


@dataclass(slots=True)
class Departed:
    """The pods and PodGroups gone from the state, as the output needs them: pods
    deleted during the run (``removed``: evicted or deleted by their Job, shown with
    no node) and finished work let go (``pods``, ``groups``)."""

    removed: dict[PodKey, PodRow] = field(default_factory=dict)
    pods: dict[PodKey, PodRow] = field(default_factory=dict)
    groups: dict[GroupKey, Object] = field(default_factory=dict)
    history: bool = True  # False: no rows are kept

    def keep_removed(self, key: PodKey, make: Callable[[], PodRow]) -> None:
        if self.history:
            self.removed[key] = make()

    def keep_pod(self, key: PodKey, make: Callable[[], PodRow]) -> None:
        if self.history:
            self.pods[key] = make()

    def keep_group(self, key: GroupKey, group: Object) -> None:
        if self.history:
            self.groups[key] = slim_group(group)

    def forget_pod(self, key: PodKey) -> None:
        """A pod of this name is made again: the new one is the one to show."""
        self.removed.pop(key, None)
        self.pods.pop(key, None)

    def forget_group(self, key: GroupKey) -> None:
        self.groups.pop(key, None)

    def pod_rows(self) -> Iterator[PodRow]:
        yield from self.pods.values()
        yield from self.removed.values()


def all_pod_rows(cluster: "SimBackend") -> list[PodRow]:
    """Every pod of the run: those in the state, then those gone from it."""
    live = []
    for pod in cluster.state.list("Pod"):
        times = cluster.pods.get(pod_key(pod))
        node = (pod.get("spec") or {}).get("nodeName") or None
        live.append(pod_row(pod, times.evictions if times is not None else 0, node))
    return [*live, *cluster.departed.pod_rows()]


def all_groups(cluster: "SimBackend") -> list[Object]:
    """Every PodGroup of the run: those in the state, then the slim copies of those gone."""
    return [*cluster.state.list("PodGroup"), *cluster.departed.groups.values()]


def let_go_settled(cluster: "SimBackend", may_go: Callable[[Object], bool]) -> set[str]:
    """Delete from the state the units it settled since the last call, each whole or
    not at all (not when ``may_go`` refuses one of its pods), keeping their rows; the
    uids of the Jobs that owned the pods let go."""
    state = cluster.state
    owners: set[str] = set()
    for unit, pod_keys, has_group in state.take_settled():
        pods = [state.get("Pod", *key.split("/", 1)) for key in pod_keys]
        if not all(pod is not None and may_go(pod) for pod in pods):
            continue
        for pod in pods:
            assert pod is not None
            _let_go_pod(cluster, pod)
            owners.update(owning_jobs(pod))
        if has_group:
            namespace, name = unit.split("/", 1)
            group = state.get("PodGroup", namespace, name)
            if group is not None:
                cluster.departed.keep_group((namespace, name), group)
                state.delete("PodGroup", namespace, name)
                cluster.forget_object("PodGroup", namespace, name)
    return owners


def _let_go_pod(cluster: "SimBackend", pod: Object) -> None:
    key = pod_key(pod)
    times = cluster.pods.pop(key, None)
    node = (pod.get("spec") or {}).get("nodeName") or None
    evictions = times.evictions if times else 0
    cluster.departed.keep_pod(key, lambda: pod_row(pod, evictions, node))
    cluster.state.delete("Pod", *key)
    cluster.forget_object("Pod", *key)
    group = group_of(pod)
    if group is not None:
        members = cluster.group_pods.get((key[0], group))
        if members is not None:
            members.discard(key[1])
            if not members:
                del cluster.group_pods[key[0], group]
