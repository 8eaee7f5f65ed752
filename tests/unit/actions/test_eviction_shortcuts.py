"""Eviction's shortcuts give the decisions eviction makes without them.

The shortcuts (framework/eviction.py, eviction_rules.py, evictable.py): a failed
search or plan is reused while the session state (commits so far, the statement's
changes) is the same; whether a gang may go whole is asked once per job for every rule alike, and
once for gangs whose members the rule reads alike (reclaim: queue and request); and
a node whose tasks the plugins could never offer (priority, conformance task by
task) is given up before the plugins are asked. Each is switched off here and the
same random small clusters are scheduled with and without them.
"""

import random

import pytest

from builders import Cluster, FakeCluster, JobBuilder, run_actions
from kbatch.api.podgroup import PodGroupPhase
from kbatch.config import KUBE_BATCH_CONF
from kbatch.operators.scheduler.core.actions import reclaim
from kbatch.operators.scheduler.core.framework import (
    evictable,
    eviction_rules,
    preemptors,
    tiers,
    victims,
)
from kbatch.operators.scheduler.core.framework.evictable import EvictableRoom
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts

R = TaskStatus.RUNNING
FULL = KUBE_BATCH_CONF.replace(
    '"enqueue, allocate, backfill"', '"enqueue, reclaim, allocate, backfill, preempt"'
)
SEEDS = range(120)


def random_job(
    rnd: random.Random, cluster: Cluster, name: str, queues: list[str], priorities: list[int]
) -> tuple[int, JobBuilder]:
    """A job of 1 to 4 tasks (its size, to add them) in one of ``queues``."""
    size = rnd.randint(1, 4)
    job = cluster.job(
        name,
        queue=rnd.choice(queues),
        min_member=rnd.randint(1, size),
        priority=rnd.choice(priorities),
    )
    return size, job


def random_cluster(seed: int) -> Cluster:
    """A few full-ish nodes, queues of different weights, running gangs and single
    pods of a few priorities (some critical), and waiting jobs of a few job and task
    priorities that may preempt or reclaim, some with a task running already."""
    rnd = random.Random(seed)
    cluster = Cluster()
    nodes = [f"n{i}" for i in range(rnd.randint(2, 5))]
    for name in nodes:
        cluster.node(name, cpu=rnd.choice([2, 4, 6]), memory=64)
    queues = ["default"] + [f"q{i}" for i in range(rnd.randint(0, 2))]
    for name in queues[1:]:
        cluster.queue(name, weight=rnd.randint(1, 4), reclaimable=rnd.random() < 0.8)
    free = {name: cluster.nodes[i][1][0] for i, name in enumerate(nodes)}
    for j in range(rnd.randint(1, 6)):
        size, job = random_job(rnd, cluster, f"run{j}", queues, [0, 1, 5])
        critical = rnd.random() < 0.1
        for _ in range(size):
            roomy = [n for n in nodes if free[n] >= 1]
            if not roomy:
                break
            node = rnd.choice(roomy)
            free[node] -= 1
            spec = {"priority_class_name": "system-node-critical"} if critical else {}
            job.tasks(1, cpu=1, status=R, node=node, **spec)
    for j in range(rnd.randint(1, 6)):
        size, job = random_job(rnd, cluster, f"wait{j}", queues, [0, 1, 5, 10])
        roomy = [n for n in nodes if free[n] >= 1]
        if roomy and rnd.random() < 0.4:  # partly running: its own tasks may make room
            node = rnd.choice(roomy)
            free[node] -= 1
            job.tasks(1, cpu=1, status=R, node=node, priority=rnd.choice([0, 1]))
        job.tasks(size, cpu=rnd.choice([1, 1, 2]), priority=rnd.choice([None, 1, 3]))
    return cluster


def decisions(sent: FakeCluster) -> tuple[object, ...]:
    return (sent.evictions, sent.binds, sent.nominations)


