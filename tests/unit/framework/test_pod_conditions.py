"""PodScheduled conditions: written when they change, at most PER_SESSION a session."""

import pytest

from builders import Cluster, run_actions
from kbatch.operators.scheduler.core.framework import pod_conditions

MESSAGE = "0/1 nodes are available: 1 Insufficient cpu."


def test_a_condition_the_pod_has_already_is_not_written_again() -> None:
    cluster = Cluster().node("n1", cpu=2)
    tasks = cluster.job("big").tasks(2, cpu=4).job.tasks
    first, second = tasks.values()
    first.scheduled_condition = ("False", "Unschedulable", MESSAGE)
    sent = run_actions(cluster.open(), "allocate")
    written = {c.task.name: c.triple() for c in sent.outcome.pod_conditions}
    assert list(written) == [second.name], "the first has it already"
    status, reason, message = written[second.name]  # no fit error of its own: the gang's
    assert (status, reason) == ("False", "Unschedulable")
    assert message == f"2/2 tasks in gang unschedulable: {MESSAGE[:-1]}"


def test_a_session_writes_at_most_per_session(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pod_conditions, "PER_SESSION", 3)
    cluster = Cluster().node("n1", cpu=2)
    for j in range(5):
        cluster.job(f"big-{j}").tasks(1, cpu=4)
    sent = run_actions(cluster.open(), "allocate")
    assert len(sent.outcome.pod_conditions) == 3


def test_nothing_is_said_of_a_pod_nobody_tried() -> None:
    cluster = Cluster().node("n1", cpu=8)
    cluster.job("fits").tasks(1, cpu=1)
    sent = run_actions(cluster.open())  # placed: bound, the API server says True itself
    assert sent.outcome.pod_conditions == []
