"""proportion's queue sums kept from one session open to the next (``framework.job_sums``) are,
to the bit, those the long way adds up over every job (``proportion._add_jobs``), at
every step of random sequences of sessions: jobs kept, touched, replaced, removed and
added, phases moved, pods put in a job without tasks in place, queues coming and going,
dicts reordered, fractions of a millicore, and two schedulers' sessions interleaved."""

import random
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from builders import DIMS, Cluster
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework import job_sums
from kbatch.operators.scheduler.core.framework.delta import Delta
from kbatch.operators.scheduler.core.framework.info import (
    JobInfo,
    QueueInfo,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.kept import KeptAcrossSessions
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate
from kbatch.operators.scheduler.core.framework.resources import Dims, shareable
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.operators.scheduler.core.plugins import node_index, proportion
from unit.cluster.test_snapshot_reuse import Ignoring

QUEUES = ("default", "a", "b", "c")
PHASES = list(PodGroupPhase)
STATUSES = [TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.SUCCEEDED]
LONG_WAY = proportion._add_jobs


class World:
    """One scheduler's jobs, changed in place from one session to the next as snapshots
    and sessions change them."""

    def __init__(self, seed: int, fractions: bool = False, dims: Dims = DIMS) -> None:
        self.rng = random.Random(seed)
        self.fractions = fractions  # some requests a fraction of a millicore
        self.dims = dims
        self.queues = list(QUEUES)
        self.jobs: dict[str, JobInfo] = {}
        self.made = 0
        for _ in range(self.rng.randint(0, 30)):
            self.add()

    def vector(self, scale: float = 1.0) -> np.ndarray:
        """Whole millicores and bytes, now and then (``fractions``) not."""
        cpu = self.rng.choice([0.25, 0.5, 1, 2, 3]) * scale
        if self.fractions and self.rng.random() < 0.1:
            cpu += 0.0001  # a tenth of a millicore
        memory = self.rng.choice([0.5, 1, 3])
        return self.dims.vector({"cpu": cpu * 1000, "memory": memory * 2**30, "pods": 1})

    def job(self, uid: str) -> JobInfo:
        rng = self.rng
        job = JobInfo(
            uid, "ns", uid, rng.choice([*QUEUES, "gone"]), 1, 0.0, len(self.dims),
            phase=rng.choice(PHASES),
            min_resources=self.vector(4) if rng.random() < 0.6 else None,
        )  # fmt: skip
        self.pods_in(job, rng.randint(0, 3))
        return job

    def pods_in(self, job: JobInfo, count: int) -> None:
        for _ in range(count):
            template = PodTemplate("ns", {}, self.vector(), best_effort=False)
            n = len(job.tasks)
            status = self.rng.choice(STATUSES)
            job.add_task(
                TaskInfo(f"{job.uid}-{n}", "ns", f"{job.name}-{n}", job.uid, template, status)
            )

    def add(self) -> None:
        self.made += 1
        uid = f"ns/j{self.made}"
        self.jobs[uid] = self.job(uid)

    def step(self) -> None:
        """Some of what snapshots and sessions do between two session opens."""
        rng, jobs = self.rng, self.jobs
        for _ in range(rng.randint(0, 4)):
            change = rng.choice(
                ["touch", "replace", "remove", "add", "phase", "pods", "queues", "order", "keep"]
            )
            uid = rng.choice(list(jobs)) if jobs else None
            if change == "add" or uid is None:
                self.add()
            elif change == "touch" and jobs[uid].tasks:  # a session moved a task
                job = jobs[uid]
                job.set_status(rng.choice(list(job.tasks.values())), rng.choice(STATUSES))
            elif change == "replace":  # made anew by the snapshot
                jobs[uid] = self.job(uid)
            elif change == "remove":
                del jobs[uid]
            elif change == "phase":  # moved by a session, or set back by the builder
                jobs[uid].phase = rng.choice(PHASES)
            elif change == "pods" and not jobs[uid].tasks:  # come to a job kept unchanged
                job = jobs[uid]
                self.pods_in(job, rng.randint(1, 3))
                if job.min_resources is None:
                    job.min_resources = self.vector()
            elif change == "queues":
                self.queues = [q for q in QUEUES if rng.random() < 0.8]
            elif change == "order":
                items = list(jobs.items())
                rng.shuffle(items)
                self.jobs = jobs = dict(items)

    def session(self, kept: KeptAcrossSessions, shortcuts: Shortcuts = ALL) -> Any:
        """A session on the jobs now, of a scheduler that keeps ``kept``."""
        queues = {name: QueueInfo(name, 1 + i, created=0.0) for i, name in enumerate(self.queues)}
        total = self.dims.vector({"cpu": 64000, "memory": 256 * 2**30, "pods": 100})
        return SimpleNamespace(
            dims=self.dims, queues=queues, jobs=self.jobs, total=total, delta=None,
            kept=kept, shortcuts=shortcuts,
        )  # fmt: skip


def _kept(session: Any) -> dict[str, tuple[bytes, bytes, bytes]]:
    shares = proportion._Proportion(session)
    return {n: (q.allocated.tobytes(), q.request.tobytes(), q.reserved.tobytes()) for n, q in shares.queues.items()}  # fmt: skip


def _long_way(session: Any) -> dict[str, tuple[bytes, bytes, bytes]]:
    dims = len(session.dims)
    queues = {
        name: proportion.QueueShare(
            name, 1, np.full(dims, np.inf), np.zeros(dims), np.zeros(dims), np.zeros(dims)
        )
        for name in session.queues
    }
    LONG_WAY(queues, list(session.jobs.values()), shareable(session.dims))
    return {n: (q.allocated.tobytes(), q.request.tobytes(), q.reserved.tobytes()) for n, q in queues.items()}  # fmt: skip


@pytest.fixture
def kept() -> KeptAcrossSessions:
    """What one scheduler keeps from one session to the next (a test's own)."""
    return KeptAcrossSessions()


@pytest.fixture
def long_ways(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the session opens that took the long way."""
    taken = [0]

    def counted(*args: Any) -> None:
        taken[0] += 1
        LONG_WAY(*args)

    monkeypatch.setattr(proportion, "_add_jobs", counted)
    return taken


@pytest.mark.parametrize("seed", range(12))
def test_kept_sums_are_those_of_the_long_way_at_every_session(
    seed: int,
    long_ways: list[int],
    kept: KeptAcrossSessions,
) -> None:
    world = World(seed)
    for _ in range(40):
        session = world.session(kept)
        assert _kept(session) == _long_way(session)
        world.step()
    assert long_ways[0] == 0  # whole numbers: the sums kept were used, every time


@pytest.mark.parametrize("seed", range(8))
def test_fractions_take_the_long_way_while_they_last(
    seed: int, long_ways: list[int], kept: KeptAcrossSessions
) -> None:
    world = World(seed, fractions=True)
    for _ in range(40):
        session = world.session(kept)
        assert _kept(session) == _long_way(session)
        world.step()
    world.fractions = False
    whole = world.job("ns/kept")
    world.jobs[whole.uid] = whole
    _kept(world.session(kept))
    for uid, job in world.jobs.items():
        if _has_fractions(job):
            world.jobs[uid] = world.job(uid)  # made anew, whole
    taken = long_ways[0]
    session = world.session(kept)
    assert _kept(session) == _long_way(session)
    assert long_ways[0] == taken  # no fraction left: the sums kept again


def _has_fractions(job: JobInfo) -> bool:
    vectors = [job.allocated, job.total_request, job.min_resources]
    return any((v != np.floor(v)).any() for v in vectors if v is not None)


@pytest.mark.parametrize("seed", range(6))
def test_two_schedulers_interleaved_only_cost_a_rebuild(
    seed: int, long_ways: list[int], kept: KeptAcrossSessions
) -> None:
    """Two simulations in one process: the same uids, other objects, sometimes other
    dimensions; and a session opened twice on one snapshot's jobs."""
    other_dims = Dims.of(["cpu", "memory", "pods"])
    worlds = [World(seed), World(seed + 100), World(seed + 200, dims=other_dims)]
    rng = random.Random(seed)
    for _ in range(60):
        world = rng.choice(worlds)
        session = world.session(kept)
        assert _kept(session) == _long_way(session)
        if rng.random() < 0.7:
            world.step()
    assert long_ways[0] == 0


def _pending(cpu: float, name: str = "") -> JobInfo:
    """A job without pods asking for ``cpu`` millicores (its minResources)."""
    name = name or str(cpu)
    return JobInfo(
        f"ns/{name}", "ns", name, "default", 1, 0.0, len(DIMS),
        min_resources=DIMS.vector({"cpu": cpu}),
    )  # fmt: skip


def _open(kept: KeptAcrossSessions, *jobs: JobInfo, shortcuts: Shortcuts = ALL) -> Any:
    world = World(0)
    world.jobs = {job.uid: job for job in jobs}
    session = world.session(kept, shortcuts)
    assert _kept(session) == _long_way(session), [job.uid for job in jobs]
    return session


def test_a_sum_that_reaches_2_53_takes_the_long_way_and_starts_again(
    long_ways: list[int],
    kept: KeptAcrossSessions,
) -> None:
    """2 + (2**53 - 1) rounds: neither that sum nor, taken out again, what is left of it
    may be used."""
    one, other, big = _pending(1), _pending(1, "other"), _pending(2.0**53 - 1)
    _open(kept, one, other)
    _open(kept, one, other, big)  # 2**53 + 1 rounds: the long way
    assert long_ways[0] == 1
    _open(kept, one, other)  # kept anew, from the jobs
    _open(kept, one, other)
    assert long_ways[0] == 1


def test_negative_parts_take_the_long_way(long_ways: list[int], kept: KeptAcrossSessions) -> None:
    """2**53 + 1 - 2**53 is 0 as floats, job after job, but 1 as whole numbers."""
    high, one, low = _pending(2.0**53), _pending(1), _pending(-(2.0**53))
    _open(kept, high, low)
    _open(kept, high, one, low)
    assert long_ways[0] == 2


def test_another_mask_or_queue_set_is_not_given_the_sums_kept(
    long_ways: list[int], kept: KeptAcrossSessions
) -> None:
    jobs = {job.uid: job for job in (_pending(1), _pending(2))}
    mask = shareable(DIMS)
    sums = job_sums.kept_sums(kept, jobs, mask, ["default"])
    assert sums is not None and sums[0, job_sums.REQUEST].tolist() == [3, 0, 0, 0]
    no_cpu = mask.copy()
    no_cpu[DIMS.index["cpu"]] = 0.0
    sums = job_sums.kept_sums(kept, jobs, no_cpu, ["default"])
    assert sums is not None and not sums.any()
    sums = job_sums.kept_sums(kept, jobs, mask, ["a", "default"])
    assert sums is not None and sums[1, job_sums.REQUEST].tolist() == [3, 0, 0, 0]
    assert not sums[0].any()


def test_the_long_way_when_switched_off(long_ways: list[int], kept: KeptAcrossSessions) -> None:
    long_way = Shortcuts().without("queue_sums")
    _open(kept, _pending(1), shortcuts=long_way)
    _open(kept, _pending(1), shortcuts=long_way)
    assert long_ways[0] == 2
    _open(kept, _pending(1))
    _open(kept, _pending(1))
    assert long_ways[0] == 2  # on again: kept


def test_two_schedulers_keep_their_own_sums() -> None:
    """Each ``Scheduler`` keeps its sessions' sums (``Scheduler.kept``), not the process:
    one's sessions leave the other's sums as they were."""
    conf = runner.default_conf()
    schedulers = []
    for size in (2, 3):
        cluster = Cluster().node("n1", cpu=8)
        cluster.job("run").tasks(size, cpu=1, status=TaskStatus.RUNNING, node="n1")
        cluster.job("wait").tasks(size, cpu=1)
        snap = cluster.snapshot()
        schedulers.append(runner.Scheduler(Ignoring(snap), conf, lambda: 0.0, lambda: "s"))
    first, second = schedulers
    for kind in (job_sums.QueueSums, node_index.NodeIndex):
        assert first.kept.get(kind) is None
    first.run_once()
    kept = [first.kept.get(kind) for kind in (job_sums.QueueSums, node_index.NodeIndex)]
    assert None not in kept and second.kept.get(job_sums.QueueSums) is None
    second.run_once()
    theirs = [second.kept.get(kind) for kind in (job_sums.QueueSums, node_index.NodeIndex)]
    assert None not in theirs and not {id(k) for k in kept} & {id(k) for k in theirs}
    first.run_once()
    assert [first.kept.get(kind) for kind in (job_sums.QueueSums, node_index.NodeIndex)] == kept


def test_after_a_rounded_sum_the_next_of_the_line_is_added_up_whole(
    long_ways: list[int],
    kept: KeptAcrossSessions,
) -> None:
    """Sums started again after one reached 2**53 hold nothing: the next snapshot of the
    line, which hands every job on, must not take those jobs as already added up. A job
    gone is found among those the snapshot says it did not keep unchanged."""
    one, other, big = _pending(1), _pending(1, "other"), _pending(2.0**53 - 1)
    line, last = object(), ()
    steps = [(one, other), (one, other, big), (one, other), (one, other), (one,)]
    for serial, jobs in enumerate(steps):
        world = World(0)
        world.jobs = {job.uid: job for job in jobs}
        session = world.session(kept)
        session.delta = Delta(
            (line, serial),
            {job.uid: job for job in jobs if job is not big},
            frozenset({big.uid} | {j.uid for j in last if j not in jobs}),
        )
        assert _kept(session) == _long_way(session), serial
        last = jobs
    assert long_ways[0] == 1
