"""enqueue: admit Pending groups when their minResources have room."""

import pytest

from builders import Cluster, run_actions, vec
from kbatch.api.podgroup import PodGroupPhase

PENDING, INQUEUE = PodGroupPhase.PENDING, PodGroupPhase.INQUEUE
CONF = 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n  - name: proportion\n'


def phases(cluster: Cluster) -> dict[str, str]:
    sent = run_actions(cluster.open(CONF), "enqueue")
    return {key.split("/")[1]: status.phase.value for key, status in sent.pod_groups.items()}


def test_a_group_without_min_resources_is_admitted_at_once() -> None:
    cluster = Cluster().node("n1", cpu=1)
    cluster.job("j", phase=PENDING).tasks(4, cpu=1)
    assert phases(cluster) == {"j": "Inqueue"}


def test_first_come_first_served_within_idle_resources() -> None:
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("a", phase=PENDING, min_resources=vec(3), created=1.0).tasks(3)
    cluster.job("b", phase=PENDING, min_resources=vec(3), created=2.0).tasks(3)
    assert phases(cluster) == {"a": "Inqueue", "b": "Pending"}


def test_inqueue_reservations_are_not_handed_to_others() -> None:
    cluster = Cluster().node("n1", cpu=4)
    cluster.job("reserved", min_resources=vec(3)).tasks(3)  # Inqueue, nothing placed yet
    cluster.job("late", phase=PENDING, min_resources=vec(2)).tasks(2)
    assert phases(cluster)["late"] == "Pending"


