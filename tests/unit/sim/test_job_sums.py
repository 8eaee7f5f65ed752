"""The timeline's sums kept by what changed (``framework.job_sums``) equal the long way's,
added up over every job in order, whatever the ticks do to the jobs; and the jobs an
update hands back are exactly those that are not the last update's as they were."""

import random

import pytest

from builders import DIMS, Cluster, JobBuilder
from kbatch.operators.scheduler.core.framework import job_sums
from kbatch.operators.scheduler.core.framework.delta import Delta
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskStatus

CPU = DIMS.index["cpu"]
QUEUES = ("a", "b", "c")
STATUSES = (TaskStatus.PENDING, TaskStatus.PIPELINED, TaskStatus.RUNNING, TaskStatus.SUCCEEDED)


def _long_way(jobs: dict[str, JobInfo]) -> tuple[dict[str, float], int]:
    allocated: dict[str, float] = {}
    pending = 0
    for job in jobs.values():
        queue = job_sums.queue_of(job)
        allocated[queue] = allocated.get(queue, 0.0) + float(job.allocated[CPU])
        pending += job_sums.waiting(job)
    return allocated, pending


def _job(rng: random.Random, name: str, cpu: float | None = None) -> JobInfo:
    cluster = Cluster()
    built = cluster.job(name, queue=rng.choice(QUEUES))
    for _ in range(rng.randrange(0, 4)):
        size = rng.choice([0.25, 1, 2, 8]) if cpu is None else cpu
        built.tasks(rng.randrange(1, 4), cpu=size, status=rng.choice(STATUSES))
    built.job.has_pod_group = rng.random() < 0.8  # a pod of its own counts in the default
    return built.job


def _pods_come(rng: random.Random, job: JobInfo) -> None:
    """What a snapshot does to a job without tasks that it keeps (its PodGroup the
    same) when its pods come: puts them in it, in place (not touched)."""
    JobBuilder(Cluster(), job).tasks(rng.randrange(1, 4), status=rng.choice(STATUSES))


def _touch(rng: random.Random, job: JobInfo) -> None:
    """What a session does to a job in place: a task's status moved (marks it touched)."""
    task = rng.choice(list(job.tasks.values()))
    job.set_status(task, rng.choice([s for s in STATUSES if s is not task.status]))


def _next_tick(
    rng: random.Random, jobs: dict[str, JobInfo], serial: int
) -> tuple[dict[str, JobInfo], set[str]]:
    """The next snapshot's jobs as its session left them: most kept unchanged as they are,
    some made anew (those written, those the last session touched), some touched in
    place, some without tasks given pods in place, some gone, some new; and the uids of
    those made anew, given pods or new."""
    after: dict[str, JobInfo] = {}
    changed = set()
    for uid, job in jobs.items():
        roll = rng.random()
        if roll < 0.1:
            continue  # gone
        if roll < 0.2 or job.touched:
            job = _job(rng, job.name)
            changed.add(uid)
        elif roll < 0.3 and job.tasks:
            _touch(rng, job)
        elif roll < 0.4 and not job.tasks:
            _pods_come(rng, job)
            changed.add(uid)
        after[uid] = job
    for n in range(rng.randrange(0, 3)):
        job = _job(rng, f"new-{serial}-{n}")
        after[job.uid] = job
        changed.add(job.uid)
    return after, changed


def test_kept_sums_are_the_long_ways_tick_after_tick() -> None:
    rng = random.Random(7)
    sums = job_sums.JobSums()
    jobs = {job.uid: job for job in (_job(rng, f"j{i}") for i in range(30))}
    returned = sums.update(jobs, CPU)
    assert returned == list(jobs.values())
    assert sums.totals() == _long_way(jobs)
    for serial in range(200):
        jobs, changed = _next_tick(rng, jobs, serial)
        touched = {uid for uid, job in jobs.items() if job.touched}
        returned = sums.update(jobs, CPU)
        assert [job.uid for job in returned] == [uid for uid in jobs if uid in changed | touched]
        assert sums.totals() == _long_way(jobs)


def test_a_job_kept_unchanged_untouched_is_not_returned() -> None:
    rng = random.Random(1)
    jobs = {job.uid: job for job in (_job(rng, f"j{i}", cpu=1) for i in range(5))}
    sums = job_sums.JobSums()
    sums.update(jobs, CPU)
    assert sums.update(dict(jobs), CPU) == []
    job = next(job for job in jobs.values() if job.tasks)
    _touch(rng, job)
    assert sums.update(jobs, CPU) == [job]
    assert sums.totals() == _long_way(jobs)


