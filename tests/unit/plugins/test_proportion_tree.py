"""proportion over a queue tree (DESIGN §14): the tree's deserved shares, and allocate,
enqueue and reclaim asking every queue on a leaf's path."""

import numpy as np

from builders import Cluster, run_actions, vec
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.actions import reclaim
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.tiers import Vote
from kbatch.operators.scheduler.core.plugins.proportion_tree import is_tree

RECLAIM = """
actions: "enqueue, reclaim, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def tree(cpu: float = 12, **extra: dict) -> Cluster:
    """team-a {a1, a2} and team-b {b1}, weight 1 each, on one node of ``cpu``; ``extra``:
    by queue, fields to set on its QueueInfo."""
    cluster = Cluster().node("n1", cpu=cpu, memory=64)
    parents = {"team-a": None, "team-b": None, "a1": "team-a", "a2": "team-a", "b1": "team-b"}
    for name, parent in parents.items():
        cluster.queue(name)
        cluster.queues[name].parent = parent
        for field, value in extra.get(name.replace("-", "_"), {}).items():
            setattr(cluster.queues[name], field, value)
    return cluster


def cpu_of(array: np.ndarray | None) -> float:
    assert array is not None
    return float(array[0]) / 1000


def test_flat_queues_are_not_a_tree() -> None:
    cluster = Cluster().queue("a").queue("b")
    assert not is_tree(cluster.queues)
    cluster.queues["b"].guarantee = vec(1)
    assert is_tree(cluster.queues)


def test_a_siblings_unused_share_stays_in_the_team_and_parents_show_their_subtree() -> None:
    cluster = tree()
    cluster.job("ja1", queue="a1").tasks(8, cpu=1)
    cluster.job("ja2", queue="a2").tasks(1, cpu=1)
    cluster.job("jb1", queue="b1").tasks(3, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("jb1x", queue="b1").tasks(8, cpu=1)
    session = cluster.open()
    deserved = {n: cpu_of(q.deserved) for n, q in session.queues.items()}
    assert deserved == {"default": 0, "team-a": 6, "team-b": 6, "a1": 5, "a2": 1, "b1": 6}
    assert cpu_of(session.queues["team-b"].allocated) == 3
    assert cpu_of(session.queues["team-a"].request) == 9


def test_a_leaf_is_overused_when_an_ancestor_is() -> None:
    cluster = tree()
    cluster.job("ja1", queue="a1").tasks(7, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("ja2", queue="a2").tasks(1, cpu=1)
    cluster.job("jb1", queue="b1").tasks(8, cpu=1)
    session = cluster.open()
    # team-a holds 7 of its 6; a2 holds nothing of its 1 and still waits
    assert session.overused(session.queues["team-a"])
    assert session.overused(session.queues["a2"])
    assert not session.overused(session.queues["b1"])


def test_a_parents_capability_caps_what_its_leaves_may_place() -> None:
    cap = vec(4) + np.array([0, np.inf, np.inf, np.inf])
    for held, allowed in ((3, True), (4, False)):
        cluster = tree(team_a={"capability": cap})
        cluster.job("ja1", queue="a1").tasks(held, cpu=1, status=TaskStatus.RUNNING, node="n1")
        cluster.job("ja2", queue="a2").tasks(1, cpu=1)
        session = cluster.open()
        [task] = session.jobs["default/ja2"].tasks.values()
        assert session.allocatable(session.queues["a2"], task) is allowed


def test_no_placement_eats_into_another_subtrees_unused_guarantee() -> None:
    cluster = tree(cpu=8, team_a={"guarantee": vec(4)})
    cluster.job("jb1", queue="b1").tasks(4, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("jb2", queue="b1").tasks(1, cpu=1)
    cluster.job("ja1", queue="a1").tasks(1, cpu=1)
    session = cluster.open()
    [b_task] = session.jobs["default/jb2"].tasks.values()
    [a_task] = session.jobs["default/ja1"].tasks.values()
    assert not session.allocatable(session.queues["b1"], b_task)  # 4 free, all team-a's
    assert session.allocatable(session.queues["a1"], a_task)  # its own guarantee
    assert cpu_of(session.queues["team-a"].deserved) == 4  # kept while idle


def test_enqueue_stops_at_an_ancestors_capability_and_admits_within_deserved() -> None:
    cap = vec(4) + np.array([0, np.inf, np.inf, np.inf])
    cluster = tree(team_a={"capability": cap})
    cluster.job("ja1", queue="a1").tasks(3, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("big", queue="a2", min_resources=vec(2, 1), phase=PodGroupPhase.PENDING)
    cluster.job("jb1", queue="b1").tasks(9, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("small", queue="a2", min_resources=vec(1, 1), phase=PodGroupPhase.PENDING)
    session = cluster.open()
    vote, why = session.job_enqueueable(session.jobs["default/big"])
    assert (vote, why) == (Vote.REJECT, "queue team-a would exceed its capability")
    # the cluster is full, but team-a and a2 stay within their deserved shares:
    # admitted, for reclaim to make the room
    vote, _ = session.job_enqueueable(session.jobs["default/small"])
    assert vote is Vote.PERMIT


def test_enqueue_refuses_a_group_in_a_queue_with_children() -> None:
    cluster = tree()
    cluster.job("jt", queue="team-a", min_resources=vec(1, 1))
    cluster.job("ja1", queue="a1").tasks(1, cpu=1)
    session = cluster.open()
    vote, why = session.job_enqueueable(session.jobs["default/jt"])
    assert vote is Vote.REJECT and "team-a has child queues (a1, a2)" in why


def test_a_leaf_reclaims_only_up_to_its_own_deserved_share() -> None:
    cluster = tree()
    cluster.job("ja1", queue="a1").tasks(3, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("ja2", queue="a2").tasks(3, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("ja2x", queue="a2").tasks(1, cpu=1)
    cluster.job("jb1", queue="b1").tasks(6, cpu=1, status=TaskStatus.RUNNING, node="n1")
    session = cluster.open(RECLAIM)
    # a2 holds its 3 of team-a's 6
    [task] = session.jobs["default/ja2x"].tasks.values()
    assert not session.may_reclaim_for(session.queues["a2"], task)


def may_lose(session, reclaimer_job: str, victim_job: str) -> bool:
    """Would reclaim let a task of ``victim_job`` go for ``reclaimer_job``'s next task?"""
    [reclaimer, *_] = session.jobs[reclaimer_job].tasks.values()
    assert session.may_reclaim_for(session.queues[session.jobs[reclaimer_job].queue], reclaimer)
    victims = list(session.jobs[victim_job].tasks.values())
    queue = session.queues[session.jobs[victim_job].queue]
    return session.overused(queue) and session.may_lose(queue, victims[0])