def without_shortcuts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every state a new one (nothing failed is reused), no verdict on a whole gang kept
    beyond one plan's candidates, and no per-task test known of the plugins."""
    monkeypatch.setattr(EvictableRoom, "state", lambda self, signature: object())
    monkeypatch.setattr(eviction_rules, "shared_verdicts", lambda statement, task, rules: None)
    monkeypatch.setattr(victims, "victims_filter", lambda fns, filters: None)
    monkeypatch.setattr(tiers.TieredFunctions, "may_lose_key", lambda self, task: None)


@pytest.mark.parametrize("seed", SEEDS)
def test_random_small_clusters_get_the_same_decisions_with_and_without_shortcuts(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = decisions(run_actions(random_cluster(seed).open(FULL)))
    with monkeypatch.context() as patched:
        without_shortcuts(patched)
        slow = decisions(run_actions(random_cluster(seed).open(FULL)))
    assert fast == slow


@pytest.mark.parametrize("seed", SEEDS)
def test_running_tasks_indexed_once_per_session_are_those_indexed_per_action(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reclaim's index of the evictable tasks serves preempt while nothing was evicted
    (``evictable.running_tasks``): as an index made afresh for each action."""
    shared = decisions(run_actions(random_cluster(seed).open(FULL)))
    monkeypatch.setattr(evictable, "running_tasks", evictable.RunningTasks)
    assert decisions(run_actions(random_cluster(seed).open(FULL))) == shared


@pytest.mark.parametrize("seed", SEEDS)
def test_over_served_queues_kept_by_state_are_those_asked_for_every_job(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """reclaim asks which queues are over their share once per session state
    (``reclaim._over_served``): as asking before every job's turn."""
    kept = decisions(run_actions(random_cluster(seed).open(FULL)))
    once = reclaim._over_served
    monkeypatch.setattr(
        reclaim, "_over_served", lambda session, room, known: once(session, room, {})
    )
    assert decisions(run_actions(random_cluster(seed).open(FULL))) == kept


def test_reclaim_indexes_no_running_task_while_no_queue_is_over_its_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With no reclaimable queue over its deserved share there is no one to take from,
    and flat queues over their share take nothing back: with no other job waiting,
    reclaim gives up before it indexes the running tasks (a flood of jobs that fit costs
    it next to nothing). Once a queue below its share waits, the index is made."""
    made: list[int] = []
    real = evictable.RunningTasks
    monkeypatch.setattr(evictable, "RunningTasks", lambda s: made.append(1) or real(s))
    cluster = Cluster().node("n1", cpu=4).queue("a").queue("b")
    cluster.job("ja", queue="a").tasks(2, cpu=1, status=R, node="n1")
    cluster.job("jb", queue="b").tasks(2, cpu=1, status=R, node="n1").tasks(1, cpu=1)
    assert run_actions(cluster.open(FULL), "reclaim").evictions == []
    # a is over its share (its pending job counts); b's more asks wait to be admitted
    only_over = Cluster().node("n1", cpu=4).queue("a").queue("b")
    only_over.job("ja", queue="a").tasks(3, cpu=1, status=R, node="n1")
    only_over.job("ja2", queue="a").tasks(1, cpu=1)
    only_over.job("jb", queue="b").tasks(1, cpu=1, status=R, node="n1")
    only_over.job("jb2", queue="b", phase=PodGroupPhase.PENDING).tasks(2, cpu=1)
    session = only_over.open(FULL)
    assert session.overused(session.queues["a"]) and not session.overused(session.queues["b"])
    assert run_actions(session, "reclaim").evictions == []
    assert made == []
    over = Cluster().node("n1", cpu=4).queue("a").queue("b")
    over.job("ja", queue="a").tasks(4, cpu=1, status=R, node="n1")
    over.job("jb", queue="b", min_member=2).tasks(2, cpu=1)
    assert len(run_actions(over.open(FULL), "reclaim").evictions) == 2
    assert made == [1]


def test_the_index_of_running_tasks_is_made_again_once_a_task_is_evicted() -> None:
    from kbatch.operators.scheduler.core.framework.statement import Statement

    cluster = Cluster().node("n1", cpu=4)
    cluster.job("run").tasks(2, status=R, node="n1")
    session = cluster.open(FULL)
    first = evictable.running_tasks(session)
    statement = Statement(session)
    statement.evict(next(iter(session.jobs["default/run"].tasks.values())), "")
    statement.discard()
    assert evictable.running_tasks(session) is first  # undone: nothing changed
    statement.evict(next(iter(session.jobs["default/run"].tasks.values())), "gone")
    statement.commit()
    again = evictable.running_tasks(session)
    assert again is not first and sum(map(len, again.tasks)) == 1


def test_the_random_clusters_do_evict() -> None:
    """The comparison above is worth something only if eviction happens in it."""
    evicting = sum(1 for seed in SEEDS if run_actions(random_cluster(seed).open(FULL)).evictions)
    assert evicting >= len(SEEDS) // 10


# ---------------------------------------------------------------- the parts, one by one
def two_tier_conf(first: str, second: str) -> str:
    return f'actions: "preempt"\ntiers:\n- plugins:\n{first}- plugins:\n{second}'


def test_the_per_task_test_is_the_deciding_tiers_and_none_without_one() -> None:
    """priority and conformance keep candidates task by task; drf does not (a victim's
    fate depends on the others taken). The deciding tier's tests bound what it offers,
    whatever else is in it; with no tier offering anything, nothing passes."""
    cluster = Cluster().node("n1", cpu=4)
    low = cluster.job("low", priority=1).tasks(1, status=R, node="n1").job
    high = cluster.job("high", priority=9).tasks(1).job
    victim, preemptor = next(iter(low.tasks.values())), next(iter(high.tasks.values()))
    mixed = cluster.open(two_tier_conf("  - name: drf\n  - name: priority\n", "  - name: gang\n"))
    keeps = mixed.preemptable_filter()
    assert keeps is not None and keeps(preemptor, victim) and not keeps(victim, preemptor)
    drf_only = cluster.open(two_tier_conf("  - name: drf\n", "  - name: priority\n"))
    assert drf_only.preemptable_filter() is None
    nothing = cluster.open(two_tier_conf("  - name: drf\n", "  - name: predicates\n"))
    reclaim_keeps = nothing.reclaimable_filter()
    assert reclaim_keeps is not None and not reclaim_keeps(preemptor, victim)


def test_the_state_eviction_keeps_verdicts_by_changes_with_every_change_and_commit() -> None:
    from kbatch.operators.scheduler.core.framework.statement import Statement

    cluster = Cluster().node("n1", cpu=4)
    cluster.job("run").tasks(2, status=R, node="n1")
    session = cluster.open(FULL)
    room = EvictableRoom(session)
    statement = Statement(session)
    before = room.state(statement.signature())
    mark = statement.mark()
    statement.evict(next(iter(session.jobs["default/run"].tasks.values())), "")
    during = room.state(statement.signature())
    statement.rollback(mark)
    assert during != before == room.state(statement.signature())
    room.committed()
    assert room.state(statement.signature()) != before


def test_a_failed_search_is_not_reused_for_a_preemptor_that_may_evict() -> None:
    """Alike tasks (one template) of jobs of different priority: the first finds no
    victim, the second (more important than the running job) must."""
    cluster = Cluster().node("n1", cpu=2)
    template = cluster.template(cpu=1)
    cluster.job("running", priority=5).tasks(2, cpu=1, status=R, node="n1")
    cluster.job("peer", priority=5, created=1.0).task(template)
    cluster.job("boss", priority=50, created=2.0).task(template)
    sent = run_actions(cluster.open(FULL), "preempt")
    assert [task for task, _ in sent.evictions] == ["running-1"]


def over_served_queue() -> Cluster:
    """Queue a holds 8 of 9 cpu and deserves 6 (weights 1:1; b asks for 3 in all): it
    may give back 2. Its gangs pair and twin are alike (two 1-cpu tasks: one answer for
    both, yes); wide (two 2-cpu tasks) is not (no). b's gang of 2 reclaims a pair's
    room."""
    cluster = Cluster().node("n1", cpu=5).node("n2", cpu=4).queue("a").queue("b")
    cluster.job("wide", queue="a", min_member=2).tasks(2, cpu=2, status=R, node="n1")
    cluster.job("pair", queue="a", min_member=2).tasks(2, cpu=1, status=R, node="n2")
    cluster.job("twin", queue="a", min_member=2).tasks(2, cpu=1, status=R, node="n2")
    cluster.job("filler", queue="b").tasks(1, cpu=1, status=R, node="n1")
    cluster.job("want", queue="b", min_member=2).tasks(2, cpu=1)
    return cluster


def test_alike_gangs_of_an_over_served_queue_get_the_answers_they_get_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast = run_actions(over_served_queue().open(FULL), "reclaim")
    with monkeypatch.context() as patched:
        without_shortcuts(patched)
        slow = run_actions(over_served_queue().open(FULL), "reclaim")
    assert fast.evictions == slow.evictions
    assert {task.rsplit("-", 1)[0] for task, _ in fast.evictions} in ({"pair"}, {"twin"})


@pytest.mark.parametrize("bound", ["bound_by_offered", "bound_by_what_may_go"])
@pytest.mark.parametrize("seed", SEEDS)
def test_nodes_bound_by_what_could_go_get_the_same_decisions(seed: int, bound: str) -> None:
    """A search tries only the nodes where what could go makes room: what the plugins
    could offer for the task (``Shortcuts.bound_by_offered``), and what the jobs above
    their minimum or allowed to go whole hold (``bound_by_what_may_go``). Either bound
    gives what trying every node where the rule's candidates could gives, the plan
    failing on the others."""
    bounded = decisions(run_actions(random_cluster(seed).open(FULL)))
    unbounded = random_cluster(seed).open(FULL, shortcuts=Shortcuts().without(bound))
    assert decisions(run_actions(unbounded)) == bounded


@pytest.mark.parametrize("seed", SEEDS)
def test_queue_keys_kept_while_nothing_changed_give_the_same_turns(seed: int) -> None:
    """reclaim and preempt ask each queue's order key once while no task changes
    (``Shortcuts.preemptor_queue_keys``): as asking every queue before every job's turn;
    the attempts counted are the same too."""

    def turns(shortcuts: Shortcuts) -> tuple[object, ...]:
        session = random_cluster(seed).open(FULL, shortcuts=shortcuts)
        sent = run_actions(session)
        return (*decisions(sent), session.stats.preemption_attempts)

    kept = turns(Shortcuts())
    assert turns(Shortcuts().without("preemptor_queue_keys")) == kept


def test_queue_turns_follow_a_change_of_shares_between_jobs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kept queue keys are asked again once a task changes: two queues alike, the first
    job's task placed between turns puts the other queue first; with nothing changed
    each queue is asked once, not once per job."""
    cluster = Cluster().node("n1", cpu=8).queue("qa").queue("qb")
    for name, queue in (("a1", "qa"), ("a2", "qa"), ("b1", "qb"), ("b2", "qb")):
        cluster.job(name, queue=queue).tasks(1, cpu=1)
    session = cluster.open(FULL)
    asked = []
    real = session.queue_order_key

    def counted(queue, next_job=None):  # type: ignore[no-untyped-def]
        asked.append(queue.name)
        return real(queue, next_job)

    monkeypatch.setattr(session, "queue_order_key", counted)
    jobs = sorted(session.jobs_to_place(), key=lambda job: job.uid)
    turns = preemptors.jobs_by_queue(session, jobs)
    first = next(turns)
    assert first.queue == "qa" and sorted(asked) == ["qa", "qb"]
    task = next(iter(first.tasks.values()))
    session.set_status(task, TaskStatus.ALLOCATED, 0)  # qa now holds something
    assert [job.uid for job in turns] == ["default/b1", "default/b2", "default/a2"]
    assert len(asked) == 4  # asked again once after the change, then kept
