"""preempt and reclaim: fair eviction, never wasted, never breaking a gang."""

import numpy as np

from builders import Cluster, run_actions, vec
from kbatch.config import KUBE_BATCH_CONF
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts

R = TaskStatus.RUNNING
# The default tiers with every action, in kube-batch's order.
FULL = KUBE_BATCH_CONF.replace(
    '"enqueue, allocate, backfill"', '"enqueue, reclaim, allocate, backfill, preempt"'
)
assert "preempt" in FULL


def cpu_only(cores: float) -> np.ndarray:
    """A capability of ``cores`` cpu and no limit on anything else."""
    return np.where(np.arange(len(vec())) == 0, vec(cpu=cores), np.inf)


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
    # one victim would leave 3 of 4; all four would leave the room of three idle
    assert run_actions(cluster.open(FULL), "preempt").evictions == []


def test_a_gang_whose_room_the_preemptor_fills_may_go_whole() -> None:
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("gang", priority=1, min_member=4).tasks(4, cpu=1, status=R, node="n1")
    cluster.job("high", priority=100, min_member=4).tasks(4, cpu=1)
    sent = run_actions(cluster.open(FULL), "preempt")
    assert evicted_jobs(sent.evictions) == {"gang": 4}


def test_the_node_with_fewer_victims_is_chosen() -> None:
    cluster = Cluster().node("n1", cpu=2).node("n2", cpu=2)
    cluster.job("small", priority=1).tasks(1, cpu=1, memory=0.5, status=R, node="n1")
    cluster.job("smaller", priority=1).tasks(1, cpu=1, memory=0.5, status=R, node="n1")
    cluster.job("big", priority=1).tasks(1, cpu=2, status=R, node="n2")
    cluster.job("high", priority=100).tasks(1, cpu=2)
    assert evicted_jobs(run_actions(cluster.open(FULL), "preempt").evictions) == {"big": 1}


def test_the_node_with_less_important_victims_is_chosen() -> None:
    cluster = Cluster().node("n1", cpu=1).node("n2", cpu=1)
    cluster.job("mid", priority=50).tasks(1, cpu=1, status=R, node="n1")
    cluster.job("low", priority=1).tasks(1, cpu=1, status=R, node="n2")
    cluster.job("high", priority=100).tasks(1, cpu=1)
    assert evicted_jobs(run_actions(cluster.open(FULL), "preempt").evictions) == {"low": 1}


def test_victims_not_needed_after_all_are_spared() -> None:
    # the least important goes first, but once the bigger one has to go it is enough
    cluster = Cluster().node("n1", cpu=3)
    cluster.job("least", priority=1).tasks(1, cpu=1, status=R, node="n1")
    cluster.job("less", priority=2).tasks(1, cpu=2, status=R, node="n1")
    cluster.job("high", priority=100).tasks(1, cpu=2)
    assert evicted_jobs(run_actions(cluster.open(FULL), "preempt").evictions) == {"less": 1}


def test_victims_are_counted_only_when_sent() -> None:
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("low", priority=1).tasks(2, cpu=1, status=R, node="n1")
    cluster.job("other", priority=200).tasks(2, cpu=1, status=R, node="n1")
    cluster.job("high", priority=100, min_member=4).tasks(4, cpu=1)
    discarded = cluster.open(FULL)
    assert run_actions(discarded, "preempt").evictions == []
    assert discarded.stats.preemption_victims == 0
    assert discarded.stats.preemption_attempts > 0
    committed = reclaim_cluster().open(FULL)
    sent = run_actions(committed, "reclaim")
    assert committed.stats.preemption_victims == len(sent.evictions) == 2
    assert committed.stats.preemption_attempts == 2


def test_no_preemption_for_a_task_its_queue_may_not_take() -> None:
    cluster = Cluster().node("n1", cpu=4).queue("q", capability=cpu_only(2))
    cluster.job("low", queue="q", priority=1).tasks(2, cpu=1, status=R, node="n1")
    cluster.job("other").tasks(2, cpu=1, status=R, node="n1")
    cluster.job("high", queue="q", priority=100).tasks(1, cpu=1)
    assert run_actions(cluster.open(FULL), "preempt").evictions == []


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
    assert {why for _, why in sent.evictions} == {
        "reclaimed by default/jc-0",
        "reclaimed by default/jc-1",
    }
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


def test_reclaim_takes_from_the_most_over_served_queue_first() -> None:
    # deserved 4.5 / 4.5 / 3: a (7, and more important) is the most over-served
    cluster = Cluster().node("n1", cpu=12).queue("a").queue("b").queue("c")
    cluster.job("ja", queue="a", priority=100).tasks(7, cpu=1, status=R, node="n1")
    cluster.job("jb", queue="b", priority=1).tasks(5, cpu=1, status=R, node="n1")
    cluster.job("jc", queue="c", min_member=2).tasks(3, cpu=1)
    sent = run_actions(cluster.open(FULL), "reclaim")
    assert evicted_jobs(sent.evictions) == {"ja": 2}


