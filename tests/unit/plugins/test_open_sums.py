"""The drf plugin adds up every job at session open for all jobs at once (issue 12: a
session's open cost most of it in a long backlog); the shares must be the ones the
job-by-job loop gave, to the bit. (proportion's sums: test_proportion_sums.py.)"""

import random

import numpy as np
import pytest

from builders import Cluster, vec
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.resources import share, shareable, shares
from kbatch.operators.scheduler.core.plugins import drf

CONF = (
    'actions: "enqueue, allocate"\n'
    "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: drf\n  - name: proportion\n"
)
STATUSES = [TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.SUCCEEDED]


def _cluster(seed: int) -> Cluster:
    """Jobs of odd-sized tasks in all states (sums that round), some without pods."""
    rng = random.Random(seed)
    cluster = Cluster().node("n1", cpu=64, memory=512).node("n2", cpu=32, memory=256)
    for name in ("a", "b", "c"):
        cluster.queue(name, weight=rng.randrange(1, 4))
    for i in range(40):
        min_resources = vec(rng.choice([0.1, 0.7, 3.3]), 1.1) if rng.random() < 0.6 else None
        job = cluster.job(
            f"j{i}",
            queue=rng.choice(["a", "b", "c", "gone"]),
            phase=rng.choice(list(PodGroupPhase)),
            min_resources=min_resources,
        )
        for _ in range(rng.randrange(0, 4)):
            status = rng.choice(STATUSES)
            node = rng.choice(["n1", "n2"]) if status is not TaskStatus.PENDING else None
            job.tasks(1, cpu=rng.choice([0.1, 0.2, 0.3, 1.7]), memory=0.3, status=status, node=node)
    return cluster


def _bits(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=float).tobytes()


@pytest.mark.parametrize("seed", range(6))
def test_drf_shares_as_one_job_at_a_time(seed: int) -> None:
    session = _cluster(seed).open(CONF)
    plugin = drf._Shares(session)
    mask = shareable(session.dims)
    for uid, job in session.jobs.items():
        assert _bits(plugin.allocated[uid]) == _bits(job.allocated * mask)
        assert plugin.share[uid] == share(job.allocated * mask, plugin.total)
        assert str(plugin.share[uid]) == str(share(job.allocated * mask, plugin.total))


def test_shares_row_by_row_with_empty_totals_and_signed_zeros() -> None:
    rng = np.random.default_rng(5)
    allocated = rng.choice([0.0, -0.0, 1e-7, 2e-6, 0.3, 5.0, -1e-9], size=(200, 4))
    total = np.array([10.0, 0.0, 1e-7, 3.0])
    got = shares(allocated, total)
    want = [share(row, total) for row in allocated]
    assert [str(x) for x in got] == [str(x) for x in want]
    assert shares(np.zeros((0, 4)), total) == []
    assert shares(np.zeros((3, 0)), np.zeros(0)) == [0.0, 0.0, 0.0]
