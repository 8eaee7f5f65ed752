"""The placement fast path (heap of best nodes, look-ahead, plans for runs of alike tasks)
chooses exactly what the straightforward computation chooses: for every task, all
nodes asked afresh and the argmax taken (ties to the first by name).

Random small clusters — varied node sizes, labels, taints, cordoned nodes, room being
released (pipelining), several templates per job (selectors, tolerations, preferred
node affinity, pod affinity, host ports, best-effort), queues with capabilities — run
through allocate and backfill twice, once with each placer; the binds, the final task
statuses and nodes, and the PodGroup statuses must be the same. The heap is made tiny in
some runs, so that it is filled again many times per session.

The same clusters with racks and gangs asking for a topology domain (required or
preferred, at the zone, rack or node level) check the fast path among a domain's nodes
(``within=``) against the argmax over those nodes, as topology placement had it.
"""

import random

import numpy as np
import pytest
import yaml

from builders import Cluster, FakeCluster, run_actions, vec
from kbatch.operators.scheduler.core.actions import allocate, backfill
from kbatch.operators.scheduler.core.framework import ranking
from kbatch.operators.scheduler.core.framework.info import (
    NO_NODE,
    PREFERRED,
    REQUIRED,
    TaskInfo,
    TaskStatus,
    TopologyRequest,
)
from kbatch.operators.scheduler.core.framework.placement import Choice, Placer
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    HostPort,
    LabelSelector,
    NodeSelectorTerm,
    Operator,
    PodAffinityTerm,
    PreferredNodeTerm,
    Requirement,
    Taint,
    Toleration,
)
from kbatch.operators.scheduler.core.framework.resources import EPSILON
from kbatch.operators.scheduler.core.framework.session import Session

SEEDS = range(100)
HEAP_SIZES = (1, 2, 4, 512)  # tiny heaps are filled again and again; a big one plans far


