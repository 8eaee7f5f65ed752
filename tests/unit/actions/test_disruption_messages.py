"""Every victim's eviction carries the message of the DisruptionTarget condition its pod
gets before deletion: who takes its room — the preemptor's pod and PodGroup, or the
queue that reclaims its share — while the Evict events keep their words."""

from builders import Cluster, run_actions
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.info import TaskStatus

R = TaskStatus.RUNNING
FULL = """
actions: "enqueue, reclaim, allocate, backfill, preempt"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def disruptions(cluster: Cluster, action: str) -> dict[str, set[str]]:
    """victim pod -> the DisruptionTarget messages its evictions carry."""
    sent = run_actions(cluster.open(FULL), action)
    found: dict[str, set[str]] = {}
    for eviction in sent.outcome.evictions:
        found.setdefault(eviction.task.name, set()).add(eviction.disruption)
    return found


def test_a_victim_of_preemption_is_told_the_preemptors_pod_and_podgroup() -> None:
    cluster = Cluster().node("n1", cpu=2)
    cluster.job("low", priority=1).tasks(2, cpu=1, status=R, node="n1")
    cluster.job("high", priority=100).tasks(1, cpu=1)
    found = disruptions(cluster, "preempt")
    assert list(found.values()) == [
        {"kbatch: preempting to accommodate pod default/high-0 of PodGroup default/high"}
    ]


def test_a_pod_without_a_podgroup_is_named_alone() -> None:
    cluster = Cluster().node("n1", cpu=1)
    cluster.job("low", priority=1).tasks(1, cpu=1, status=R, node="n1")
    cluster.job("high", priority=100).tasks(1, cpu=1).job.has_pod_group = False
    assert disruptions(cluster, "preempt") == {
        "low-0": {"kbatch: preempting to accommodate pod default/high-0"}
    }


def test_a_gang_preempted_whole_is_told_on_every_node() -> None:
    """Room for the preemptor on n1 breaks the gang, which goes whole: its tasks on n2
    are told who took the room too."""
    cluster = Cluster().node("n1", cpu=2).node("n2", cpu=2)
    gang = cluster.job("gang", priority=1, min_member=4)
    gang.tasks(2, cpu=1, status=R, node="n1").tasks(2, cpu=1, status=R, node="n2")
    cluster.job("high", priority=100, min_member=2).tasks(2, cpu=1)
    found = disruptions(cluster, "preempt")
    assert sorted(found) == ["gang-0", "gang-1", "gang-2", "gang-3"]
    message = "kbatch: preempting to accommodate pod default/high-0 of PodGroup default/high"
    assert set().union(*found.values()) == {message}


def test_a_victim_of_reclaim_is_told_the_queue_that_takes_its_share_back() -> None:
    cluster = Cluster().node("n1", cpu=6, memory=24)
    cluster.queue("a").queue("b").queue("c")
    cluster.job("ja", queue="a").tasks(3, cpu=1, status=R, node="n1")
    cluster.job("jb", queue="b").tasks(3, cpu=1, status=R, node="n1")
    cluster.job("jc", queue="c", min_member=2).tasks(2, cpu=1)
    sent = run_actions(cluster.open(FULL), "reclaim")
    assert len(sent.outcome.evictions) == 2
    told = {(e.reason, e.disruption) for e in sent.outcome.evictions}
    assert told == {
        (
            f"reclaimed by default/jc-{i}",
            f"kbatch: queue c reclaims its share, to accommodate pod default/jc-{i} "
            "of PodGroup default/jc",
        )
        for i in (0, 1)
    }


def test_the_condition_is_kube_schedulers() -> None:
    assert decided.disruption_condition("kbatch: why") == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "kbatch: why",
    }
