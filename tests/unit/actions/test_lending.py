"""Room kept for a draining job, lent by walltimes (``framework.lending``): reserve
places an admitted job whose pods end in time in it."""

import pytest

from builders import Cluster, run_actions, vec
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.info import JobDeadline, JobInfo, TaskStatus

PENDING, INQUEUE = PodGroupPhase.PENDING, PodGroupPhase.INQUEUE
NOW = 100.0  # the session's clock (``Cluster.open``)
CONF = (
    'actions: "enqueue, allocate, reserve"\n'
    "tiers:\n- plugins:\n  - name: gang\n  - name: proportion\n"
    "reserve: {starvingAfter: 0s}\n"
)


def walltimes(job: JobInfo, seconds: float | None, started: float | None = None) -> None:
    for task in job.tasks.values():
        task.walltime = seconds
        task.started = started


def kept_for_big(
    next_walltime: float | None, in_the_way_walltime: float | None = 100.0, next_phase=PENDING
) -> Cluster:
    """n1 (4 cpu): two 1-cpu pods started at 50 s with ``in_the_way_walltime`` (to 150 s),
    and "big"'s 4-cpu pod waiting with n1 kept for it; n2 full till then too. "next"
    asks for 2 cpu, its pods' walltime ``next_walltime``."""
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4).queue("q")
    on_n1 = cluster.job("on-n1", queue="q").tasks(2, status=TaskStatus.RUNNING, node="n1").job
    on_n2 = cluster.job("on-n2", queue="q").tasks(4, status=TaskStatus.RUNNING, node="n2").job
    walltimes(on_n1, in_the_way_walltime, started=50.0)
    walltimes(on_n2, 100.0, started=50.0)
    cluster.job("big", queue="q", phase=INQUEUE, min_resources=vec(4), created=0.5).tasks(
        1, cpu=4, nominated="n1"
    )
    new = cluster.job("next", queue="q", phase=next_phase, min_resources=vec(2), created=1.0)
    walltimes(new.tasks(2).job, next_walltime)
    return cluster


@pytest.mark.parametrize(
    ("next_walltime", "in_the_way", "placed"),
    [
        (40.0, 100.0, True),
        (50.0, 100.0, True),
        (60.0, 100.0, False),
        (None, 100.0, False),
        (40.0, None, False),
    ],
    ids=["ends-before", "ends-at", "ends-after", "no-walltime", "start-not-known"],
)
def test_reserve_places_a_job_whose_pods_end_in_time_on_the_room_it_keeps(
    next_walltime: float | None, in_the_way: float | None, placed: bool
) -> None:
    """n1's 2 idle cpu are kept for "big", which can start at 150 s at the latest (the
    deadlines in its way): "next" (admitted) runs there if its pods end by then, and
    nothing runs there while big's start is not known."""
    cluster = kept_for_big(next_walltime, in_the_way, next_phase=INQUEUE)
    session = cluster.open(CONF)
    sent = run_actions(session, "allocate", "reserve")
    expected = [("next-0", "n1"), ("next-1", "n1")] if placed else []
    assert sorted(sent.binds) == expected
    # big's room stays kept on n1 (lent meanwhile, never given back): nothing to send
    assert [n.node for n in sent.outcome.nominations if n.task.name == "big-0"] == []
    (big,) = session.jobs["default/big"].tasks.values()
    n1 = session.nodes.index["n1"]
    assert big.nominated == n1 and session.nodes.nominated[n1][0] == big.request[0]


def owned_by_job(cluster: Cluster, job: str, deadline: float, started: float | None) -> None:
    """``job``'s pods belong to a batch/v1 Job with its own ``deadline``, started then."""
    for task in cluster.jobs[f"default/{job}"].tasks.values():
        task.owner_job = f"uid-{job}"
    cluster.job_deadlines[f"uid-{job}"] = JobDeadline(deadline, started)


@pytest.mark.parametrize(
    ("own", "job_deadline", "placed"),
    [(None, 40.0, True), (None, 60.0, False), (60.0, 40.0, True), (40.0, 60.0, True)],
    ids=["job-ends-before", "job-ends-after", "job-ends-first", "pod-ends-first"],
)
def test_a_job_s_own_deadline_lets_its_pods_be_lent_room(
    own: float | None, job_deadline: float, placed: bool
) -> None:
    """ "next"'s pods end by its batch/v1 Job's activeDeadlineSeconds, counted from its
    release (not started yet), or by their own if that is shorter: by 150 s (big's
    latest start), they may run on n1's kept room."""
    cluster = kept_for_big(own, next_phase=INQUEUE)
    owned_by_job(cluster, "next", job_deadline, started=None)
    sent = run_actions(cluster.open(CONF), "allocate", "reserve")
    assert sorted(sent.binds) == ([("next-0", "n1"), ("next-1", "n1")] if placed else [])


@pytest.mark.parametrize(
    ("in_the_way_own", "job_started", "next_walltime", "placed"),
    [
        (None, 30.0, 30.0, True),  # in the way till 130 by their Job alone
        (None, 30.0, 40.0, False),
        (100.0, 30.0, 30.0, True),  # their Job's end (130) before their own (150)
        (50.0, 30.0, 40.0, False),  # their own end (100) first; next's ends at 140
        (None, None, 40.0, True),  # not started: they end by their own start plus 100
    ],
)
def test_a_job_s_own_deadline_tells_when_the_pods_in_the_way_end(
    in_the_way_own: float | None, job_started: float | None, next_walltime: float, placed: bool
) -> None:
    """The pods on n1 (started at 50 s) belong to a Job with a 100-s deadline that
    started at ``job_started``: they are gone by its end, so big may start then, and
    "next" may use n1's kept room if its pods end by that time."""
    cluster = kept_for_big(next_walltime, in_the_way_own, next_phase=INQUEUE)
    owned_by_job(cluster, "on-n1", 100.0, started=job_started)
    sent = run_actions(cluster.open(CONF), "allocate", "reserve")
    assert sorted(sent.binds) == ([("next-0", "n1"), ("next-1", "n1")] if placed else [])


def test_a_job_asking_for_one_topology_domain_is_not_lent_room() -> None:
    """allocate places such a job domain by domain; the lent placement would not."""
    from kbatch.operators.scheduler.core.framework.info import REQUIRED, TopologyRequest

    cluster = kept_for_big(40.0, next_phase=INQUEUE)
    cluster.jobs["default/next"].topology = TopologyRequest(REQUIRED, "kbatch.io/rack")
    sent = run_actions(cluster.open(CONF), "allocate", "reserve")
    assert sent.binds == []