def test_reclaim_never_takes_a_queue_below_its_deserved_share() -> None:
    # a's only task is 5 of its deserved 4: taking it would leave a with nothing
    cluster = Cluster().node("n1", cpu=8).queue("a").queue("b")
    cluster.job("ja", queue="a").tasks(1, cpu=5, status=R, node="n1")
    cluster.job("jb", queue="b", min_member=4).tasks(4, cpu=1)
    assert run_actions(cluster.open(FULL), "reclaim").evictions == []


def test_reclaim_between_fractional_shares_is_stable() -> None:
    # deserved 4.5 each: a at 5 may not drop to 4, b at 4 may not rise to 5
    cluster = Cluster().node("n1", cpu=9, memory=64).queue("a").queue("b")
    cluster.job("ja", queue="a").tasks(5, cpu=1, memory=1, status=R, node="n1").tasks(
        4, cpu=1, memory=1
    )
    cluster.job("jb", queue="b").tasks(4, cpu=1, memory=1, status=R, node="n1").tasks(
        5, cpu=1, memory=1
    )
    assert run_actions(cluster.open(FULL), "reclaim").evictions == []


def test_reclaim_goes_no_further_than_the_reclaimer_deserves() -> None:
    # deserved 3 each; a could give 6, but c's gang of 4 would take c past its 3
    cluster = Cluster().node("n1", cpu=9).queue("a").queue("c").queue("d")
    cluster.job("ja", queue="a").tasks(9, cpu=1, status=R, node="n1")
    cluster.job("jc", queue="c", min_member=4).tasks(4, cpu=1)
    cluster.job("jd", queue="d").tasks(3, cpu=1)
    sent = run_actions(cluster.open(FULL), "reclaim")
    assert [why for _, why in sent.evictions] == ["reclaimed by default/jd-0"]


def test_no_reclaim_for_a_task_its_queue_may_not_take() -> None:
    cluster = Cluster().node("n1", cpu=8).queue("a").queue("c", capability=cpu_only(2))
    cluster.job("ja", queue="a").tasks(2, cpu=4, status=R, node="n1")
    cluster.job("jc", queue="c").tasks(1, cpu=3)
    assert run_actions(cluster.open(FULL), "reclaim").evictions == []


def count_plans(monkeypatch) -> list[int]:  # type: ignore[no-untyped-def]
    """Count the per-node plans eviction makes."""
    from kbatch.operators.scheduler.core.framework import eviction

    calls: list[int] = []
    real = eviction._plan

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[3])
        return real(*args, **kwargs)

    monkeypatch.setattr(eviction, "_plan", counted)
    return calls


