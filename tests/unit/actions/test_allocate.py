"""allocate: gangs all or nothing, no deadlock, room freed by discards, pipelining."""

import pytest

from builders import Cluster, run_actions
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.info import TaskStatus

R = TaskStatus.RUNNING


def bound_jobs(binds: list[tuple[str, str]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for task, _ in binds:
        job = task.rsplit("-", 1)[0]
        counts[job] = counts.get(job, 0) + 1
    return counts


def test_a_gang_that_fits_is_bound_whole() -> None:
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4)
    cluster.job("qj", min_member=6).tasks(6, cpu=1)
    assert bound_jobs(run_actions(cluster.open(), "allocate").binds) == {"qj": 6}


def test_a_gang_that_does_not_fit_binds_nothing() -> None:
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("qj", min_member=5).tasks(5, cpu=1)
    assert run_actions(cluster.open(), "allocate").binds == []


def test_two_gangs_that_do_not_both_fit_never_deadlock() -> None:
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4)
    cluster.job("first", min_member=6, created=1.0).tasks(6, cpu=1)
    cluster.job("second", min_member=6, created=2.0).tasks(6, cpu=1)
    sent = run_actions(cluster.open(), "allocate")
    assert bound_jobs(sent.binds) == {"first": 6}
    assert sent.pod_groups["default/second"].conditions[0].status == "True"


@pytest.mark.parametrize("other", ["queue", "priority"])
def test_a_partly_placed_gang_is_completed_before_any_other_starts(other: str) -> None:
    """Half of a gang bound (its leader died mid-bind): the room it still needs goes to it,
    although another queue's turn (lower share) or a more important job comes first."""
    cluster = Cluster().node("n1", cpu=4).queue("a").queue("b")
    half = cluster.job("half", queue="a", min_member=4, created=2.0)
    half.tasks(2, cpu=1, status=R, node="n1").tasks(2, cpu=1)
    if other == "queue":
        cluster.job("new", queue="b", min_member=2, created=1.0).tasks(2, cpu=1)
    else:
        cluster.job("new", queue="a", min_member=2, priority=100, created=1.0).tasks(2, cpu=1)
    assert bound_jobs(run_actions(cluster.open(), "allocate").binds) == {"half": 2}


def test_a_discarded_gang_leaves_room_for_the_next_job() -> None:
    # kube-batch#514: the half-placed big gang kept its room until the session ended
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("big", min_member=8, created=1.0).tasks(8, cpu=1)
    cluster.job("small", min_member=4, created=2.0).tasks(4, cpu=1)
    assert bound_jobs(run_actions(cluster.open(), "allocate").binds) == {"small": 4}


def test_room_being_released_pipelines_without_binding() -> None:
    cluster = Cluster().node("n1", cpu=2)
    cluster.job("leaving").tasks(2, cpu=1, status=TaskStatus.RELEASING, node="n1")
    cluster.job("next", min_member=2).tasks(2, cpu=1)
    session = cluster.open()
    sent = run_actions(session, "allocate")
    assert sent.binds == []
    assert [t.status for t in session.jobs["default/next"].tasks.values()] == [
        TaskStatus.PIPELINED
    ] * 2


def test_queues_take_turns_by_share() -> None:
    cluster = Cluster().node("n1", cpu=4).queue("a").queue("b")
    cluster.job("ja", queue="a").tasks(4, cpu=1)
    cluster.job("jb", queue="b").tasks(4, cpu=1)
    assert bound_jobs(run_actions(cluster.open(), "allocate").binds) == {"ja": 2, "jb": 2}


def test_an_overused_queue_gets_nothing_more() -> None:
    cluster = Cluster().node("n1", cpu=8).queue("a").queue("b")
    cluster.job("ja", queue="a").tasks(5, cpu=1, status=R, node="n1").tasks(1, cpu=1)
    cluster.job("jb", queue="b").tasks(4, cpu=1)  # deserved: 4 cpu each; a holds 5
    assert bound_jobs(run_actions(cluster.open(), "allocate").binds) == {"jb": 3}


def test_best_effort_tasks_are_left_to_backfill() -> None:
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4)
    cluster.job("be", min_member=2).tasks(2, cpu=0, memory=0)
    session = cluster.open()
    assert run_actions(session, "allocate").binds == []
    cluster2 = Cluster().node("n1", cpu=4).node("n2", cpu=4)
    cluster2.job("be", min_member=2).tasks(2, cpu=0, memory=0)
    assert run_actions(cluster2.open(), "backfill").binds == [("be-0", "n1"), ("be-1", "n1")]


