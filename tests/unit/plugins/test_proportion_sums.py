"""proportion adds up its queues' allocations, requests and reservations for all jobs
at once (``_add_jobs``): to the bit what adding them job after job gives, which is
switched in here through that seam and compared, queue by queue, on random clusters
with odd requests (so that the order of the additions would show)."""

import random

import numpy as np
import pytest

from builders import Cluster, vec
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskStatus
from kbatch.operators.scheduler.core.plugins import proportion


def _add_each(
    queues: dict[str, proportion.QueueShare],
    jobs: list[JobInfo],
    mask: np.ndarray,
    by_bincount: bool = True,
) -> None:
    """The long way: job after job (by no bincount either way)."""
    for job in jobs:
        attr = queues.get(job.queue)
        if attr is None:
            continue
        attr.allocated += job.allocated * mask
        attr.request += (job.allocated + _pending_request(job)) * mask
        if job.phase is PodGroupPhase.INQUEUE and job.min_resources is not None:
            attr.reserved += np.maximum(job.min_resources - job.allocated, 0) * mask


def _pending_request(job: JobInfo) -> np.ndarray:
    """What the job's unplaced tasks ask for (its minResources if it has no pods yet)."""
    if not job.tasks and job.min_resources is not None:
        return job.min_resources
    return np.maximum(job.total_request - job.allocated, 0)


def _random_cluster(seed: int) -> Cluster:
    rng = random.Random(seed)
    cluster = Cluster().node("n1", cpu=64, memory=256).node("n2", cpu=48, memory=192)
    queues = ["default", "a", "b"]
    cluster.queue("a", weight=2).queue("b", weight=3)
    for j in range(rng.randint(0, 40)):
        job = cluster.job(
            f"j{j}",
            queue=rng.choice([*queues, "gone"]),  # a queue the session does not know
            phase=rng.choice([PodGroupPhase.INQUEUE, PodGroupPhase.PENDING]),
            min_resources=(
                vec(rng.uniform(0.1, 9), rng.uniform(0.1, 30)) if rng.random() < 0.5 else None
            ),
        )
        for _ in range(rng.randint(0, 4)):  # some jobs have no pods yet
            running = rng.random() < 0.5
            job.tasks(
                1,
                cpu=rng.choice([0.1, 0.3, 0.7, 1.1, 2.9]),
                memory=rng.choice([0.2, 1.3, 3.7]),
                status=TaskStatus.RUNNING if running else TaskStatus.PENDING,
                node=rng.choice(["n1", "n2"]) if running else None,
            )
    return cluster


def _sums(seed: int) -> dict[str, tuple[object, ...]]:
    session = _random_cluster(seed).open()
    shares = proportion._Proportion(session)
    return {
        name: (q.allocated.tolist(), q.request.tolist(), q.reserved.tolist(), q.share)
        for name, q in shares.queues.items()
    }


@pytest.mark.parametrize("seed", range(40))
def test_queue_sums_of_all_jobs_at_once_are_those_added_job_after_job(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_once = _sums(seed)
    monkeypatch.setattr(proportion, "_add_jobs", _add_each)
    assert _sums(seed) == at_once  # floats compared exactly
