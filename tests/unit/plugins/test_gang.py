"""gang: validity, readiness, order, victims that never break a gang, conditions in words."""

import pytest

from builders import Cluster, run_actions
from kbatch.api.podgroup import ConditionType
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.plugins import gang

R = TaskStatus.RUNNING
GANG_ONLY = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
P = TaskStatus.PENDING


def job_with(min_member: int, statuses: list[TaskStatus]):
    cluster = Cluster().node("n1", cpu=16)
    builder = cluster.job("j", min_member=min_member)
    for status in statuses:
        builder.tasks(1, status=status, node="n1" if status is R else None)
    return cluster.open(), cluster.jobs["default/j"]


@pytest.mark.parametrize(
    ("min_member", "statuses", "valid", "ready"),
    [
        (2, [P, P], True, False),
        (3, [P, P], False, False),
        (2, [R, R], True, True),
        (2, [R, TaskStatus.SUCCEEDED], True, True),
        (2, [R, TaskStatus.FAILED, P], True, False),
        (2, [R, TaskStatus.FAILED], False, False),
    ],
)
def test_valid_and_ready(min_member: int, statuses: list, valid: bool, ready: bool) -> None:
    _, job = job_with(min_member, statuses)
    assert (gang.valid(job) is None) is valid
    assert gang.ready(job) is ready


def test_invalid_job_gets_a_condition_saying_why() -> None:
    session, _ = job_with(6, [P, P, P])
    sent = run_actions(session, "allocate")
    (cond,) = sent.pod_groups["default/j"].conditions
    assert (cond.type, cond.status, cond.reason) == (
        ConditionType.UNSCHEDULABLE,
        "True",
        "NotEnoughTasks",
    )
    assert cond.message == "3/6 tasks in gang: minMember is 6 but only 3 pod(s) exist that can run"
    assert sent.binds == []


def test_not_ready_jobs_go_first() -> None:
    cluster = Cluster().node("n1", cpu=16)
    cluster.job("ready", created=1.0).tasks(1, status=R, node="n1").tasks(1)
    cluster.job("waiting", created=2.0).tasks(1)
    session = cluster.open()
    ready, waiting = session.jobs["default/ready"], session.jobs["default/waiting"]
    assert sorted([ready, waiting], key=session.job_order_key) == [waiting, ready]


@pytest.mark.parametrize(
    ("min_member", "running", "offered", "expected"),
    [
        (2, 4, 3, 2),  # two spare above minMember
        (2, 2, 1, 1),  # offered: the eviction takes the rest of the gang too, or none
        (2, 2, 2, 2),  # the whole gang at once is allowed
        (1, 1, 1, 1),  # a group of one
    ],
)
def test_victims_are_spare_tasks_or_a_whole_gang(
    min_member: int, running: int, offered: int, expected: int
) -> None:
    cluster = Cluster().node("n1", cpu=16)
    cluster.job("victim", min_member=min_member).tasks(running, status=R, node="n1")
    cluster.job("preemptor").tasks(1)
    session = cluster.open(GANG_ONLY)
    tasks = list(session.jobs["default/victim"].tasks.values())[:offered]
    preemptor = next(iter(session.jobs["default/preemptor"].tasks.values()))
    assert len(session.preemptable(preemptor, tasks)) == expected


def test_the_spare_victims_of_a_gang_are_its_least_important_tasks() -> None:
    cluster = Cluster().node("n1", cpu=16)
    job = cluster.job("victim", min_member=2)
    job.tasks(1, status=R, node="n1", priority=1)
    job.tasks(2, status=R, node="n1", priority=100)
    job.tasks(1, status=R, node="n1", priority=2)
    cluster.job("preemptor").tasks(1)
    session = cluster.open(GANG_ONLY + "- plugins:\n  - name: priority\n")  # task order
    tasks = list(session.jobs["default/victim"].tasks.values())
    preemptor = next(iter(session.jobs["default/preemptor"].tasks.values()))
    assert sorted(t.name for t in session.preemptable(preemptor, tasks)) == ["victim-0", "victim-3"]


def test_victims_already_taken_this_session_count() -> None:
    from kbatch.operators.scheduler.core.framework.statement import Statement

    cluster = Cluster().node("n1", cpu=16)
    cluster.job("victim", min_member=2).tasks(3, status=R, node="n1")
    cluster.job("preemptor").tasks(1)
    session = cluster.open(GANG_ONLY)
    first, *rest = session.jobs["default/victim"].tasks.values()
    Statement(session).evict(first, "preempted")
    preemptor = next(iter(session.jobs["default/preemptor"].tasks.values()))
    # no spare left: what is offered of it is offered as a part of the whole gang
    assert session.preemptable(preemptor, rest[:1]) == rest[:1]
    job = session.jobs["default/victim"]
    assert not job.can_lose(rest[0]) and not job.below_minimum()


def test_unschedulable_condition_names_counts_and_reasons_then_clears() -> None:
    cluster = Cluster().node("n1", cpu=2).node("n2", cpu=2, labels={"zone": "b"})
    cluster.job("big", min_member=3).tasks(3, cpu=2, node_selector={"zone": "b"})
    sent = run_actions(cluster.open(), "allocate")
    (cond,) = sent.pod_groups["default/big"].conditions
    assert cond.type is ConditionType.UNSCHEDULABLE and cond.status == "True"
    assert (
        cond.message
        == "3/3 tasks in gang unschedulable: 0/2 nodes are available: 1 Insufficient cpu, "
        "1 node(s) didn't match node selector; 3 pods of cpu 2, memory 1Gi never fit on the "
        "nodes, even empty: they hold 1 of them (1 node(s) didn't match node selector)"
    )
    events = {(ref.name, reason) for ref, _, reason, _ in sent.recorded}
    assert ("big", "Unschedulable") in events and ("big-0", "FailedScheduling") in events
