"""reserve: room kept for a queue's head job only while its queue is within its share."""

from builders import Cluster, run_actions
from kbatch.config import KUBE_BATCH_CONF
from kbatch.operators.scheduler.core.framework.info import TaskStatus

R = TaskStatus.RUNNING


def two_full_nodes() -> Cluster:
    """Queue a's eight 1-cpu tasks fill two 4-cpu nodes (more on n1's side is in use:
    n2 has one task fewer and a free core)."""
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4).queue("a").queue("b")
    small = cluster.job("small", queue="a", created=1.0)
    small.tasks(4, cpu=1, status=R, node="n1").tasks(3, cpu=1, status=R, node="n2")
    return cluster


def test_the_head_of_a_queue_within_its_share_keeps_the_node_cheapest_to_drain() -> None:
    cluster = two_full_nodes()
    cluster.job("big", queue="b", created=2.0).tasks(1, cpu=4)
    sent = run_actions(cluster.open(), "allocate", "reserve")
    assert sent.binds == []
    assert sent.nominations == {"big-0": "n2"}, "n2 has less in the way"


def test_another_schedulers_pod_is_not_counted_on_to_end() -> None:
    """Half of n2's free core is taken by a pod that is not ours (it may never end):
    drained, n2 holds 3.5 cpu, though it has less in the way."""
    cluster = two_full_nodes().pod("theirs", node="n2", cpu=0.5)
    cluster.job("big", queue="b", created=2.0).tasks(1, cpu=4)
    sent = run_actions(cluster.open(), "allocate", "reserve")
    assert sent.nominations == {"big-0": "n1"}


def test_a_queue_over_its_share_keeps_no_room() -> None:
    """a holds 7 of its deserved 4: its own whole-node job keeps nothing, b's does."""
    cluster = two_full_nodes()
    cluster.job("a-big", queue="a", created=2.0).tasks(1, cpu=4)
    cluster.job("b-big", queue="b", created=3.0).tasks(1, cpu=4)
    sent = run_actions(cluster.open(), "allocate", "reserve")
    assert sent.nominations == {"b-big-0": "n2"}


def test_room_no_session_keeps_again_is_given_back() -> None:
    """Kept in one session (the pod's nominated node), not kept again in the next once
    the job is no longer its queue's head: the nomination is cleared."""
    cluster = two_full_nodes()
    cluster.job("big", queue="b", created=2.0).tasks(1, cpu=4, nominated="n2")
    cluster.job("first", queue="b", created=1.5).tasks(1, cpu=5)  # now the head; fits nowhere
    sent = run_actions(cluster.open(), "allocate", "reserve")
    assert sent.nominations.get("big-0", "kept") is None


def test_room_a_preemptor_was_promised_this_session_is_not_kept_for_another() -> None:
    """preempt pipelines high-1 on n1 (5 of its 8 cpu, once its victims are gone): that
    room is high-1's, nominated to it as the session ends. reserve must not keep it for
    the queue's head, big, as well: two nominations that do not both fit n1 would wait
    for each other for ever (found by tests/property/test_invariants.py). high is ready
    (high-0 runs on n2), so big is the head."""
    full = KUBE_BATCH_CONF.replace('"enqueue, allocate, backfill"', '"allocate, preempt, reserve"')
    cluster = Cluster().node("n1", cpu=8).node("n2", cpu=1)
    for name in ("low", "lower"):
        cluster.job(name, priority=1, created=1.0).tasks(1, cpu=4, status=R, node="n1")
    cluster.job("big", priority=1, created=2.0).tasks(1, cpu=4)
    high = cluster.job("high", priority=100, created=3.0)
    high.tasks(1, cpu=1, status=R, node="n2").tasks(1, cpu=5)
    sent = run_actions(cluster.open(full), "allocate", "preempt", "reserve")
    assert sorted(victim for victim, _ in sent.evictions) == ["low-0", "lower-0"]
    assert sent.nominations == {"high-1": "n1"}


def test_a_gang_that_requires_one_rack_has_its_room_kept_in_one_rack() -> None:
    """Racks r1 (n1, n2) and r2 (n3, n4), 4 cpu each, full. The nodes least in the way
    are n1 (r1) and n3 (r2): room kept there, across racks, would never make a gang of
    two whole nodes that requires one rack ready. It is kept in r2, whose nodes have
    less in the way in all than r1's (n1 and n2: 3 and 4 cpu still to be freed)."""
    from kbatch.config import DEFAULT_CONF
    from kbatch.operators.scheduler.core.framework.info import REQUIRED, TopologyRequest

    cluster = Cluster().queue("a").queue("b")
    for name, rack in (("n1", "r1"), ("n2", "r1"), ("n3", "r2"), ("n4", "r2")):
        cluster.node(name, cpu=4, labels={"kbatch.io/rack": rack})
    small = cluster.job("small", queue="a", created=1.0)
    for node, running in (("n1", 3), ("n2", 4), ("n3", 3), ("n4", 3)):
        small.tasks(running, cpu=1, status=R, node=node)
    big = cluster.job("big", queue="b", min_member=2, created=2.0).tasks(2, cpu=4).job
    big.topology = TopologyRequest(REQUIRED, "kbatch.io/rack")
    conf = DEFAULT_CONF + "\ntopology:\n  levels: [kbatch.io/rack]\n"
    sent = run_actions(cluster.open(conf), "allocate", "reserve")
    assert sent.nominations == {"big-0": "n3", "big-1": "n4"}