def _heap_sizes(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The most a heap holds, by seed; and half the seeds hold twice the tasks to place
    (``ranking.heap_size``) down to one, not at least 16 (more than these clusters' nodes)."""
    monkeypatch.setattr(ranking, "HEAP_SIZE", HEAP_SIZES[seed % len(HEAP_SIZES)])
    monkeypatch.setattr(ranking, "SMALLEST_HEAP", 1 if seed % 2 else 16)


ZONES = ("a", "b", "c")
RACKS = ("r0", "r1", "r2", "r3")
LEVELS = ("zone", "rack", "kubernetes.io/hostname")


class Straightforward(Placer):
    """Every answer worked out afresh over all nodes, and the argmax taken."""

    def _answers(self, task: TaskInfo) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        session, nodes = self.session, self.nodes
        ok, _ = session.predicate(task, nodes.all)
        scores = session.node_scores(task, nodes.all) if self.score else np.zeros(len(nodes))
        need = task.request[session.room_dims] - EPSILON
        fit_idle = np.all(nodes.free[:, session.room_dims] >= need, axis=1)
        fit_future = np.all(nodes.future[:, session.room_dims] >= need, axis=1)
        return ok, scores, fit_idle, fit_future

    def choose_alike(
        self,
        tasks: list[TaskInfo],
        allow_pipeline: bool = True,
        within: np.ndarray | None = None,
        more_alike: bool = False,
    ) -> list[Choice]:
        if not len(self.nodes) or not tasks:
            return []
        if within is not None:
            return self._choose_within(tasks[0], within, allow_pipeline)
        ok, scores, fit_idle, fit_future = self._answers(tasks[0])
        ranked = np.where(ok & fit_idle, scores, -np.inf)
        best = int(np.argmax(ranked))
        if ranked[best] > -np.inf:
            return [Choice(best, pipelined=False)]
        later = ok & fit_future
        if allow_pipeline and later.any():
            return [Choice(int(np.argmax(np.where(later, scores, -np.inf))), pipelined=True)]
        return []

    def _choose_within(
        self, task: TaskInfo, within: np.ndarray, allow_pipeline: bool
    ) -> list[Choice]:
        """Topology placement as it was before it had a fast path: the argmax over the
        domain's nodes (a NaN rank wins, as np.argmax has it), else pipelined there."""
        ok, scores, fit_idle, fit_future = (answer[within] for answer in self._answers(task))
        ranked = np.where(ok & fit_idle, scores, -np.inf)
        if ranked.size and (np.isnan(ranked).any() or ranked.max() > -np.inf):
            return [Choice(int(within[int(np.argmax(ranked))]), pipelined=False)]
        later = ok & fit_future
        if allow_pipeline and later.any():
            best = int(np.argmax(np.where(later, scores, -np.inf)))
            return [Choice(int(within[best]), pipelined=True)]
        return []

    def first_fit(self, task: TaskInfo) -> int:
        ok, _, fit_idle, _ = self._answers(task)
        candidates = np.flatnonzero(ok & fit_idle)
        return int(candidates[0]) if candidates.size else NO_NODE


def random_cluster(seed: int, topology: bool = False) -> Cluster:
    """``topology``: nodes in racks too, and most gangs asking for a domain."""
    rng = random.Random(seed)
    cluster = Cluster()
    alike = rng.random() < 0.3  # identical nodes: ties everywhere, broken by name
    for i in range(rng.randint(2, 12)):
        taints: list[Taint] = []
        if rng.random() < 0.2 and not alike:
            taints.append(Taint("dedicated", "batch"))
        if rng.random() < 0.3 and not alike:
            taints.append(Taint("soft", effect="PreferNoSchedule"))
        cluster.node(
            f"n{i:02d}",
            cpu=8 if alike else rng.choice([2, 4, 8, 16]),
            memory=16 if alike else rng.choice([4, 8, 16, 32]),
            pods=110 if alike else rng.choice([3, 8, 110]),
            gpu=0 if alike else rng.choice([0, 0, 1, 2]),
            labels={
                "zone": "a" if alike else rng.choice(ZONES),
                **({"rack": rng.choice(RACKS)} if topology else {}),
            },
            taints=tuple(taints),
            unschedulable=rng.random() < 0.1 and not alike,
        )
    names = [info.name for info, _ in cluster.nodes]
    cluster.queue("q1", weight=rng.randint(1, 3))
    capability = vec(cpu=rng.choice([4, 8, 1000]), memory=1000, pods=1000, gpu=1000)
    cluster.queue("q2", weight=rng.randint(1, 3), capability=capability)
    _running(rng, cluster, names)
    earlier = [_template(rng, cluster)] if topology else []
    for j in range(rng.randint(2, 7)):
        templates = [_template(rng, cluster) for _ in range(rng.randint(1, 3))]
        if topology and rng.random() < 0.5:  # a template of an earlier job: its views too
            templates[0] = rng.choice(earlier)
        earlier += templates
        size = rng.randint(1, 10)
        job = cluster.job(
            f"job{j}",
            queue=rng.choice(["default", "q1", "q2"]),
            min_member=rng.randint(1, size),
            priority=rng.choice([0, 0, 10]),
        )
        mixed = rng.random() < 0.5  # else a gang of alike tasks
        for _ in range(size):
            job.task(rng.choice(templates) if mixed else templates[0])
        if topology and rng.random() < 0.8:
            mode = rng.choice([REQUIRED, PREFERRED])
            job.job.topology = TopologyRequest(mode, rng.choice(LEVELS))
    return cluster


def _running(rng: random.Random, cluster: Cluster, names: list[str]) -> None:
    """Pods already on the nodes: running, some of them leaving (room to pipeline into),
    now and then one with required anti-affinity (every template is then asked afresh)."""
    running = cluster.job("running", min_member=1)
    for _ in range(rng.randint(0, 2 * len(names))):
        status = rng.choice([TaskStatus.RUNNING, TaskStatus.RUNNING, TaskStatus.RELEASING])
        template = cluster.template(
            cpu=rng.choice([0.5, 1, 2]),
            memory=rng.choice([1, 2]),
            labels={"app": rng.choice(["web", "db"])},
            affinity=_anti_affinity() if rng.random() < 0.05 else None,
        )
        running.task(template, status=status, node=rng.choice(names))


def _anti_affinity() -> Affinity:
    term = PodAffinityTerm(LabelSelector((("app", "db"),)), "kubernetes.io/hostname")
    return Affinity(anti_required=(term,))


def _template(rng: random.Random, cluster: Cluster) -> object:
    best_effort = rng.random() < 0.1
    affinity = None
    if rng.random() < 0.3:
        zone = Requirement("zone", Operator.IN, (rng.choice(ZONES),))
        preferred = (PreferredNodeTerm(rng.randint(1, 10), NodeSelectorTerm((zone,))),)
        affinity = Affinity(node_preferred=preferred)
    elif rng.random() < 0.1:
        term = PodAffinityTerm(LabelSelector((("app", "web"),)), "zone")
        affinity = Affinity(pod_required=(term,))
    return cluster.template(
        cpu=0 if best_effort else rng.choice([0.5, 1, 1, 2, 3]),
        memory=0 if best_effort else rng.choice([0.5, 1, 2, 4]),
        gpu=0 if best_effort or rng.random() < 0.8 else 1,
        labels={"app": "web"},
        node_selector={"zone": rng.choice(ZONES)} if rng.random() < 0.2 else None,
        affinity=affinity,
        tolerations=(Toleration("dedicated", "Exists"),) if rng.random() < 0.3 else (),
        host_ports=(HostPort(8080),) if rng.random() < 0.1 else (),
    )


def conf(seed: int, topology: bool = False) -> str:
    """The default tiers, or binpack in place of nodeorder, or nodeorder's other weights;
    ``topology``: with the levels zone, rack, node."""
    plugins = ["drf", "predicates", "proportion"]
    kind = seed % 3
    last: dict[str, object] = {"name": "nodeorder"}
    if kind == 1:
        last = {"name": "binpack", "arguments": {"binpack.cpu": 2, "binpack.memory": 1}}
    elif kind == 2:
        last = {"name": "nodeorder", "arguments": {"mostrequested.weight": 2}}
    tiers = [
        {"plugins": [{"name": "priority"}, {"name": "gang"}, {"name": "conformance"}]},
        {"plugins": [{"name": name} for name in plugins] + [last]},
    ]
    document: dict[str, object] = {"actions": "allocate, backfill", "tiers": tiers}
    if topology:
        document["topology"] = {"levels": list(LEVELS)}
    return yaml.safe_dump(document)


def decided(
    seed: int, placer: type[Placer], monkeypatch: pytest.MonkeyPatch, topology: bool = False
) -> tuple:
    monkeypatch.setattr(allocate, "Placer", placer)
    monkeypatch.setattr(backfill, "Placer", placer)
    session = random_cluster(seed, topology).open(conf(seed, topology))
    sent = run_actions(session)
    return sent.binds, _placements(session), _statuses(sent)


def _placements(session: Session) -> list[tuple[str, str, int]]:
    return sorted(
        (task.name, task.status.name, task.node)
        for job in session.jobs.values()
        for task in job.tasks.values()
    )


def _statuses(sent: FakeCluster) -> dict[str, object]:
    return {key: (status.phase, status.running) for key, status in sent.pod_groups.items()}


@pytest.mark.parametrize("seed", SEEDS)
def test_the_fast_path_places_as_the_straightforward_one(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _heap_sizes(seed, monkeypatch)
    expected = decided(seed, Straightforward, monkeypatch)
    assert decided(seed, Placer, monkeypatch) == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_the_fast_path_places_in_a_domain_as_the_straightforward_one(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _heap_sizes(seed, monkeypatch)
    expected = decided(seed, Straightforward, monkeypatch, topology=True)
    assert decided(seed, Placer, monkeypatch, topology=True) == expected


def test_the_random_clusters_exercise_what_they_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    """Across the seeds: gangs of alike tasks placed, tasks pipelined, tasks unplaced."""
    seen: set[str] = set()
    for seed in SEEDS:
        binds, placements, _ = decided(seed, Placer, monkeypatch)
        statuses = {status for _, status, _ in placements}
        seen.update(statuses)
        if len(binds) >= 3:
            seen.add("three binds or more")
    assert {"PIPELINED", "PENDING", "BINDING", "three binds or more"} <= seen


def test_the_topology_clusters_exercise_the_domain_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Across the seeds: runs of alike tasks planned at once within a domain, tasks
    pipelined within one, and domains with no node for a task."""
    seen: set[str] = set()
    choose_alike = Placer.choose_alike

    def spy(
        placer: Placer,
        tasks: list[TaskInfo],
        allow_pipeline: bool = True,
        within: np.ndarray | None = None,
        more_alike: bool = False,
    ) -> list[Choice]:
        choices = choose_alike(placer, tasks, allow_pipeline, within, more_alike)
        if within is not None:
            seen.add("none" if not choices else f"{min(len(choices), 3)} at once")
            seen.update("pipelined" for choice in choices if choice.pipelined)
        return choices

    monkeypatch.setattr(Placer, "choose_alike", spy)
    for seed in SEEDS:
        decided(seed, Placer, monkeypatch, topology=True)
    assert {"none", "pipelined", "1 at once", "3 at once"} <= seen


def test_a_task_alone_is_looked_ahead_for_only_when_alike_ones_may_follow(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The look-ahead at a heap's fill is for the tasks after the first: a run of one
    task (a single-pod job, in allocate) goes without, its node asked about once placed
    if ever, and without a heap (the argmax); ``choose``, asked task by task, keeps
    both. Both choose the same node."""
    looked: list[int] = []
    add = ranking.Lookahead.add
    monkeypatch.setattr(
        ranking.Lookahead,
        "add",
        lambda self, nodes, idx: (looked.append(len(idx)), add(self, nodes, idx)),
    )
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=8).node("n3", cpu=2).queue("q")
    cluster.job("one", queue="q").tasks(1, cpu=1)
    cluster.job("two", queue="q", min_member=2).tasks(2, cpu=1)
    session = cluster.open()
    one, two = (list(session.jobs[f"default/{name}"].tasks.values()) for name in ("one", "two"))
    placer = Placer(session)
    alone = placer.choose_alike(one)
    assert looked == [] and placer._views[id(one[0].template)].ranking is None  # the argmax's
    assert Placer(session).choose(one[0]) == alone[0] and len(looked) == 1
    assert Placer(session).choose_alike(two) and len(looked) == 2  # a run of two
