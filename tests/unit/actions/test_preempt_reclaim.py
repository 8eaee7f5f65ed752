"""preempt and reclaim: fair eviction, never wasted, never breaking a gang."""

from builders import Cluster, run_actions
from kbatch.config import DEFAULT_CONF
from kbatch.operators.scheduler.framework.info import TaskStatus

R = TaskStatus.RUNNING
# The default tiers with every action, in kube-batch's order.
FULL = DEFAULT_CONF.replace(
    '"enqueue, allocate, backfill"', '"enqueue, reclaim, allocate, backfill, preempt"'
)
assert "preempt" in FULL


def evicted_jobs(evictions: list[tuple[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for task, _ in evictions:
        job = task.rsplit("-", 1)[0]
        counts[job] = counts.get(job, 0) + 1
    return counts


def test_a_high_priority_gang_preempts_a_low_priority_job_in_its_queue() -> None:
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("low", priority=1).tasks(4, cpu=1, status=R, node="n1")
    cluster.job("high", priority=100, min_member=2).tasks(2, cpu=1)
    session = cluster.open(FULL)
    sent = run_actions(session, "preempt")
    assert evicted_jobs(sent.evictions) == {"low": 2}
    assert [t.status for t in session.jobs["default/high"].tasks.values()] == [
        TaskStatus.PIPELINED
    ] * 2


def test_no_preemption_across_queues() -> None:
    cluster = Cluster().node("n1", cpu=4).queue("a").queue("b")
    cluster.job("low", queue="a", priority=1).tasks(4, cpu=1, status=R, node="n1")
    cluster.job("high", queue="b", priority=100, min_member=2).tasks(2, cpu=1)
    assert run_actions(cluster.open(FULL), "preempt").evictions == []


def test_no_preemption_that_would_break_another_gang() -> None:
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("gang", priority=1, min_member=4).tasks(4, cpu=1, status=R, node="n1")
    cluster.job("high", priority=100, min_member=1).tasks(1, cpu=1)
    # one victim would leave 3 of 4; the whole gang is not needed for one task
    sent = run_actions(cluster.open(FULL), "preempt")
    assert sent.evictions == [] or evicted_jobs(sent.evictions) == {"gang": 4}
    assert evicted_jobs(sent.evictions).get("gang", 0) in (0, 4)


def test_evictions_that_cannot_make_the_preemptor_ready_are_not_made() -> None:
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("low", priority=1).tasks(2, cpu=1, status=R, node="n1")
    cluster.job("other", priority=200).tasks(2, cpu=1, status=R, node="n1")
    cluster.job("high", priority=100, min_member=4).tasks(4, cpu=1)
    assert run_actions(cluster.open(FULL), "preempt").evictions == []


def test_critical_and_kube_system_pods_are_never_victims() -> None:
    cluster = Cluster().node("n1", cpu=2)
    cluster.job("sys", namespace="kube-system", priority=1).tasks(1, cpu=1, status=R, node="n1")
    cluster.job("crit", priority=1).tasks(
        1, cpu=1, status=R, node="n1", priority_class_name="system-cluster-critical"
    )
    cluster.job("high", priority=100).tasks(1, cpu=1)
    assert run_actions(cluster.open(FULL), "preempt").evictions == []


def reclaim_cluster(reclaimable: bool = True) -> Cluster:
    cluster = Cluster().node("n1", cpu=6, memory=24)
    cluster.queue("a").queue("b", reclaimable=reclaimable).queue("c")
    cluster.job("ja", queue="a").tasks(3, cpu=1, status=R, node="n1")
    cluster.job("jb", queue="b").tasks(3, cpu=1, status=R, node="n1")
    cluster.job("jc", queue="c", min_member=2).tasks(2, cpu=1)
    return cluster


def test_reclaim_takes_one_task_from_each_over_served_queue() -> None:
    session = reclaim_cluster().open(FULL)
    sent = run_actions(session, "reclaim")
    assert evicted_jobs(sent.evictions) == {"ja": 1, "jb": 1}
    assert session.jobs["default/jc"].counts[TaskStatus.PIPELINED] == 2


def test_reclaim_spares_queues_that_are_not_reclaimable() -> None:
    sent = run_actions(reclaim_cluster(reclaimable=False).open(FULL), "reclaim")
    # a alone can give back only one task without going below its deserved share
    assert sent.evictions == []


def test_reclaim_does_nothing_for_a_queue_at_its_share() -> None:
    cluster = Cluster().node("n1", cpu=4).queue("a").queue("b")
    cluster.job("ja", queue="a").tasks(2, cpu=1, status=R, node="n1")
    cluster.job("jb", queue="b").tasks(2, cpu=1, status=R, node="n1").tasks(1, cpu=1)
    assert run_actions(cluster.open(FULL), "reclaim").evictions == []
