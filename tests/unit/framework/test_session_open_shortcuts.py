"""A session counts the pods with required anti-affinity when first asked, not at open
(``Shortcuts.count_anti_affinity_when_asked``), and takes the node set's count rather than walking every
task (``Shortcuts.count_anti_affinity_by_node_set``): asked before, between and after placements and
evictions, the count is the one kept current from the open, and the decisions of
random clusters with such pods are the same every way."""

import random

import pytest

from builders import Cluster, run_actions
from kbatch.config import KUBE_BATCH_CONF
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    LabelSelector,
    PodAffinityTerm,
)
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts
from kbatch.operators.scheduler.core.framework.statement import Statement

FULL = KUBE_BATCH_CONF.replace(
    '"enqueue, allocate, backfill"', '"enqueue, reclaim, allocate, backfill, preempt"'
)
SPREAD = Affinity(
    anti_required=(
        PodAffinityTerm(LabelSelector(match_labels=(("app", "w"),)), "kubernetes.io/hostname"),
    )
)


def random_cluster(seed: int) -> Cluster:
    rnd = random.Random(seed)
    cluster = Cluster()
    nodes = [f"n{i}" for i in range(rnd.randint(2, 4))]
    for name in nodes:
        cluster.node(name, cpu=rnd.choice([2, 4]))
    spread = cluster.template(labels={"app": "w"}, affinity=SPREAD)
    plain = cluster.template()
    for j in range(rnd.randint(0, 3)):
        job = cluster.job(f"run{j}", priority=rnd.choice([0, 5]))
        job.task(rnd.choice([spread, plain]), status=TaskStatus.RUNNING, node=rnd.choice(nodes))
    for j in range(rnd.randint(1, 4)):
        job = cluster.job(f"wait{j}", min_member=rnd.randint(1, 2), priority=rnd.choice([0, 9]))
        for _ in range(rnd.randint(1, 3)):
            job.task(rnd.choice([spread, plain]))
    return cluster


@pytest.mark.parametrize("seed", range(60))
def test_counted_when_asked_decides_as_counted_at_open(seed: int) -> None:
    def decided(shortcuts: Shortcuts) -> tuple[object, ...]:
        session = random_cluster(seed).open(FULL, shortcuts=shortcuts)
        sent = run_actions(session)
        return (sent.binds, sent.evictions, sent.nominations, session.anti_affinity_pods)

    lazy = decided(Shortcuts())
    walked = Shortcuts().without("count_anti_affinity_by_node_set")
    assert decided(walked) == lazy  # walked, when asked
    assert decided(walked.without("count_anti_affinity_when_asked")) == lazy  # walked, at open


def test_the_count_asked_late_is_the_count_kept_from_the_open() -> None:
    cluster = Cluster().node("n1").node("n2")
    spread = cluster.template(labels={"app": "w"}, affinity=SPREAD)
    running = cluster.job("run").task(spread, status=TaskStatus.RUNNING, node="n1")
    waiting = cluster.job("wait").task(spread)
    for asked_at_open in (True, False):
        session = cluster.open(FULL)
        if asked_at_open:
            assert session.anti_affinity_pods == 1
        statement = Statement(session)
        statement.allocate(session.jobs[waiting.job].tasks[waiting.uid], 1)
        statement.evict(session.jobs[running.job].tasks[running.uid], "gone")
        assert session.anti_affinity_pods == 2  # the evicted pod is on its node still
        statement.discard()
        assert session.anti_affinity_pods == 1
