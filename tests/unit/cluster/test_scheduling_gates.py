"""Pods held by scheduling gates (spec.schedulingGates): no task until the gates are
removed, a gang short of pods says which gates hold them, bad gates are refused naming
the field."""

import pytest

from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import GatedPods, TaskStatus
from kbatch.operators.scheduler.core.plugins import gang
from unit.cluster.test_state import node, pod, pod_group


def gated(name: str, *gates: str, group: str | None = "g") -> dict:
    return pod(name, group=group, schedulingGates=[{"name": g} for g in gates])


def test_a_gated_pod_is_no_task_until_its_gates_are_removed() -> None:
    state = ClusterState()
    state.apply(node("n1"))
    state.apply(pod_group("g", min_member=3))
    state.apply(pod("a", group="g"))
    state.apply(gated("b", "example.com/quota"))
    state.apply(gated("c", "example.com/quota", "example.com/data"))
    job = state.snapshot().jobs["default/g"]
    assert sorted(t.name for t in job.tasks.values()) == ["a"]
    assert job.gated == GatedPods(2, ("example.com/data", "example.com/quota"))

    for name in ("b", "c"):  # the gates removed, as their controller does
        state.apply(pod(name, group="g"))
    job = state.snapshot().jobs["default/g"]
    assert sorted(t.name for t in job.tasks.values()) == ["a", "b", "c"]
    assert {t.status for t in job.tasks.values()} == {TaskStatus.PENDING}
    assert job.gated is None


def test_a_gang_short_of_pods_says_which_gates_hold_them() -> None:
    state = ClusterState()
    state.apply(pod_group("g", min_member=3))
    state.apply(pod("a", group="g"))
    state.apply(gated("b", "example.com/quota"))
    verdict = gang.valid(state.snapshot().jobs["default/g"])
    assert verdict is not None and verdict.reason == "SchedulingGated"
    assert verdict.message == (
        "1/3 tasks in gang: minMember is 3 but only 1 pod(s) exist that can run; "
        "1 pod waits for scheduling gates to be removed: example.com/quota"
    )


def test_a_job_given_again_by_the_next_snapshot_forgets_gated_pods_gone() -> None:
    """A group without tasks is the same job from one snapshot to the next: once its
    gated pods are deleted it no longer says they wait."""
    state = ClusterState()
    state.apply(pod_group("g", min_member=2))
    state.apply(gated("a", "x"))
    state.apply(gated("b", "x"))
    assert state.snapshot().jobs["default/g"].gated == GatedPods(2, ("x",))
    assert not state.has_work({"default/g"})  # only gated pods wait: nothing to place
    state.delete("Pod", "default", "a")
    assert state.snapshot().jobs["default/g"].gated == GatedPods(1, ("x",))
    state.delete("Pod", "default", "b")
    job = state.snapshot().jobs["default/g"]
    assert job.gated is None and gang.valid(job).reason == "NotEnoughTasks"  # type: ignore[union-attr]


def test_another_scheduler_s_gated_pods_are_not_counted() -> None:
    state = ClusterState()
    state.apply(pod_group("g", min_member=2))
    other = gated("b", "x")
    other["spec"]["schedulerName"] = "default-scheduler"
    state.apply(other)
    assert state.snapshot().jobs["default/g"].gated is None


def test_a_gated_pod_of_its_own_makes_no_job() -> None:
    state = ClusterState()
    state.apply(gated("solo", "x", group=None))
    assert state.snapshot().jobs == {}
    assert not state.has_work()


@pytest.mark.parametrize(
    ("gates", "field"),
    [
        ("x", "spec.schedulingGates"),
        ([{"name": ""}], "spec.schedulingGates[0].name"),
        ([{"name": "x"}, "y"], "spec.schedulingGates[1]"),
        ([{"name": 3}], "spec.schedulingGates[0].name"),
    ],
)
def test_bad_scheduling_gates_are_refused_naming_the_field(gates: object, field: str) -> None:
    state = ClusterState()
    bad = pod("a", group="g", schedulingGates=gates)
    with pytest.raises(ObjectError) as refused:
        state.apply(bad)
    assert refused.value.field == field
    assert "Pod default/a" in str(refused.value)