def test_a_job_kept_without_tasks_that_takes_pods_in_place_is_returned() -> None:
    rng = random.Random(2)
    empty = Cluster().job("empty", queue="a").job
    sums = job_sums.JobSums()
    sums.update({empty.uid: empty}, CPU)
    assert sums.totals() == ({"a": 0.0}, 0)
    _pods_come(rng, empty)
    assert sums.update({empty.uid: empty}, CPU) == [empty]
    assert sums.totals() == _long_way({empty.uid: empty})
    assert sums.update({empty.uid: empty}, CPU) == []


def test_a_fraction_of_a_millicore_is_added_up_the_long_way() -> None:
    rng = random.Random(3)
    whole = {job.uid: job for job in (_job(rng, f"j{i}", cpu=2) for i in range(5))}
    fraction = Cluster().job("odd").tasks(3, cpu=0.0001, status=TaskStatus.RUNNING).job
    sums = job_sums.JobSums()
    sums.update({**whole, fraction.uid: fraction}, CPU)
    assert sums.totals() is None  # 0.1 millicores: floats in another order may differ
    sums.update(whole, CPU)
    assert sums.totals() == _long_way(whole)


def test_sums_too_large_to_be_exact_are_added_up_the_long_way() -> None:
    big = Cluster().job("big").tasks(1, cpu=2**44, status=TaskStatus.RUNNING).job
    sums = job_sums.JobSums()
    sums.update({big.uid: big}, CPU)
    assert sums.totals() is None  # 2**54 millicores: more than 2**53 millicores


def test_other_dimensions_make_every_job_new() -> None:
    rng = random.Random(5)
    jobs = {job.uid: job for job in (_job(rng, f"j{i}") for i in range(5))}
    sums = job_sums.JobSums()
    sums.update(jobs, CPU)
    assert sums.update(jobs, CPU + 1) == list(jobs.values())
    assert sums.update(jobs, CPU) == list(jobs.values())
    assert sums.totals() == _long_way(jobs)


@pytest.mark.parametrize("seed", range(3))
def test_only_the_jobs_the_snapshot_and_session_name_are_looked_at(seed: int) -> None:
    """With the snapshot's delta (its unchanged jobs, the jobs it says changed and those
    its session changed, here as its builder would give them), the same jobs come back, in no set order, and the same
    sums, as when every job is looked at; ``in_order`` puts them back in the snapshot's
    order, one of them or more."""
    rng = random.Random(seed)
    quick, every = job_sums.JobSums(), job_sums.JobSums()
    jobs = {job.uid: job for job in (_job(rng, f"j{i}") for i in range(80))}
    maker = object()
    quick.update(jobs, CPU, Delta((maker, 0)))
    every.update(jobs, CPU)
    sizes = set()
    for serial in range(60):
        after, changed = _next_tick(rng, jobs, serial)
        unchanged = {uid: job for uid, job in after.items() if uid not in changed}
        changed_uids = frozenset((jobs.keys() | after.keys()) - unchanged.keys())
        by_sessions = [uid for uid, job in unchanged.items() if job.touched]
        delta = Delta((maker, serial + 1), unchanged, changed_uids, by_sessions)
        got = quick.update(after, CPU, delta)
        in_order = [job.uid for job in every.update(after, CPU)]
        assert sorted(job.uid for job in got) == sorted(in_order)
        assert [job.uid for job in job_sums.in_order(after, got)] == in_order
        assert quick.totals() == every.totals() == _long_way(after)
        sizes.add(len(got) > 1)  # (``in_order`` puts two or more in order)
        jobs = after
    assert sizes == {True, False}


def test_other_dimensions_make_every_job_new_along_a_line_of_snapshots() -> None:
    """A snapshot of the same line that hands every job on but counts cpu elsewhere: no
    job is the same, whatever it says changed."""
    rng = random.Random(6)
    jobs = {job.uid: job for job in (_job(rng, f"j{i}") for i in range(5))}
    sums, maker = job_sums.JobSums(), object()
    sums.update(jobs, CPU, Delta((maker, 0)))
    none: tuple[frozenset[str], list[str]] = (frozenset(), [])
    assert sums.update(jobs, CPU + 1, Delta((maker, 1), jobs, *none)) == list(jobs.values())
    assert sums.update(jobs, CPU + 1, Delta((maker, 2), jobs, *none)) == []
