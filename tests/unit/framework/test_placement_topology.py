"""``Placer.choose_alike(..., within=...)``: the fast path among a topology domain's nodes.

The randomised comparison with the straightforward argmax is in test_placement_fast.py;
these are the cases it meets only now and then, made certain: a template placed in a
domain and then anywhere (its two rankings must agree on the nodes the domain took), a
domain changed between calls, and a domain with no node for the task; and the look-ahead
over a whole domain switched off places the same.
"""

import numpy as np
import pytest

from builders import Cluster
from kbatch.bench import topology as bench_topology
from kbatch.bench.scheduling import CountingCluster, loaded_state, timed_session
from kbatch.operators.scheduler.core.framework import placement
from kbatch.operators.scheduler.core.framework.placement import Choice, Placer
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement

# Racks of two nodes: r0 = n0, n1; r1 = n2, n3. nodeorder prefers the emptier node.
R0, R1 = np.array([0, 1]), np.array([2, 3])


def cluster(gang: int, plain: int) -> tuple[Session, list, list]:
    """Four nodes of 4 cpu, a gang and a plain job of the same 1-cpu template."""
    built = Cluster()
    for i in range(4):
        built.node(f"n{i}", cpu=4, memory=16, labels={"rack": f"r{i // 2}"})
    template = built.template(cpu=1, memory=1)
    racked = built.job("racked", min_member=gang)
    anywhere = built.job("anywhere", min_member=plain)
    gang_tasks = [racked.task(template) for _ in range(gang)]
    plain_tasks = [anywhere.task(template) for _ in range(plain)]
    return built.open(), gang_tasks, plain_tasks


def place(session: Session, tasks: list, choices: list[Choice]) -> None:
    statement = Statement(session)
    for task, choice in zip(tasks, choices, strict=False):
        statement.place(task, choice.node, choice.pipelined)


def place_all(session: Session, placer: Placer, tasks: list, within: np.ndarray) -> list[int]:
    """Place ``tasks`` within a domain, as allocate does (however far each plan goes);
    their nodes, until one does not fit."""
    nodes: list[int] = []
    while len(nodes) < len(tasks):
        choices = placer.choose_alike(tasks[len(nodes) :], within=within)
        if not choices:
            break
        place(session, tasks[len(nodes) :], choices)
        nodes += [choice.node for choice in choices]
    return nodes


def test_nodes_taken_in_a_domain_are_ranked_anew_for_the_template_anywhere() -> None:
    session, gang, plain = cluster(gang=2, plain=2)
    placer = Placer(session)
    assert [c.node for c in placer.choose_alike(plain)] == [0, 1]  # the heap over all nodes
    in_rack = placer.choose_alike(gang, within=R0)
    assert [c.node for c in in_rack] == [0, 1]
    place(session, gang, in_rack)
    # n0 and n1 are fuller now: anywhere, the plain job goes to the empty n2 and n3.
    assert [c.node for c in placer.choose_alike(plain)] == [2, 3]


def test_a_task_placed_anywhere_moves_its_node_in_the_domain_ranking() -> None:
    session, gang, plain = cluster(gang=2, plain=1)
    placer = Placer(session)
    assert [c.node for c in placer.choose_alike(gang, within=R0)] == [0, 1]
    anywhere = placer.choose_alike(plain)
    assert anywhere == [Choice(0, pipelined=False)]
    place(session, plain, anywhere)
    # Within r0, n1 is the emptier now.
    assert placer.choose(gang[0], within=R0) == Choice(1, pipelined=False)


def test_another_domain_replaces_the_last() -> None:
    session, gang, _ = cluster(gang=3, plain=1)
    placer = Placer(session)
    assert place_all(session, placer, gang, within=R0) == [0, 1, 0]
    assert placer.choose(gang[0], within=R1) == Choice(2, pipelined=False)
    assert placer.choose(gang[0], within=R0) == Choice(1, pipelined=False)  # n1 has one task


def test_a_domain_with_no_room_answers_nothing() -> None:
    session, gang, _ = cluster(gang=9, plain=1)
    placer = Placer(session)
    assert sorted(place_all(session, placer, gang, within=R0)) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert placer.choose_alike(gang[8:], within=R0) == []
    assert placer.choose_alike(gang[8:], within=np.zeros(0, dtype=np.int64)) == []
    assert placer.choose(gang[8], within=R1) == Choice(2, pipelined=False)


def bench_binds(nodes: int, pods: int) -> dict[str, str]:
    """The binds of one ``kbatch bench --topology`` session (every gang prefers a rack)."""
    state = loaded_state(bench_topology.topology_objects(nodes, pods, prefer=True))
    cluster = CountingCluster(state.snapshot())
    timed_session(cluster, bench_topology.topology_conf())
    return cluster.bound


def test_looking_ahead_for_a_whole_domain_places_as_for_the_gang_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The look-ahead covers a domain's nodes beyond the gang's size (``_breadth``), for the
    next gang in the same rack: switched off (only as many nodes as tasks), the same binds."""
    wide = bench_binds(200, 2_000)
    monkeypatch.setattr(placement, "DOMAIN_LOOK_AHEAD", 0)
    assert bench_binds(200, 2_000) == wide
    assert len(wide) == 2_000
