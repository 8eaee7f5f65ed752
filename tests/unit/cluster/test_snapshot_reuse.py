"""What the snapshot builder keeps from build to build (templates, a group's parts, the
nodes' allocatable, the pods' tasks, and what it works out as pods and groups arrive)
changes no snapshot: over a run of changes to pods, groups, nodes, classes and resource
names, each snapshot of a state that keeps its builder is, field by field, that of a
state given a new builder every time, even when sessions ran on (and changed) the
snapshots before."""

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import pytest

from kbatch.api.podgroup import PodGroupPhase
from kbatch.bench.scheduling import FULL_ACTIONS
from kbatch.cluster.snapshot import SnapshotBuilder
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.info import (
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.interface import Outcome, Snapshot
from kbatch.operators.scheduler.core.framework.nodes import NodeSet
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts


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
    # groups without pods (their jobs are handed from snapshot to snapshot while so)
    applying(group("w", priorityClassName="high", minResources={"cpu": "1"}), group("v")),
    applying({**group("v"), "status": {"phase": "Inqueue"}}),  # its status written
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
    deleting("PriorityClass", "high", namespace=""),  # w's priority with it
    applying(pod("w-0", "w")),  # a pod for a group that had none
    applying(pod("t-1", "t", spec={"nodeName": "a"}, status=RUNNING)),
    deleting("PodGroup", "t"),  # its running pod's task belongs to no job now
    applying(pod("g-2", "g", spec={"nodeName": "c"}, status=RUNNING)),  # a node of its own
    applying(pod("g-2", "g", spec={"nodeName": "c"}, status={**RUNNING, "startTime": None})),
    applying(  # a resource name new to the cluster: every template is made again
        {**node("d"), "status": {"allocatable": {"cpu": "8", "example.com/fpga": "2"}}},
        pod("h-3", "h", status={"phase": "Pending", "nominatedNodeName": "d"}),
    ),
    applying(group("t"), group("h", minResources={"cpu": "1", "example.com/dsp": "1"})),
]


class Ignoring:
    """A cluster that lends a session its snapshot and drops what the session decides."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap

    def snapshot(self) -> Snapshot:
        return self.snap

    def apply(self, outcome: Outcome) -> None:
        pass


def scribbled(snap: Snapshot, turn: int = 0) -> None:
    """Change every part of ``snap`` a session could change in place (a later snapshot
    that shared any of them would show it), saying so of each job as a session does. Of the tasks' fields a session changes, in
    turn (from ``turn``): the status, the node, the nominated node, all three, or none
    (each is compared on its own when a task is handed out again, and a task no session
    changed is handed out again)."""
    tasks = [task for job in snap.jobs.values() for task in job.tasks.values()]
    tasks += [task for info in snap.nodes.infos for task in info.tasks.values()]
    for task in {id(task): task for task in tasks}.values():  # ours and others' pods
        turn += 1
        if turn % 5 in (0, 3):
            task.status = TaskStatus.PENDING if task.status else TaskStatus.FAILED
        if turn % 5 in (1, 3):
            task.node = 0 if task.node != 0 else 1
        if turn % 5 in (2, 3):
            task.nominated = 0 if task.nominated != 0 else 1
    for job in snap.jobs.values():
        if not job.tasks:  # all a session changes of a job without tasks (see below)
            job.phase = PodGroupPhase.RUNNING
            job.changed()  # as a session that moves a phase says
            continue
        job.touch()  # as a session that changes a task says
        for value in (job.allocated, job.total_request, job.min_resources):
            if value is not None:
                value.fill(-7.0)
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
    return {
        field.name: _plain(getattr(snap, field.name))
        for field in dataclasses.fields(snap)
        if field.name not in PROVENANCE
    }


# Where a snapshot comes from, not what it shows (a new builder's has no past).
PROVENANCE = ("delta",)


def _plain(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.tolist())
    if isinstance(value, NodeSet):  # (static_version: a token of its maker's, not a value)
        return {k: _plain(item) for k, item in vars(value).items() if k != "static_version"}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        # compare=False: not what the value is (JobInfo.kept_status, a session's memo)
        names = [field.name for field in dataclasses.fields(value) if field.compare]
        return (type(value).__name__, {name: _plain(getattr(value, name)) for name in names})
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, frozenset | set):
        return sorted(value)
    return value


def compared_snapshots(
    steps: Iterable[Step], leave_out_settled: bool = False, shortcuts: Shortcuts = ALL
) -> Iterator[Snapshot]:
    """Each step applied to a state that keeps its builder and to one given a new builder
    for every snapshot; after each, the kept state's snapshot, once it is checked field
    by field against the other's (the caller may then run a session on it, or change
    it); at the end, one more snapshot of each, compared. ``leave_out_settled``: the
    states' (the simulator's leave out settled jobs); ``shortcuts``: the kept state's."""
    kept = ClusterState(leave_out_settled=leave_out_settled, shortcuts=shortcuts)
    fresh = ClusterState(leave_out_settled=leave_out_settled)
    for step in [*steps, lambda state: None]:
        step(kept)
        step(fresh)
        fresh._builder = SnapshotBuilder()
        snap = kept.snapshot()
        assert described(snap) == described(fresh.snapshot())
        yield snap