def mpi(cluster: Cluster, workers: int, min_member: int, cpu: float = 1) -> None:
    """An MPI-style gang: a launcher without requests beside ``workers`` that request cpu."""
    job = cluster.job("mpi", min_member=min_member)
    job.tasks(1, cpu=0, memory=0).tasks(workers, cpu=cpu)


def test_a_gang_mixing_best_effort_and_requested_tasks_is_bound_whole_by_allocate() -> None:
    cluster = Cluster().node("n1", cpu=4)
    mpi(cluster, workers=2, min_member=3)
    sent = run_actions(cluster.open(), "allocate")
    assert sorted(sent.binds) == [("mpi-0", "n1"), ("mpi-1", "n1"), ("mpi-2", "n1")]


def test_a_mixed_gang_that_cannot_become_ready_binds_nothing_in_allocate_or_backfill() -> None:
    cluster = Cluster().node("n1", cpu=1)
    mpi(cluster, workers=2, min_member=3)
    session = cluster.open()
    assert run_actions(session, "allocate", "backfill").binds == []
    assert [t.status for t in session.jobs["default/mpi"].tasks.values()] == [
        TaskStatus.PENDING
    ] * 3


def test_best_effort_tasks_of_a_job_ready_without_them_are_left_to_backfill() -> None:
    cluster = Cluster().node("n1", cpu=4)
    mpi(cluster, workers=2, min_member=2)
    session = cluster.open()
    assert sorted(run_actions(session, "allocate").binds) == [("mpi-1", "n1"), ("mpi-2", "n1")]
    assert session.jobs["default/mpi"].tasks_with(TaskStatus.PENDING)[0].name == "mpi-0"


def test_a_pipelined_gang_keeps_its_room_with_nothing_left_allocated() -> None:
    # An allocated but unsent task would count toward readiness for any later
    # commit, which could then bind the rest of the gang without it.
    cluster = Cluster().node("n1", cpu=2)
    cluster.job("leaving").tasks(1, cpu=1, status=TaskStatus.RELEASING, node="n1")
    cluster.job("gang", min_member=2).tasks(2, cpu=1)
    cluster.job("later").tasks(1, cpu=1)
    session = cluster.open()
    assert run_actions(session, "allocate").binds == []
    statuses = [t.status for t in session.jobs["default/gang"].tasks.values()]
    assert statuses == [TaskStatus.PIPELINED] * 2
    assert session.jobs["default/later"].tasks_with(TaskStatus.PENDING), "the room stays held"


def sent_count(statuses: list[TaskStatus]) -> int:
    sent = (TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.SUCCEEDED)
    return sum(status in sent for status in statuses)


@pytest.mark.parametrize("min_member", [2, 3, 4])
@pytest.mark.parametrize("best_effort", [0, 1, 2])
@pytest.mark.parametrize(
    "actions", [("allocate", "backfill"), ("backfill", "allocate", "backfill")]
)
def test_a_gang_is_never_half_bound_across_allocate_and_backfill(
    min_member: int, best_effort: int, actions: tuple[str, ...]
) -> None:
    # One requested task fits now, one only once the releasing pod is gone.
    cluster = Cluster().node("n1", cpu=2)
    cluster.job("leaving").tasks(1, cpu=1, status=TaskStatus.RELEASING, node="n1")
    cluster.job("g", min_member=min_member).tasks(2, cpu=1).tasks(best_effort, cpu=0, memory=0)
    session = cluster.open()
    binds = run_actions(session, *actions).binds
    statuses = [t.status for t in session.jobs["default/g"].tasks.values()]
    if binds:
        assert sent_count(statuses) >= min_member, (binds, statuses)
    assert TaskStatus.ALLOCATED not in statuses, statuses
    ready_without_pipelined = 1 + best_effort >= min_member
    assert bool(binds) == ready_without_pipelined


def test_pending_groups_wait_for_enqueue_only_when_enqueue_is_configured() -> None:
    def cluster() -> Cluster:
        c = Cluster().node("n1", cpu=4)
        c.job("j", phase=PodGroupPhase.PENDING).tasks(1)
        return c

    with_enqueue = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
    without = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
    s = cluster().open(with_enqueue)
    from kbatch.operators.scheduler.core.actions import allocate

    allocate.execute(s)
    assert s.stats.binds == 0
    assert run_actions(cluster().open(without), "allocate").binds == [("j-0", "n1")]


def test_node_ties_are_broken_by_name() -> None:
    cluster = Cluster().node("b").node("a").node("c")
    cluster.job("j").tasks(1, cpu=1)
    assert run_actions(cluster.open(), "allocate").binds == [("j-0", "a")]