def test_within_the_queue_deserved_share_even_when_the_cluster_is_full() -> None:
    from kbatch.operators.scheduler.core.framework.info import TaskStatus

    cluster = Cluster().node("n1", cpu=4).queue("busy").queue("starving")
    cluster.job("hog", queue="busy").tasks(4, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("new", queue="starving", phase=PENDING, min_resources=vec(2)).tasks(2)
    assert phases(cluster)["new"] == "Inqueue"


@pytest.mark.parametrize(
    ("open_", "capability", "expected"),
    [(False, None, "Pending"), (True, vec(1, 1000, 1000), "Pending")],
)
def test_closed_queues_and_capability_refuse(open_: bool, capability, expected: str) -> None:
    cluster = Cluster().node("n1", cpu=8).queue("q", open=open_, capability=capability)
    cluster.job("j", queue="q", phase=PENDING, min_resources=vec(2)).tasks(2)
    sent = run_actions(cluster.open(CONF), "enqueue")
    status = sent.pod_groups["default/j"]
    assert status.phase.value == expected
    assert "queue q" in status.conditions[0].message


PREEMPT_CONF = (
    'actions: "enqueue, allocate, preempt"\n'
    "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: proportion\n"
)


def test_a_full_queue_admits_a_group_that_lower_priority_jobs_make_room_for() -> None:
    """With preempt configured, what lower-priority jobs of the group's own queue hold
    counts as room: else a high-priority gang held until admitted never gets pods, and
    preempt never makes room for it. Each such admission is promised only once."""
    from kbatch.operators.scheduler.core.framework.info import TaskStatus

    cluster = Cluster().node("n1", cpu=4).queue("shared")
    cluster.job("low", queue="shared", priority=10).tasks(
        4, cpu=1, status=TaskStatus.RUNNING, node="n1"
    )
    for name, created in (("high", 1.0), ("high-too", 2.0)):
        cluster.job(
            name,
            queue="shared",
            priority=1000,
            phase=PENDING,
            min_resources=vec(3),
            created=created,
        )
    cluster.job("peer", queue="shared", priority=10, phase=PENDING, min_resources=vec(1))
    sent = run_actions(cluster.open(PREEMPT_CONF), "enqueue")
    got = {key.split("/")[1]: status.phase.value for key, status in sent.pod_groups.items()}
    assert got["high"] == "Inqueue"
    assert got["high-too"] == "Pending", "the 4 cpu low holds were promised to 'high' already"
    assert got["peer"] == "Pending", "an equal priority makes no room"


@pytest.mark.parametrize(
    ("waiting", "admitted"),
    [
        (1000, False),  # as important: the room is promised to it, in an earlier session
        (2000, False),  # more important: it takes that room first
        (10, True),  # less important: once placed it is room to preempt itself
    ],
)
def test_room_promised_in_an_earlier_session_is_not_promised_again(
    waiting: int, admitted: bool
) -> None:
    """The next session, the group admitted on the room of lower-priority jobs is Inqueue
    and its pods wait for preempt: what it waits for is not room for another."""
    from kbatch.operators.scheduler.core.framework.info import TaskStatus

    cluster = Cluster().node("n1", cpu=4).queue("shared")
    cluster.job("low", queue="shared", priority=5).tasks(
        4, cpu=1, status=TaskStatus.RUNNING, node="n1"
    )
    cluster.job(
        "first", queue="shared", priority=waiting, phase=INQUEUE, min_resources=vec(3)
    ).tasks(3, cpu=1)
    cluster.job("next", queue="shared", priority=1000, phase=PENDING, min_resources=vec(3))
    sent = run_actions(cluster.open(PREEMPT_CONF), "enqueue")
    assert (sent.pod_groups["default/next"].phase.value == "Inqueue") is admitted


def test_room_is_promised_again_as_the_group_it_was_promised_to_is_placed() -> None:
    from kbatch.operators.scheduler.core.framework.info import TaskStatus

    cluster = Cluster().node("n1", cpu=8).queue("shared")
    cluster.job("low", queue="shared", priority=5).tasks(
        8, cpu=1, status=TaskStatus.RUNNING, node="n1"
    )
    cluster.job("first", queue="shared", priority=1000, phase=INQUEUE, min_resources=vec(3))
    cluster.job("next", queue="shared", priority=1000, phase=PENDING, min_resources=vec(5))
    sent = run_actions(cluster.open(PREEMPT_CONF), "enqueue")
    assert sent.pod_groups["default/next"].phase.value == "Inqueue"  # 8 held, 3 promised


def test_without_preempt_lower_priority_jobs_make_no_room() -> None:
    from kbatch.operators.scheduler.core.framework.info import TaskStatus

    cluster = Cluster().node("n1", cpu=4).queue("shared").queue("other")
    cluster.job("low", queue="shared", priority=10).tasks(
        4, cpu=1, status=TaskStatus.RUNNING, node="n1"
    )
    cluster.job("high", queue="shared", priority=1000, phase=PENDING, min_resources=vec(3))
    conf = PREEMPT_CONF.replace(", preempt", "")
    sent = run_actions(cluster.open(conf), "enqueue")
    assert sent.pod_groups["default/high"].phase.value == "Pending"


def test_a_group_with_no_pods_says_why_it_was_not_admitted() -> None:
    """Its pods may be held until it is admitted: the condition names admission, not a
    gang with too few pods."""
    cluster = Cluster().node("n1", cpu=2)
    cluster.job("held", phase=PENDING, min_member=3, min_resources=vec(3))
    sent = run_actions(cluster.open(CONF), "enqueue")
    condition = sent.pod_groups["default/held"].conditions[0]
    assert (condition.type.value, condition.status, condition.reason) == (
        "Unschedulable",
        "True",
        "NotEnoughResources",
    )
    assert condition.message == (
        "gang of 3 not admitted: minResources exceed the cluster's free resources: cpu 3 > 2 free"
    )


def test_an_admitted_gang_whose_pods_never_fit_the_nodes_goes_back_to_pending() -> None:
    """12 cpu in all, but nodes of 4 and 8 hold only 1 + 2 of the gang's 3-cpu pods: it
    could never use the 12 cpu it was promised, and would keep everyone out for ever."""
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=8)
    cluster.job("never", min_member=4, min_resources=vec(12), created=1.0).tasks(4, cpu=3)
    cluster.job("late", phase=PENDING, min_resources=vec(1), created=2.0).tasks(1)
    assert phases(cluster) == {"never": "Pending", "late": "Inqueue"}


