"""Statement: commit sends, discard undoes in the session and sends nothing."""

import numpy as np

from builders import Cluster, fake
from kbatch.operators.scheduler.core.framework.info import NO_NODE, TaskStatus
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
