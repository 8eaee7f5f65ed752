"""flow over a queue tree (DESIGN §14): a flow per queue at every level, queues in order
at each level by flow over that level's fair share."""

from builders import Cluster
from kbatch.operators.scheduler.core.framework.info import TaskStatus

FLOW = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}]
- plugins: [{name: flow, arguments: {halfLife: "0s"}}, {name: predicates}, {name: proportion}]
"""


def teams() -> Cluster:
    """team-a {a1} holds 4 cpu; team-b {b1, b2}: b2 holds 6, b1 nothing."""
    cluster = Cluster().node("n1", cpu=16)
    parents = {"team-a": None, "team-b": None, "a1": "team-a", "b1": "team-b", "b2": "team-b"}
    for name, parent in parents.items():
        cluster.queue(name)
        cluster.queues[name].parent = parent
    cluster.job("ja1", queue="a1").tasks(4, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("jb2", queue="b2").tasks(6, cpu=1, status=TaskStatus.RUNNING, node="n1")
    for leaf in ("a1", "b1", "b2"):
        cluster.job(f"more-{leaf}", queue=leaf).tasks(1, cpu=1)
    return cluster


def test_the_team_with_less_flow_over_its_share_goes_first_then_its_leaves() -> None:
    session = teams().open(FLOW)
    key = {name: session.queue_order_key(session.queues[name]) for name in ("a1", "b1", "b2")}
    # team-a holds 4 of its half, team-b 6 of its: a1 goes before b1, though b1 holds
    # nothing (flat, b1 would go first); inside team-b, b1 before b2
    assert key["a1"] < key["b1"] < key["b2"]


def test_each_queue_has_a_flow_at_every_level() -> None:
    session = teams().open(FLOW)
    session.close()
    flows = {name: session.queues[name].flow for name in ("team-a", "team-b", "b1", "b2")}
    assert flows == {"team-a": 4.0, "team-b": 6.0, "b1": 0.0, "b2": 6.0}
