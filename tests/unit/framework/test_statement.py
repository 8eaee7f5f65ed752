"""Statement: commit sends, discard undoes in the session and sends nothing."""

import numpy as np

from builders import Cluster, FakeCluster, fake
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.info import NO_NODE, TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement


def opened():
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("j", min_member=2).tasks(2, cpu=1)
    cluster.job("r").tasks(1, cpu=2, status=TaskStatus.RUNNING, node="n1")
    session = cluster.open()
    return session, session.jobs["default/j"], session.jobs["default/r"]


def test_commit_binds_allocations_and_sends_evictions() -> None:
    session, job, running = opened()
    a, b = job.tasks.values()
    victim = next(iter(running.tasks.values()))
    statement = Statement(session)
    statement.allocate(a, 0)
    statement.pipeline(b, 0)
    statement.evict(victim, "preempted")
    statement.commit()
    sent = fake(session)
    assert sent.binds == [("j-0", "n1")]  # pipelined tasks are never sent
    assert sent.evictions == [("r-0", "preempted")]
    assert a.status is TaskStatus.BINDING and b.status is TaskStatus.PIPELINED
    assert victim.status is TaskStatus.RELEASING


def test_discard_restores_session_exactly() -> None:
    session, job, running = opened()
    before = (
        session.nodes.used.copy(),
        session.nodes.releasing.copy(),
        session.nodes.pipelined.copy(),
    )
    a, b = job.tasks.values()
    victim = next(iter(running.tasks.values()))
    statement = Statement(session)
    statement.allocate(a, 0)
    statement.evict(victim, "x")
    statement.pipeline(b, 0)
    statement.discard()
    for was, now in zip(
        before, (session.nodes.used, session.nodes.releasing, session.nodes.pipelined), strict=True
    ):
        np.testing.assert_allclose(was, now)
    assert (a.status, a.node) == (TaskStatus.PENDING, NO_NODE)
    assert (victim.status, victim.node) == (TaskStatus.RUNNING, 0)
    assert job.counts[TaskStatus.PENDING] == 2 and running.counts[TaskStatus.RUNNING] == 1
    assert fake(session).binds == [] and fake(session).evictions == []


def drained() -> tuple[Session, TaskInfo, TaskInfo]:
    """Two 4-cpu nodes, each full; two pending 4-cpu tasks, ``moved`` with room kept on
    n1 from an earlier session, ``fresh`` with none."""
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4)
    busy = cluster.job("busy")
    busy.tasks(1, cpu=4, status=TaskStatus.RUNNING, node="n1")
    busy.tasks(1, cpu=4, status=TaskStatus.RUNNING, node="n2")
    cluster.job("moved").tasks(1, cpu=4, nominated="n1")
    cluster.job("fresh").tasks(1, cpu=4)
    session = cluster.open()
    (moved,) = session.jobs["default/moved"].tasks.values()
    (fresh,) = session.jobs["default/fresh"].tasks.values()
    return session, moved, fresh


def test_a_committed_drain_keeps_the_room_in_the_cluster_and_past_the_close() -> None:
    session, moved, fresh = drained()
    statement = Statement(session)
    statement.drain(moved, 1, "waiting for n2")
    statement.drain(fresh, 0, "waiting for n1")
    assert (session.nodes.nominated[:, 0] > 0).tolist() == [True, True]  # at once, here
    statement.commit()
    assert fake(session).nominations == {"moved-0": "n2", "fresh-0": "n1"}
    assert session.draining_reason(session.jobs["default/fresh"]) == "waiting for n1"
    sent = FakeCluster(outcome=runner.close_session(session))
    assert sent.nominations == {"moved-0": "n2", "fresh-0": "n1"}, "not expired at close"


def test_a_drain_on_the_node_already_kept_sends_nothing_new() -> None:
    session, moved, _ = drained()
    statement = Statement(session)
    statement.drain(moved, 0, "waiting for n1")
    statement.commit()
    assert fake(session).nominations == {}
    assert session.draining_reason(session.jobs["default/moved"]) == "waiting for n1"


def test_a_discarded_drain_gives_the_room_back_where_it_was_kept() -> None:
    session, moved, fresh = drained()
    before = session.nodes.nominated.copy()
    statement = Statement(session)
    statement.drain(moved, 1, "waiting for n2")
    statement.drain(fresh, 1, "waiting for n2")
    statement.discard()
    np.testing.assert_allclose(session.nodes.nominated, before)
    assert (moved.nominated, fresh.nominated) == (0, NO_NODE)
    assert session.nodes.kept == 1
    assert fake(session).nominations == {}
    assert session.draining_reason(session.jobs["default/moved"]) is None


def test_a_commit_tells_its_binds_together_and_a_discard_nothing() -> None:
    """A listener (``Session.committed_binds``) gets each commit's binds at once, in one
    call: a gang whole, before the session ends; the outcome lists them too."""
    session, job, running = opened()
    a, b = job.tasks.values()
    told: list[list[tuple[str, str]]] = []
    session.committed_binds = lambda binds: told.append([(x.task.name, x.node) for x in binds])
    discarded = Statement(session)
    discarded.allocate(a, 0)
    discarded.discard()
    evicting = Statement(session)
    evicting.evict(next(iter(running.tasks.values())), "preempted")
    evicting.commit()
    assert told == [], "no bind, nothing told"
    statement = Statement(session)
    statement.allocate(a, 0)
    statement.allocate(b, 0)
    statement.commit()
    assert told == [[("j-0", "n1"), ("j-1", "n1")]]
    assert fake(session).binds == [("j-0", "n1"), ("j-1", "n1")]