def test_a_sibling_gives_back_inside_a_team_at_its_share_and_a_cousin_does_not() -> None:
    cluster = tree()
    cluster.job("ja1", queue="a1").tasks(6, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("ja2", queue="a2").tasks(3, cpu=1)
    cluster.job("jb1", queue="b1").tasks(7, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("jb2", queue="b1").tasks(1, cpu=1)
    session = cluster.open(RECLAIM)
    # deserved: team-a 6 (a1 3, a2 3), team-b 6; team-a holds its 6, b1 7
    # a1 holds 6 of its 3: it gives to its sibling, team-a keeping its 6 as a whole
    assert may_lose(session, "default/ja2", "default/ja1")
    # b1 is over its share too, but from a cousin team-a would go over its 6
    assert not may_lose(session, "default/ja2", "default/jb1")


def test_a_victim_keeps_its_teams_share_when_a_cousin_reclaims() -> None:
    cluster = tree(cpu=12)
    cluster.queues["c1"] = cluster.queues["b1"].__class__("c1", 1, created=99.0)
    cluster.job("ja1", queue="a1").tasks(5, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("ja2", queue="a2").tasks(1, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("jb1", queue="b1").tasks(6, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("jc1", queue="c1").tasks(2, cpu=1)
    session = cluster.open(RECLAIM)
    # deserved: team-a 5 (a1 4, a2 1), team-b 5, c1 2; a1 holds 5 of its 4, team-a 6
    assert may_lose(session, "default/jc1", "default/ja1")
    # a1 alone (over its 4 by one) could give a second, but team-a would go below 5
    cluster2 = tree(cpu=12)
    cluster2.queues["c1"] = cluster2.queues["b1"].__class__("c1", 1, created=99.0)
    cluster2.job("ja1", queue="a1").tasks(5, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster2.job("ja2", queue="a2").tasks(1, cpu=1)
    cluster2.job("jb1", queue="b1").tasks(6, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster2.job("jc1", queue="c1").tasks(2, cpu=1)
    session = cluster2.open(RECLAIM)
    # team-a 5 (a1 4, a2 1), holds 5 = its share: a1 over by one, yet not for a cousin
    assert not may_lose(session, "default/jc1", "default/ja1")
    # for its sibling a2, the room stays in the team: a1 may give it
    assert may_lose(session, "default/ja2", "default/ja1")


def test_reclaim_rings_put_siblings_before_cousins() -> None:
    cluster = tree()
    cluster.queues["a3"] = cluster.queues["a1"].__class__("a3", 1, created=99.0, parent="team-a")
    session = cluster.open()
    rings = reclaim._kinship(session, "a1")
    assert rings is not None
    assert rings["a2"] == rings["a3"] == 0
    assert rings["b1"] == 1
    assert reclaim._kinship(Cluster().queue("x").queue("y").open(), "x") is None


def test_a_parents_status_counts_its_subtrees_groups() -> None:
    cluster = tree()
    cluster.job("ja1", queue="a1").tasks(2, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("ja2", queue="a2").tasks(2, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("jb1", queue="b1", phase=PodGroupPhase.PENDING).tasks(1, cpu=100)
    statuses = run_actions(cluster.open(), "allocate").queues
    assert (statuses["team-a"].running, statuses["team-a"].pending) == (2, 0)
    assert (statuses["team-b"].running, statuses["team-b"].pending) == (0, 1)
    assert statuses["team-a"].allocated["cpu"] == "4"
    assert statuses["a1"].running == 1


def waiting_message(cluster: Cluster, group: str) -> str:
    status = run_actions(cluster.open(), "allocate").pod_groups[f"default/{group}"]
    [condition] = [c for c in status.conditions if c.type.value == "Unschedulable"]
    return condition.message


def test_a_group_held_back_by_an_ancestors_capability_is_told_which() -> None:
    cap = vec(4) + np.array([0, np.inf, np.inf, np.inf])
    cluster = tree(team_a={"capability": cap})
    cluster.job("ja1", queue="a1").tasks(4, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("ja2", queue="a2").tasks(1, cpu=1)
    assert "team-a is at its capability cpu 4" in waiting_message(cluster, "ja2")


def test_a_group_held_back_by_an_ancestors_share_is_told_which() -> None:
    cluster = tree()
    cluster.job("ja1", queue="a1").tasks(7, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("ja2", queue="a2").tasks(1, cpu=1)
    cluster.job("jb1", queue="b1").tasks(8, cpu=1)
    assert "team-a is at its deserved share cpu 6" in waiting_message(cluster, "ja2")
