"""priority, drf and conformance: orders and victim rules."""

import pytest

from builders import Cluster
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.plugins import conformance

R = TaskStatus.RUNNING


def test_priority_orders_jobs_and_tasks() -> None:
    cluster = Cluster().node("n1")
    cluster.job("low", priority=1, created=1.0).tasks(1)
    high = cluster.job("high", priority=100, created=2.0)
    high.tasks(1, priority=5).tasks(1, priority=50)
    session = cluster.open()
    low_job, high_job = session.jobs["default/low"], session.jobs["default/high"]
    assert sorted([low_job, high_job], key=session.job_order_key) == [high_job, low_job]
    tasks = sorted(high_job.tasks.values(), key=session.task_order_key)
    assert [t.priority for t in tasks] == [50, 5]


def preempt_setup(preemptor_priority: int, victim_priority: int):
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("victim", priority=victim_priority).tasks(2, status=R, node="n1")
    cluster.job("preemptor", priority=preemptor_priority).tasks(1)
    session = cluster.open('actions: "allocate"\ntiers:\n- plugins:\n  - name: priority\n')
    preemptor = next(iter(session.jobs["default/preemptor"].tasks.values()))
    return session, preemptor, list(session.jobs["default/victim"].tasks.values())


def test_priority_never_preempts_a_higher_or_equal_job() -> None:
    session, preemptor, victims = preempt_setup(10, 10)
    assert session.preemptable(preemptor, victims) == []
    session, preemptor, victims = preempt_setup(10, 1)
    assert session.preemptable(preemptor, victims) == victims


def test_drf_orders_by_dominant_share_and_preempts_only_while_share_stays_below() -> None:
    cluster = Cluster().node("n1", cpu=10, memory=10)
    cluster.job("fat", created=1.0).tasks(4, cpu=1, memory=1, status=R, node="n1")
    cluster.job("thin", created=2.0).tasks(1, cpu=1, memory=1, status=R, node="n1").tasks(1)
    session = cluster.open('actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n')
    fat, thin = session.jobs["default/fat"], session.jobs["default/thin"]
    assert sorted([fat, thin], key=session.job_order_key) == [thin, fat]
    preemptor = thin.tasks_with(TaskStatus.PENDING)[0]
    # thin would hold 2/10; fat keeps 3/10, 2/10, 1/10 after one, two, three victims
    assert len(session.preemptable(preemptor, list(fat.tasks.values()))) == 1


def test_conformance_shields_critical_and_kube_system_pods() -> None:
    cluster = Cluster().node("n1", cpu=8)
    cluster.job("sys", namespace="kube-system").tasks(1, status=R, node="n1")
    cluster.job("crit").tasks(1, status=R, node="n1", priority_class_name="system-node-critical")
    cluster.job("plain").tasks(1, status=R, node="n1")
    cluster.job("preemptor").tasks(1)
    session = cluster.open('actions: "allocate"\ntiers:\n- plugins:\n  - name: conformance\n')
    candidates = [
        t for j in session.jobs.values() if j.name != "preemptor" for t in j.tasks.values()
    ]
    preemptor = next(iter(session.jobs["default/preemptor"].tasks.values()))
    assert [t.name for t in session.preemptable(preemptor, candidates)] == ["plain-0"]
    assert [t.name for t in session.reclaimable(preemptor, candidates)] == ["plain-0"]
    assert not conformance.evictable(candidates[0])


@pytest.mark.parametrize(("priority", "cpu"), [(1, 0), (2, 1), (5, 1), (6, 6), (10, 8)], ids=str)
def test_preemptible_room_is_what_strictly_lower_priority_jobs_of_the_queue_hold(
    priority: int, cpu: float
) -> None:
    from kbatch.operators.scheduler.core.plugins.priority import PreemptibleRoom

    cluster = Cluster().node("n1", cpu=16).queue("q").queue("other")
    for name, job_priority, count in (("a", 1, 1), ("b", 5, 2), ("c", 5, 3), ("d", 9, 2)):
        cluster.job(name, queue="q", priority=job_priority).tasks(count, cpu=1, status=R, node="n1")
    cluster.job("elsewhere", queue="other", priority=0).tasks(4, cpu=1, status=R, node="n1")
    room = PreemptibleRoom(cluster.open())
    assert room.held_below("q", priority)[0] == cpu * 1000  # millicores
    assert not room.held_below("empty", priority).any()