def test_a_pending_gang_whose_pods_never_fit_the_nodes_is_not_admitted() -> None:
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=8)
    cluster.job("never", phase=PENDING, min_member=4, min_resources=vec(12)).tasks(4, cpu=3)
    sent = run_actions(cluster.open(CONF), "enqueue")
    status = sent.pod_groups["default/never"]
    assert status.phase is PENDING
    assert status.conditions[0].message == (
        "4/4 tasks in gang unschedulable: not admitted: 4 pods of cpu 3, memory 1Gi never fit "
        "on the nodes, even empty: they hold 3 of them"
    )


def test_an_admitted_gang_that_fits_the_empty_nodes_keeps_its_room() -> None:
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=8)
    cluster.job("fits", min_member=3, min_resources=vec(9), created=1.0).tasks(3, cpu=3)
    cluster.job("late", phase=PENDING, min_resources=vec(4), created=2.0).tasks(1, cpu=4)
    assert phases(cluster)["late"] == "Pending"


def test_an_admitted_pod_that_fits_no_node_holds_no_room() -> None:
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4)
    cluster.job("wide", min_resources=vec(6), created=1.0).tasks(1, cpu=6)
    cluster.job("late", phase=PENDING, min_resources=vec(2), created=2.0).tasks(1, cpu=2)
    assert phases(cluster) == {"wide": "Pending", "late": "Inqueue"}


RESERVE_CONF = (
    'actions: "enqueue, allocate, reserve"\n'
    "tiers:\n- plugins:\n  - name: gang\n  - name: proportion\n"
    "reserve: {starvingAfter: 0s}\n"
)


def full_of_its_own_queue(cluster: Cluster, idle: int = 0) -> Cluster:
    """Two 4-cpu nodes held by one-cpu tasks of queue q (its deserved share: all), but
    for ``idle`` cpu of n2."""
    from kbatch.operators.scheduler.core.framework.info import TaskStatus

    cluster.node("n1", cpu=4).node("n2", cpu=4).queue("q")
    for node, busy in (("n1", 4), ("n2", 4 - idle)):
        cluster.job(f"small-{node}", queue="q").tasks(
            busy, cpu=1, status=TaskStatus.RUNNING, node=node
        )
    return cluster


def big_then_tiny(cluster: Cluster) -> Cluster:
    cluster.job("big", queue="q", phase=PENDING, min_resources=vec(8), created=1.0).tasks(2, cpu=4)
    cluster.job("tiny", queue="q", phase=PENDING, min_resources=vec(1), created=2.0).tasks(1)
    return cluster


@pytest.mark.parametrize(
    ("conf", "big", "tiny"),
    [
        (RESERVE_CONF, "Inqueue", "Pending"),
        (CONF, "Pending", "Inqueue"),
        (RESERVE_CONF.replace("0s", "1h"), "Pending", "Inqueue"),
    ],
    ids=["reserve", "without", "not-starving-yet"],
)
def test_a_group_its_own_queue_keeps_out_goes_ahead_of_a_later_one_that_fits(
    conf: str, big: str, tiny: str
) -> None:
    """With reserve, once it has waited ``starvingAfter``, the room its queue's work holds
    is kept for it as it drains: the later group of its queue does not take the cpu it
    waits for."""
    cluster = big_then_tiny(full_of_its_own_queue(Cluster(), idle=1))
    sent = run_actions(cluster.open(conf), "enqueue")
    assert sent.pod_groups["default/big"].phase.value == big
    assert sent.pod_groups["default/tiny"].phase.value == tiny


def test_not_ahead_of_the_room_while_nothing_later_would_take_it() -> None:
    cluster = big_then_tiny(full_of_its_own_queue(Cluster()))
    sent = run_actions(cluster.open(RESERVE_CONF), "enqueue")
    assert sent.pod_groups["default/big"].phase.value == "Pending"


