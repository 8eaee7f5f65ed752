"""enqueue: admit Pending groups when their minResources have room."""

import pytest

from builders import Cluster, run_actions, vec
from kbatch.api.podgroup import PodGroupPhase

PENDING = PodGroupPhase.PENDING
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
    from kbatch.operators.scheduler.framework.info import TaskStatus

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
