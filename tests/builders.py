"""Small chained builders for hand-built sessions: objects in, a Session out.

    cluster = Cluster().node("n1", cpu=4).queue("q1", weight=2)
    cluster.job("j1", queue="q1", min_member=2).tasks(2, cpu=1)
    session = cluster.open()           # default tiers; or .open(CONF_TEXT)

Amounts: cpu in cores, memory in GiB (converted to the core's millicores and bytes).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from kbatch.api.podgroup import PodGroupPhase, PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.config import SchedulerConf
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.info import (
    NO_NODE,
    JobDeadline,
    JobInfo,
    QueueInfo,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.interface import ObjectRef, Outcome, Snapshot
from kbatch.operators.scheduler.core.framework.kept import KeptAcrossSessions
from kbatch.operators.scheduler.core.framework.nodes import NodeInfo, NodeSet
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    HostPort,
    PodTemplate,
    SpreadConstraint,
    Taint,
    Toleration,
)
from kbatch.operators.scheduler.core.framework.resources import Dims
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

GiB = 2**30
DIMS = Dims.of(["cpu", "memory", "pods", "nvidia.com/gpu"])


def vec(cpu: float = 0, memory: float = 0, pods: float = 0, gpu: float = 0) -> np.ndarray:
    return DIMS.vector(
        {"cpu": cpu * 1000, "memory": memory * GiB, "pods": pods, "nvidia.com/gpu": gpu}
    )


@dataclass
class FakeCluster:
    """Records what a session decided: the outcome it built (also before it is closed)."""

    snap: Snapshot | None = None
    outcome: Outcome = field(default_factory=Outcome)

    def apply(self, outcome: Outcome) -> None:
        self.outcome = outcome

    def snapshot(self) -> Snapshot:
        assert self.snap is not None
        return self.snap

    @property
    def binds(self) -> list[tuple[str, str]]:
        return [(b.task.name, b.node) for b in self.outcome.binds]

    @property
    def evictions(self) -> list[tuple[str, str]]:
        return [(e.task.name, e.reason) for e in self.outcome.evictions]

    @property
    def nominations(self) -> dict[str, str | None]:  # pod name -> node, the last word
        return {n.task.name: n.node for n in self.outcome.nominations}

    @property
    def pod_groups(self) -> dict[str, PodGroupStatus]:
        return {f"{u.namespace}/{u.name}": u.status for u in self.outcome.pod_groups}

    @property
    def queues(self) -> dict[str, QueueStatus]:
        return {u.name: u.status for u in self.outcome.queues}

    @property
    def recorded(self) -> list[tuple[ObjectRef, str, str, str]]:
        return [(e.ref, e.type, e.reason, e.message) for e in self.outcome.events]


class JobBuilder:
    def __init__(self, cluster: Cluster, job: JobInfo) -> None:
        self.cluster = cluster
        self.job = job

    def tasks(
        self,
        count: int,
        cpu: float = 1,
        memory: float = 1,
        gpu: float = 0,
        status: TaskStatus = TaskStatus.PENDING,
        node: str | None = None,
        priority: int | None = None,
        nominated: str | None = None,
        **spec: object,
    ) -> JobBuilder:
        """``nominated``: a node that keeps room for these pending tasks (they evicted
        others there)."""
        template = self.cluster.template(
            cpu=cpu, memory=memory, gpu=gpu, namespace=self.job.namespace, **spec
        )
        for _ in range(count):
            task = self.task(template, status=status, node=node, priority=priority)
            if nominated is not None:
                self.cluster.nominated.append((task, nominated))
        return self

    def task(
        self,
        template: PodTemplate,
        status: TaskStatus = TaskStatus.PENDING,
        node: str | None = None,
        priority: int | None = None,
        name: str | None = None,
    ) -> TaskInfo:
        n = len(self.job.tasks)
        task = TaskInfo(
            uid=f"{self.job.uid}-{n:04d}",
            namespace=self.job.namespace,
            name=name or f"{self.job.name}-{n}",
            job=self.job.uid,
            template=template,
            status=status,
            priority=self.job.priority if priority is None else priority,
            created=self.job.created,
        )
        self.cluster.pending_tasks.append((task, node))
        self.job.add_task(task)
        return task


class Cluster:
    def __init__(self) -> None:
        self.nodes: list[tuple[NodeInfo, np.ndarray]] = []
        self.queues: dict[str, QueueInfo] = {"default": QueueInfo("default", 1, created=0.0)}
        self.jobs: dict[str, JobInfo] = {}
        self.pending_tasks: list[tuple[TaskInfo, str | None]] = []
        self.foreign: list[tuple[TaskInfo, str]] = []
        self.nominated: list[tuple[TaskInfo, str]] = []  # pending tasks and their kept node
        self.job_deadlines: dict[str, JobDeadline] = {}  # batch/v1 Jobs' (TaskInfo.owner_job)
        self.namespace_labels: dict[str, dict[str, str]] = {}  # Namespaces' labels, by name
        self.node_images: dict[str, dict[str, int]] = {}  # images each node lists (bytes)
        self._clock = itertools.count(1)

    def node(
        self,
        name: str,
        cpu: float = 4,
        memory: float = 16,
        pods: int = 110,
        gpu: float = 0,
        labels: dict[str, str] | None = None,
        taints: tuple[Taint, ...] = (),
        unschedulable: bool = False,
        conditions: dict[str, str] | None = None,
    ) -> Cluster:
        info = NodeInfo(
            name=name,
            labels={"kubernetes.io/hostname": name, **(labels or {})},
            taints=taints,
            unschedulable=unschedulable,
            conditions={"Ready": "True"} if conditions is None else conditions,
        )
        self.nodes.append((info, vec(cpu, memory, pods, gpu)))
        return self

    def queue(
        self,
        name: str,
        weight: int = 1,
        capability: np.ndarray | None = None,
        reclaimable: bool = True,
        open: bool = True,
    ) -> Cluster:
        self.queues[name] = QueueInfo(
            name,
            weight,
            created=float(next(self._clock)),
            capability=capability,
            reclaimable=reclaimable,
            open=open,
        )
        return self

    def template(
        self,
        cpu: float = 1,
        memory: float = 1,
        gpu: float = 0,
        namespace: str = "default",
        labels: dict[str, str] | None = None,
        node_selector: dict[str, str] | None = None,
        affinity: Affinity | None = None,
        tolerations: tuple[Toleration, ...] = (),
        host_ports: tuple[HostPort, ...] = (),
        priority_class_name: str = "",
        spread: tuple[SpreadConstraint, ...] = (),
        images: tuple[str, ...] = (),
    ) -> PodTemplate:
        request = vec(cpu, memory, 1, gpu)
        return PodTemplate(
            namespace=namespace,
            labels=labels or {},
            request=request,
            best_effort=not np.any(np.delete(request, DIMS.index["pods"])),
            node_selector=tuple(sorted((node_selector or {}).items())),
            affinity=affinity or Affinity(),
            tolerations=tolerations,
            host_ports=host_ports,
            priority_class_name=priority_class_name,
            spread=spread,
            images=images,
        )

    def job(
        self,
        name: str,
        queue: str = "default",
        min_member: int = 1,
        priority: int = 0,
        namespace: str = "default",
        phase: PodGroupPhase = PodGroupPhase.INQUEUE,
        min_resources: np.ndarray | None = None,
        created: float | None = None,
    ) -> JobBuilder:
        job = JobInfo(
            uid=f"{namespace}/{name}",
            namespace=namespace,
            name=name,
            queue=queue,
            min_member=min_member,
            created=float(next(self._clock)) if created is None else created,
            dims_len=len(DIMS),
            priority=priority,
            phase=phase,
            min_resources=min_resources,
        )
        self.jobs[job.uid] = job
        return JobBuilder(self, job)

    def pod(
        self, name: str, node: str, cpu: float = 1, memory: float = 1, **spec: object
    ) -> Cluster:
        """A running pod that is not ours (another scheduler's): it only takes room."""
        template = self.template(cpu=cpu, memory=memory, **spec)  # type: ignore[arg-type]
        task = TaskInfo(
            uid=f"foreign-{name}",
            namespace="default",
            name=name,
            job="",
            template=template,
            status=TaskStatus.RUNNING,
        )
        self.foreign.append((task, node))
        return self

    def snapshot(self) -> Snapshot:
        infos = [info for info, _ in self.nodes]
        for info in infos:  # (what a snapshot places, not what a session left there)
            info.tasks.clear()
        allocatable = (
            np.array([a for _, a in self.nodes]) if self.nodes else np.zeros((0, len(DIMS)))
        )
        nodes = NodeSet(infos, allocatable)
        for task, node in self.pending_tasks + self.foreign:
            if node is not None:
                task.node = nodes.index[node]
                nodes.place(task, task.node)
            else:
                task.node = NO_NODE
        for task, node in self.nominated:
            task.nominated = nodes.index[node]
            nodes.reserve(task, 1.0)
        return Snapshot(
            dims=DIMS,
            nodes=nodes,
            jobs=self.jobs,
            queues=self.queues,
            job_deadlines=dict(self.job_deadlines),
            namespace_labels=dict(self.namespace_labels),
            node_images=dict(self.node_images),
        )

    def open(
        self,
        conf: str | SchedulerConf | None = None,
        now: float = 100.0,
        shortcuts: Shortcuts = ALL,
        kept: KeptAcrossSessions | None = None,
    ) -> Session:
        """Open a session on this cluster (plugins registered, jobs validated), taking
        ``shortcuts``; ``kept``: what sessions before it kept for it (a scheduler's)."""
        if conf is None:
            parsed = runner.default_conf()
        elif isinstance(conf, str):
            parsed = runner.load_conf(conf)
        else:
            parsed = conf
        return runner.open_session(
            self.snapshot(), parsed, now=now, uid="session-1", shortcuts=shortcuts, kept=kept
        )


def fake(session: Session) -> FakeCluster:
    """What ``session`` decided so far, as a cluster would have been told it."""
    return FakeCluster(outcome=session.outcome)


def run_actions(session: Session, *names: str) -> FakeCluster:
    """Run actions on an open session and close it; return what reached the cluster."""
    from kbatch.operators.scheduler.core.actions import REGISTRY

    for name in names or session.conf.actions:
        REGISTRY[name].execute(session)
    return FakeCluster(outcome=runner.close_session(session))


# ---------------------------------------------------------------- predicate / score helpers
def plugin_conf(*plugins: str, arguments: dict[str, object] | None = None) -> str:
    """A scheduler conf of one tier with ``plugins``; ``arguments`` go to the first."""
    import yaml

    entries: list[dict[str, object]] = [{"name": name} for name in plugins]
    if arguments is not None:
        entries[0]["arguments"] = arguments
    return yaml.safe_dump({"actions": "allocate", "tiers": [{"plugins": entries}]})


def failing_nodes(session: Session, task: TaskInfo) -> dict[str, list[str]]:
    """reason -> names of the nodes failing with it, over all nodes (through the tiers)."""
    _, failures = session.predicate(task, session.nodes.all)
    return {
        reason: [session.nodes.names[i] for i in np.flatnonzero(failed)]
        for reason, failed in failures
    }


def passing_nodes(session: Session, task: TaskInfo) -> list[str]:
    ok, _ = session.predicate(task, session.nodes.all)
    return [session.nodes.names[i] for i in np.flatnonzero(ok)]


def scores_by_node(session: Session, task: TaskInfo) -> dict[str, float]:
    scores = session.node_scores(task, session.nodes.all)
    return {name: float(score) for name, score in zip(session.nodes.names, scores, strict=True)}


def assert_node_by_node(session: Session, task: TaskInfo) -> None:
    """Asking about one node at a time, or the nodes in another order, answers the same as
    asking about all nodes at once (the allocate action's cache relies on it)."""
    everything = session.nodes.all
    ok, failures = session.predicate(task, everything)
    scores = session.node_scores(task, everything)
    for i in everything.tolist():
        one = np.array([i])
        one_ok, one_failures = session.predicate(task, one)
        assert all(failed.any() for _, failed in one_failures), "an entry without failures"
        assert bool(one_ok[0]) == bool(ok[i]), session.nodes.names[i]
        assert sorted(r for r, failed in one_failures if failed[0]) == sorted(
            r for r, failed in failures if failed[i]
        ), session.nodes.names[i]
        assert np.isclose(session.node_scores(task, one)[0], scores[i]), session.nodes.names[i]
    backwards = everything[::-1]
    back_ok, _ = session.predicate(task, backwards)
    assert np.array_equal(back_ok, ok[backwards])
    assert np.allclose(session.node_scores(task, backwards), scores[backwards])


def cyclic_garbage_types() -> set[str]:
    """The type names of what only the cyclic collector would free now: a full pass
    whose findings are looked at, then let go."""
    import gc

    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return {type(obj).__name__ for obj in gc.garbage}
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