@pytest.mark.parametrize("turn", range(5))
def test_a_kept_builder_builds_what_a_new_one_builds(turn: int) -> None:
    for snap in compared_snapshots(STEPS):
        runner.Scheduler(Ignoring(snap), runner.default_conf(), lambda: 0.0, lambda: "s").run_once()
        scribbled(snap, turn)


def test_a_session_changes_nothing_of_a_job_without_tasks_but_its_phase() -> None:
    """What the builder's handing on of such jobs rests on (``group_parts``): sessions
    under every action, on every step's snapshot."""
    conf = runner.default_conf().model_copy(update={"actions": FULL_ACTIONS})
    state = ClusterState()
    for step in STEPS:
        step(state)
        snap = state.snapshot()
        without_tasks = {key: job for key, job in snap.jobs.items() if not job.tasks}
        before = {key: _plain(job) for key, job in without_tasks.items()}
        runner.Scheduler(Ignoring(snap), conf, lambda: 0.0, lambda: "s").run_once()
        for key, job in without_tasks.items():
            job.phase = before[key][1]["phase"]  # the one field it may change
            assert _plain(job) == before[key], key


def test_the_comparison_sees_a_changed_field() -> None:
    state = ClusterState()
    for step in STEPS[:3]:
        step(state)
    snap = state.snapshot()
    before = described(snap)
    next(iter(next(iter(snap.jobs.values())).tasks.values())).created += 1
    assert described(snap) != before


def test_what_is_kept_is_handed_out_for_the_record_it_was_made_from_only() -> None:
    """A builder given records it did not see arrive (a task, a node's row)."""
    state = ClusterState()
    for step in STEPS[:2]:
        step(state)
    builder = SnapshotBuilder()
    names, nodes, classes, ours = state._snapshot_inputs()
    pods = list(state._parsed["Pod"].values())
    builder.build(nodes, pods, state.pod_groups(), state.queues(), classes, ours, names)
    pods = [dataclasses.replace(record, started=record.created + 5.0) for record in pods]
    nodes = [dataclasses.replace(record, allocatable={"cpu": 3000.0}) for record in nodes]
    snap = builder.build(nodes, pods, state.pod_groups(), state.queues(), classes, ours, names)
    started = {t.name: t.started for job in snap.jobs.values() for t in job.tasks.values()}
    assert started == {record.name: record.created + 5.0 for record in pods}
    assert snap.nodes.allocatable[:, snap.dims.index["cpu"]].tolist() == [3000.0] * len(nodes)


def test_tasks_made_as_pods_arrive_are_the_snapshots() -> None:
    state = ClusterState()
    for step in STEPS[:3]:
        step(state)
    keeper = state._builder.objects.tasks
    made = {record.uid: keeper.task_of(record) for record in state._parsed["Pod"].values()}
    snap = state.snapshot()
    tasks = [task for job in snap.jobs.values() for task in job.tasks.values()]
    assert tasks and all(made[task.uid] is task for task in tasks)


def test_two_builders_of_the_same_records_never_share_a_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tasks are kept on the pod records (``KeptTasks``), as the first builder's that kept
    one there: a second builder over the same records (a test's fresh one, beside the
    state's) makes its own, so a session on one snapshot never changes the other's, and
    the first one goes on handing out its own through its pass."""
    state = ClusterState(shortcuts=Shortcuts().without("unchanged_jobs"))  # every task by the pass
    for step in STEPS[:3]:
        step(state)
    ours = state.snapshot()
    names, nodes, classes, scheduler_names = state._snapshot_inputs()
    pods = list(state._parsed["Pod"].values())
    for _ in range(2):
        other = SnapshotBuilder().build(
            nodes, pods, state.pod_groups(), state.queues(), classes, scheduler_names, names
        )
    mine = {id(task) for job in ours.jobs.values() for task in job.tasks.values()}
    theirs = [task for job in other.jobs.values() for task in job.tasks.values()]
    assert mine and theirs and not any(id(task) in mine for task in theirs)
    again = state.snapshot()
    assert {id(task) for job in again.jobs.values() for task in job.tasks.values()} == mine


@pytest.mark.parametrize("leave_out_settled", [False, True])
def test_a_snapshot_that_fails_leaves_the_next_as_a_new_builder_makes_it(
    leave_out_settled: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What changed since the last snapshot is taken for the next: should that one fail,
    the snapshot after it still shows every change since the last one made."""
    kept = ClusterState(leave_out_settled=leave_out_settled)
    fresh = ClusterState(leave_out_settled=leave_out_settled)
    for step in STEPS[:3]:
        for state in (kept, fresh):
            step(state)
        kept.snapshot()
    build = SnapshotBuilder.build
    for step in STEPS[3:6]:
        for state in (kept, fresh):
            step(state)
        with monkeypatch.context() as failing:
            failing.setattr(SnapshotBuilder, "build", lambda *args, **kwargs: 1 / 0)
            with pytest.raises(ZeroDivisionError):
                kept.snapshot()
        assert SnapshotBuilder.build is build
        fresh._builder = SnapshotBuilder()
        assert described(kept.snapshot()) == described(fresh.snapshot())
