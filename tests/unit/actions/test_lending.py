"""Room kept for a draining job, lent by walltimes (``framework.lending``): reserve
places an admitted job whose pods end in time in it."""

import pytest

from builders import Cluster, run_actions, vec
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskStatus

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


def test_a_job_asking_for_one_topology_domain_is_not_lent_room() -> None:
    """allocate places such a job domain by domain; the lent placement would not."""
    from kbatch.operators.scheduler.core.framework.info import REQUIRED, TopologyRequest

    cluster = kept_for_big(40.0, next_phase=INQUEUE)
    cluster.jobs["default/next"].topology = TopologyRequest(REQUIRED, "kbatch.io/rack")
    sent = run_actions(cluster.open(CONF), "allocate", "reserve")
    assert sent.binds == []
