"""reclaim tries a job once per alike try: a job whose try reads what a discarded try
read (same session state, queue, rule, job shape, pending tasks of the same templates)
is not tried again, and counts the attempts that try made; a job that differs, or any
job after a commit, is tried.

The cluster is the one where such tries are bound to fail: full nodes, each running a
4-pod gang of one over-served queue, and small gangs of another queue waiting. Evicting
a whole 4-pod gang for a 2-pod gang leaves the victims' room idle: every try is wasted.
"""

import pytest

from builders import Cluster, FakeCluster, run_actions
from kbatch.operators.scheduler.core.actions import reclaim
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate

R = TaskStatus.RUNNING
NODES = 4


def full_cluster() -> Cluster:
    """Each node full with a running 4-pod gang of ``big`` (8 cpu a pod)."""
    cluster = Cluster()
    cluster.queue("big", weight=1).queue("small", weight=3)
    for i in range(NODES):
        cluster.node(f"n{i}", cpu=32, memory=64)
        cluster.job(f"run{i}", queue="big", min_member=4).tasks(4, cpu=8, status=R, node=f"n{i}")
    return cluster


def small_gangs(cluster: Cluster, template: PodTemplate, names: list[str], size: int = 2) -> None:
    """Gangs of ``size`` pods of ``template`` (pods of one spec share it)."""
    for name in names:
        job = cluster.job(name, queue="small", min_member=size)
        for _ in range(size):
            job.task(template)


def run(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> tuple[list[str], FakeCluster, int]:
    """The jobs reclaim tried, in order, what it decided and its preemption attempts."""
    tried: list[str] = []
    try_once = reclaim._reclaim_for

    def counted(session, placer, job, pending, rules):  # type: ignore[no-untyped-def]
        tried.append(job.name)
        return try_once(session, placer, job, pending, rules)

    session = cluster.open()
    with monkeypatch.context() as patched:
        patched.setattr(reclaim, "_reclaim_for", counted)
        sent = run_actions(session, "reclaim")
    return tried, sent, session.stats.preemption_attempts


def without_skipping(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reclaim, "_try_key", lambda *args: None)


def decisions(sent: FakeCluster) -> tuple[object, ...]:
    return (sent.evictions, sent.binds, sent.nominations)


def test_alike_gangs_after_a_wasted_try_are_not_tried_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def cluster() -> Cluster:
        made = full_cluster()
        small_gangs(made, made.template(cpu=1), ["w0", "w1", "w2", "w3", "w4"])
        return made

    tried, sent, attempts = run(cluster(), monkeypatch)
    assert tried == ["w0"]
    assert sent.evictions == []
    with monkeypatch.context() as patched:
        without_skipping(patched)
        every_try, slow, slow_attempts = run(cluster(), monkeypatch)
    assert every_try == ["w0", "w1", "w2", "w3", "w4"]
    assert decisions(sent) == decisions(slow)
    assert attempts == slow_attempts > 0  # the skipped tries' attempts are counted


def test_a_gang_that_asks_more_is_tried_and_after_its_commit_alike_gangs_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """w1 has the same template and queue as w0 but 32 pods: evicting a whole gang for it
    wastes nothing, so it reclaims. The state has changed then: w2, alike w0, is tried."""

    def cluster() -> Cluster:
        made = full_cluster()
        template = made.template(cpu=1)
        small_gangs(made, template, ["w0"])
        small_gangs(made, template, ["w1"], size=32)
        small_gangs(made, template, ["w2", "w3"])
        return made

    tried, sent, attempts = run(cluster(), monkeypatch)
    assert tried == ["w0", "w1", "w2"]
    assert len(sent.evictions) == 4  # one whole gang, for w1
    with monkeypatch.context() as patched:
        without_skipping(patched)
        every_try, slow, slow_attempts = run(cluster(), monkeypatch)
    assert every_try == ["w0", "w1", "w2", "w3"]
    assert decisions(sent) == decisions(slow)
    assert attempts == slow_attempts