def test_a_backlog_of_alike_jobs_that_can_evict_nothing_costs_one_plan_per_node(
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """Equal priorities: no job may preempt. The first waiting job's failed plans hold
    for the others (same queue, request, priority and session state). With the search
    bounded by what priority could offer (nothing), no node is even tried."""
    for bound, expected in ((False, 4), (True, 0)):
        shortcuts = Shortcuts(bound_by_offered=bound)
        plans = count_plans(monkeypatch)
        cluster = Cluster()
        for n in range(4):
            cluster.node(f"n{n}", cpu=2)
            cluster.job(f"run{n}", priority=5).tasks(2, cpu=1, status=R, node=f"n{n}")
        for j in range(10):
            cluster.job(f"wait{j}", priority=5).tasks(1, cpu=1)
        assert run_actions(cluster.open(FULL, shortcuts=shortcuts), "preempt").evictions == []
        assert len(plans) == expected, plans
        monkeypatch.undo()


def test_a_backlog_facing_gangs_that_may_not_go_tries_no_node(
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """Queue a holds every node with gangs at their minimum and deserves all but one cpu
    of it: it may give back one cpu, not a whole gang of two. b's waiting gangs reclaim
    nothing. Bounded by the jobs that may lose any (none), no node is tried; without the
    bound the first waiting job's plan fails on every node."""
    for bound, expected in ((False, 4), (True, 0)):
        shortcuts = Shortcuts(bound_by_what_may_go=bound)
        plans = count_plans(monkeypatch)
        cluster = Cluster().queue("a", weight=7).queue("b", weight=1)
        for n in range(4):
            cluster.node(f"n{n}", cpu=2)
            running = cluster.job(f"run{n}", queue="a", min_member=2)
            running.tasks(2, cpu=1, status=R, node=f"n{n}")
        for j in range(10):
            cluster.job(f"wait{j}", queue="b", min_member=1).tasks(1, cpu=1)
        assert run_actions(cluster.open(FULL, shortcuts=shortcuts), "reclaim").evictions == []
        assert len(plans) == expected, plans
        monkeypatch.undo()


def test_a_plan_that_failed_for_one_preemptor_is_tried_again_for_a_more_important_one(
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """The older job (first in line) may evict nothing at its priority; the later one,
    more important, must still get its plan made on the same node. (With the search
    bounded by what priority could offer, or by the jobs that may lose any, the older
    job's would not try the node at all: the bounds are off here, so that its plan is
    made and fails.)"""
    unbounded = Shortcuts().without("bound_by_offered", "bound_by_what_may_go")
    plans = count_plans(monkeypatch)
    cluster = Cluster().node("n1", cpu=2)
    cluster.job("running", priority=5).tasks(2, cpu=1, status=R, node="n1")
    cluster.job("peer", priority=5, created=1.0).tasks(1, cpu=1)
    cluster.job("boss", priority=50, created=2.0).tasks(1, cpu=1)
    sent = run_actions(cluster.open(FULL, shortcuts=unbounded), "preempt")
    assert evicted_jobs(sent.evictions) == {"running": 1}
    assert len(plans) >= 2


def test_victim_functions_that_do_not_say_what_they_read_are_never_reused(
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    """drf's victims depend on the preemptor's own share: with drf deciding, every
    waiting job gets its own plans."""
    plans = count_plans(monkeypatch)
    conf = 'actions: "preempt"\ntiers:\n- plugins:\n  - name: drf\n  - name: predicates\n'
    cluster = Cluster().node("n1", cpu=2)
    cluster.job("running", priority=5).tasks(2, cpu=1, status=R, node="n1")
    for j in range(3):
        cluster.job(f"wait{j}", priority=5).tasks(1, cpu=1)
    run_actions(cluster.open(conf), "preempt")
    assert len(plans) >= 3


def test_a_preemptor_is_nominated_to_the_node_its_victims_leave() -> None:
    cluster = Cluster().node("n1", cpu=2).node("n2", cpu=2)
    cluster.job("low", priority=1).tasks(2, cpu=1, status=R, node="n1")
    cluster.job("busy", priority=100).tasks(2, cpu=1, status=R, node="n2")
    cluster.job("high", priority=100, min_member=2).tasks(2, cpu=1)
    sent = run_actions(cluster.open(FULL), "preempt")
    assert evicted_jobs(sent.evictions) == {"low": 2}
    assert sent.nominations == {"high-0": "n1", "high-1": "n1"}


def test_nothing_is_nominated_by_a_statement_that_evicts_nothing() -> None:
    """allocate pipelining a job behind pods already leaving nominates nobody."""
    cluster = Cluster().node("n1", cpu=2)
    cluster.job("leaving").tasks(2, cpu=1, status=TaskStatus.RELEASING, node="n1")
    cluster.job("next", min_member=2).tasks(2, cpu=1)
    assert run_actions(cluster.open(FULL), "allocate").nominations == {}


def kept_room_cluster(leaving: bool) -> Cluster:
    """n1 (1 cpu) keeps room for high (queue a) that evicted there. Queue a already runs
    a pod on n2, so queue b's job, other, is first in queue order and wants that cpu.
    ``leaving``: high's victim is still terminating on n1 (else it is gone)."""
    cluster = Cluster().node("n1", cpu=1).node("n2", cpu=1).queue("a").queue("b")
    cluster.job("a-run", queue="a").tasks(1, cpu=1, status=R, node="n2")
    if leaving:
        cluster.job("victim", queue="a").tasks(1, cpu=1, status=TaskStatus.RELEASING, node="n1")
    cluster.job("other", queue="b").tasks(1, cpu=1)
    cluster.job("high", queue="a", priority=100).tasks(1, cpu=1, nominated="n1")
    return cluster


def test_room_kept_for_a_nominated_task_is_not_given_to_another_job() -> None:
    """While the victim leaves, other may not wait for its room (pipeline) there: high
    does, and its nomination stands."""
    session = kept_room_cluster(leaving=True).open(FULL)
    sent = run_actions(session, "allocate")
    assert sent.binds == [] and sent.nominations == {}
    statuses = {t.name: t.status for j in session.jobs.values() for t in j.tasks.values()}
    assert statuses["high-0"] is TaskStatus.PIPELINED
    assert statuses["other-0"] is TaskStatus.PENDING


def test_a_nominated_task_takes_its_kept_room_once_free() -> None:
    sent = run_actions(kept_room_cluster(leaving=False).open(FULL), "allocate")
    assert sent.binds == [("high-0", "n1")]


def test_a_nomination_no_one_used_ends_once_nothing_is_leaving() -> None:
    """high cannot run (its gang needs 2; 1 fits): with its victims gone, the room it
    kept goes back to everyone, in the session and in the cluster."""
    cluster = Cluster().node("n1", cpu=1)
    cluster.job("high", priority=100, min_member=2).tasks(1, cpu=1, nominated="n1").tasks(1)
    session = cluster.open(FULL)
    sent = run_actions(session, "allocate")
    assert sent.binds == []
    assert sent.nominations == {"high-0": None}
    assert session.nodes.nominated.sum() == 0
