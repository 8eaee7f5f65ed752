"""The overcommit plugin (Volcano's): groups admitted past the idle room while what the
admitted groups wait for fits in the factor times the cluster, less what pods hold;
refused past it, told by how much, whatever else permits."""

import pytest

from builders import Cluster, run_actions, vec
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.plugins import overcommit

PENDING = PodGroupPhase.PENDING


def conf(factor: float | None = None, proportion: bool = False) -> str:
    arguments = f"\n    arguments:\n      overcommit-factor: {factor}" if factor is not None else ""
    more = "\n  - name: proportion" if proportion else ""
    return (
        'actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n'
        f"- plugins:\n  - name: overcommit{arguments}{more}\n"
    )


def admitted(cluster: Cluster, text: str) -> dict[str, str]:
    sent = run_actions(cluster.open(text), "enqueue")
    return {key.split("/")[1]: status.phase.value for key, status in sent.pod_groups.items()}


def test_groups_are_admitted_up_to_the_factor_of_the_cluster_less_what_runs() -> None:
    # 10 cpu, 4 running: 1.2 x 10 - 4 = 8 cpu may be promised, where 6 are idle: b is
    # admitted past the idle room.
    cluster = Cluster().node("n1", cpu=10)
    cluster.job("running").tasks(4, cpu=1, status=TaskStatus.RUNNING, node="n1")
    for name, created in (("a", 1.0), ("b", 2.0), ("c", 3.0)):
        cluster.job(name, phase=PENDING, min_resources=vec(4), created=created).tasks(4)
    found = admitted(cluster, conf())
    assert [found[name] for name in "abc"] == ["Inqueue", "Inqueue", "Pending"]


def test_a_larger_factor_admits_more_and_what_is_promised_counts() -> None:
    cluster = Cluster().node("n1", cpu=10)
    cluster.job("promised", min_resources=vec(9)).tasks(9)  # Inqueue, nothing placed
    cluster.job("late", phase=PENDING, min_resources=vec(5)).tasks(5)
    assert admitted(cluster, conf(1.2))["late"] == "Pending"
    assert admitted(cluster, conf(1.5))["late"] == "Inqueue"  # 9 + 5 <= 15


def test_a_refusal_says_by_how_much_and_stands_over_a_queue_s_deserved_share() -> None:
    cluster = Cluster().node("n1", cpu=4).queue("busy").queue("starving")
    cluster.job("hog", queue="busy").tasks(4, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("new", queue="starving", phase=PENDING, min_resources=vec(2)).tasks(2)
    sent = run_actions(cluster.open(conf(proportion=True)), "enqueue")
    status = sent.pod_groups["default/new"]
    assert status.phase is PENDING
    message = status.conditions[0].message
    assert "overcommitted past overcommit-factor 1.2: cpu 2 > 800m left" in message


def test_only_the_resources_a_group_asks_for_are_compared() -> None:
    cluster = Cluster().node("n1", cpu=10, gpu=2)
    cluster.job("gpus", min_resources=vec(0, 0, 0, 4)).tasks(1)  # 4 gpus promised of 2.4
    cluster.job("cpu-only", phase=PENDING, min_resources=vec(2)).tasks(2)
    assert admitted(cluster, conf())["cpu-only"] == "Inqueue"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"overcommit-factor": 0.8}, "overcommit-factor must be at least 1, not 0.8"),
        ({"overcommit-factor": "lots"}, "overcommit-factor must be a number"),
        ({"overcommit.factor": 2}, "unknown argument 'overcommit.factor' for plugin overcommit"),
    ],
)
def test_bad_arguments_are_refused_naming_them(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        overcommit.parse_arguments(arguments)
    assert overcommit.parse_arguments({}) == 1.2
