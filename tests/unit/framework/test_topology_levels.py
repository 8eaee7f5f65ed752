"""topology.Levels: a level's domains by number, and the per-node copies and per-domain
sums kept between gangs — always what working them out afresh over every node gives."""

import numpy as np

from builders import Cluster
from kbatch.operators.scheduler.core.framework import topology
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement


def session_with_racks() -> Session:
    """Six nodes of 4 cpu in racks b, a, b, (none), a, c; a job of five 1-cpu tasks."""
    cluster = Cluster()
    for i, rack in enumerate(["b", "a", "b", None, "a", "c"]):
        cluster.node(f"n{i}", cpu=4, memory=16, labels={"rack": rack} if rack else {})
    cluster.job("j", min_member=5).tasks(5, cpu=1, memory=1)
    return cluster.open()


def test_members_are_each_domains_nodes_in_node_order() -> None:
    levels = topology.Levels(session_with_racks().nodes, ["rack"])
    ids, names = levels.ids("rack")
    assert names == ["a", "b", "c"]
    members = levels.members("rack")
    assert [m.tolist() for m in members] == [[1, 4], [0, 2], [5]]
    for number, nodes in enumerate(members):
        assert np.array_equal(nodes, np.flatnonzero(ids == number))


def test_copies_follow_the_nodes_that_changed_and_ok() -> None:
    session = session_with_racks()
    nodes = session.nodes
    levels = topology.Levels(nodes, ["rack"])
    tasks = list(session.jobs["default/j"].tasks.values())
    largest = tasks[0].request
    ok = np.ones(len(nodes), dtype=bool)

    def afresh(ok: np.ndarray) -> list[int]:
        return topology._copies(largest, ok, nodes.future).tolist()

    def holds(ok: np.ndarray) -> list[int]:
        """Per rack a, b, c; the node without a rack counts nowhere."""
        return levels.holds("rack", levels.copies(largest, ok)).tolist()

    assert levels.copies(largest, ok).tolist() == afresh(ok) == [4] * 6
    assert holds(ok) == [8, 8, 4]
    statement = Statement(session)
    for task, node in zip(tasks, [0, 0, 0, 2, 5], strict=True):
        statement.place(task, node, pipelined=False)
    assert levels.copies(largest, ok).tolist() == afresh(ok) == [1, 4, 3, 4, 4, 3]
    assert holds(ok) == [8, 4, 3]
    ok[4] = False
    assert levels.copies(largest, ok).tolist() == afresh(ok) == [1, 4, 3, 4, 0, 3]
    assert holds(ok) == [4, 4, 3]
    statement.discard()
    ok[4] = True
    assert levels.copies(largest, ok).tolist() == afresh(ok) == [4] * 6
    assert holds(ok) == [8, 8, 4]
