"""What the snapshot builder keeps from build to build (templates, a group's parts, the
nodes' allocatable) changes no snapshot: over a run of changes to pods, groups, nodes and
classes, each snapshot of a state that keeps its builder is, field by field, that of a
state given a new builder every time, even when sessions ran on (and changed) the
snapshots before."""

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from kbatch.cluster.snapshot import SnapshotBuilder
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.info import (
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.interface import Outcome, Snapshot
from kbatch.operators.scheduler.core.framework.nodes import NodeSet


def node(name: str, cpu: str = "8", **labels: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
    }


def group(name: str, **spec: Any) -> dict[str, Any]:
    annotations = spec.pop("annotations", {})
    return {
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns", "annotations": annotations,
                     "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"minMember": 2, "queue": "default", **spec},
    }  # fmt: skip


def pod(name: str, of: str | None, cpu: str = "1", **extra: Any) -> dict[str, Any]:
    annotations = {"scheduling.k8s.io/group-name": of} if of else {}
    annotations.update(extra.pop("annotations", {}))
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                     "annotations": annotations},
        "spec": {"schedulerName": "kbatch", **extra.pop("spec", {}),
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        **extra,
    }  # fmt: skip


RUNNING = {"phase": "Running", "startTime": "2024-01-01T00:01:00Z"}
QUEUE = {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}}
HIGH = {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100}

Step = Callable[[ClusterState], None]


def applying(*objects: dict[str, Any]) -> Step:
    return lambda state: [state.apply(obj) for obj in objects] and None


def deleting(kind: str, name: str, namespace: str = "ns") -> Step:
    return lambda state: state.delete(kind, namespace, name)


STEPS: list[Step] = [
    applying(QUEUE, node("a"), node("b", zone="z1"), group("g"), pod("g-0", "g"), pod("g-1", "g")),
    applying(pod("g-0", "g", spec={"nodeName": "a"}, status=RUNNING)),  # bound, then running
    applying(
        group("h", minResources={"cpu": "2"}, annotations={"kbatch.io/lifetime": "1h"}),
        pod("h-0", "h", "2", annotations={"kbatch.io/task": "ps"}),
    ),
    applying(group("g", minMember=1, minTaskMember={"ps": 1})),  # the group changed
    applying(HIGH, pod("solo", None, spec={"priorityClassName": "high"})),
    applying(node("a", cpu="16")),  # a node changed
    applying(pod("h-1", "h", "500m", status={"phase": "Pending", "nominatedNodeName": "b"})),
    deleting("Pod", "g-1"),
    applying(
        group("t", annotations={"kbatch.io/topology-preferred": "zone"}),
        pod("t-0", "t", "3", spec={"nodeName": "b"}, status=RUNNING),
    ),
    deleting("Node", "b", namespace=""),
    applying(pod("g-0", "g", spec={"nodeName": "a"}, status={"phase": "Succeeded"})),
    deleting("PodGroup", "h"),
    applying(node("c", cpu="4", gpu="x"), group("h"), pod("h-2", "h")),
    deleting("PriorityClass", "high", namespace=""),
]


class Ignoring:
    """A cluster that lends a session its snapshot and drops what the session decides."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def snapshot(self) -> Snapshot:
        return self.snap

    def apply(self, outcome: Outcome) -> None:
        pass


def scribbled(snap: Snapshot) -> None:
    """Change every part of ``snap`` a session could change in place (a later snapshot
    that shared any of them would show it)."""
    for job in snap.jobs.values():
        for value in (job.allocated, job.total_request, job.min_resources):
            if value is not None:
                value.fill(-7.0)
        for task in job.tasks.values():
            task.status, task.node, task.nominated = TaskStatus.FAILED, 0, 0
        job.tasks.clear()
        job.counts[:] = [99] * len(job.counts)
        job.priority = -1
    for name in ("allocatable", "used", "releasing", "pipelined", "nominated", "free"):
        getattr(snap.nodes, name).fill(-7.0)
    for info in snap.nodes.infos:
        info.tasks.clear()
        info.conditions.clear()


def described(snap: Snapshot) -> dict[str, Any]:
    """Everything ``snap`` says, as plain values (arrays as lists, templates as their
    fields), so that two snapshots compare field by field."""
    return {field.name: _plain(getattr(snap, field.name)) for field in dataclasses.fields(snap)}


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.tolist())
    if isinstance(value, NodeSet):
        return {name: _plain(item) for name, item in vars(value).items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        names = [field.name for field in dataclasses.fields(value)]
        return (type(value).__name__, {name: _plain(getattr(value, name)) for name in names})
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, frozenset | set):
        return sorted(value)
    return value


def test_a_kept_builder_builds_what_a_new_one_builds() -> None:
    kept, fresh = ClusterState(), ClusterState()
    for step in STEPS:
        step(kept)
        step(fresh)
        fresh._builder = SnapshotBuilder()
        snap = kept.snapshot()
        assert described(snap) == described(fresh.snapshot())
        runner.Scheduler(Ignoring(snap), runner.default_conf(), lambda: 0.0, lambda: "s").run_once()
        scribbled(snap)
    assert described(kept.snapshot()) == described(fresh.snapshot())


def test_the_comparison_sees_a_changed_field() -> None:
    state = ClusterState()
    for step in STEPS[:3]:
        step(state)
    snap = state.snapshot()
    before = described(snap)
    next(iter(next(iter(snap.jobs.values())).tasks.values())).created += 1
    assert described(snap) != before