def test_ahead_of_the_room_when_later_pods_without_a_group_wait_in_its_queue() -> None:
    """Pods without a PodGroup are never held at admission: they would take the room."""
    cluster = full_of_its_own_queue(Cluster())
    cluster.job("big", queue="q", phase=PENDING, min_resources=vec(8), created=1.0).tasks(2, cpu=4)
    cluster.job("bare", queue="q", created=2.0).tasks(1).job.has_pod_group = False
    sent = run_actions(cluster.open(RESERVE_CONF), "enqueue")
    assert sent.pod_groups["default/big"].phase.value == "Inqueue"


def test_not_ahead_of_the_room_when_its_queue_already_has_a_group_waiting() -> None:
    cluster = full_of_its_own_queue(Cluster(), idle=1)
    cluster.job("first", queue="q", phase=INQUEUE, min_resources=vec(4), created=0.5).tasks(
        1, cpu=4
    )
    big_then_tiny(cluster)
    sent = run_actions(cluster.open(RESERVE_CONF), "enqueue")
    assert sent.pod_groups["default/big"].phase.value == "Pending"


def test_not_ahead_of_the_room_past_the_queue_s_share_nor_what_the_nodes_hold() -> None:
    """A group larger than its queue's deserved share, or than the nodes, waits Pending:
    no drain makes that room its own."""
    from kbatch.operators.scheduler.core.framework.info import TaskStatus

    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4).queue("q").queue("other")
    cluster.job("theirs", queue="other").tasks(7, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("past-share", queue="q", phase=PENDING, min_resources=vec(6), created=1.0)
    cluster.job("tiny", queue="q", phase=PENDING, min_resources=vec(1), created=2.0)
    sent = run_actions(cluster.open(RESERVE_CONF), "enqueue")
    assert sent.pod_groups["default/past-share"].phase.value == "Pending"

    # another scheduler's pod holds 2 of the 8 cpu: no drain of ours frees them
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4).queue("q").pod("theirs", "n1", cpu=2)
    cluster.job("s1", queue="q").tasks(2, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("s2", queue="q").tasks(3, cpu=1, status=TaskStatus.RUNNING, node="n2")
    cluster.job("huge", queue="q", phase=PENDING, min_resources=vec(7), created=1.0)
    cluster.job("tiny", queue="q", phase=PENDING, min_resources=vec(1), created=2.0)
    sent = run_actions(cluster.open(RESERVE_CONF), "enqueue")
    assert sent.pod_groups["default/huge"].phase.value == "Pending"
    assert sent.pod_groups["default/tiny"].phase.value == "Inqueue"


@pytest.mark.parametrize(("idle_on_kept", "admitted"), [(0, True), (2, False)])
def test_room_kept_for_a_group_is_withheld_only_where_it_is_idle(
    idle_on_kept: int, admitted: bool
) -> None:
    """ "big" waits for n1 to drain (its pod nominated there): of its 4 cpu promised, only
    what is idle on n1 now is withheld from the 2 cpu idle in all."""
    from kbatch.operators.scheduler.core.framework.info import TaskStatus

    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4).queue("q")
    busy_n1, busy_n2 = 4 - idle_on_kept, 2 + idle_on_kept
    cluster.job("on-n1", queue="q").tasks(busy_n1, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("on-n2", queue="q").tasks(busy_n2, cpu=1, status=TaskStatus.RUNNING, node="n2")
    cluster.job("big", queue="q", phase=INQUEUE, min_resources=vec(4), created=0.5).tasks(
        1, cpu=4, nominated="n1"
    )
    cluster.job("next", queue="q", phase=PENDING, min_resources=vec(2), created=1.0).tasks(2)
    sent = run_actions(cluster.open(CONF), "enqueue")
    assert (sent.pod_groups["default/next"].phase.value == "Inqueue") is admitted
