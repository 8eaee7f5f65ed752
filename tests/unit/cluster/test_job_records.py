"""The batch/v1 Jobs the state reads for their own deadline (``job_records``): the
snapshot gives each Job's deadline by uid, each task its Job's uid; a bad Job is
refused naming the field, and the rest keeps working."""

from typing import Any

import pytest

from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import JobDeadline
from tests.unit.cluster.test_snapshot_tasks import pod

STARTED = "2024-01-01T00:00:10Z"  # 1704067210


def job(name: str = "j", **spec: Any) -> dict[str, Any]:
    status = spec.pop("status", {})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"template": {"spec": {"containers": []}}, **spec},
        "status": status,
    }


def pod_of(name: str, owner: dict[str, Any]) -> dict[str, Any]:
    made = pod(name)  # (not of a PodGroup: a job of its own)
    made["metadata"] = {**made["metadata"], "annotations": {}, "ownerReferences": [owner]}
    return made


JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "uid-j",
             "controller": True}  # fmt: skip


def deadlines_of(*objects: dict[str, Any]) -> dict[str, JobDeadline]:
    state = ClusterState()
    for obj in objects:
        state.apply(obj)
    return state.snapshot().job_deadlines


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"activeDeadlineSeconds": 60}, JobDeadline(60.0, None)),
        ({"activeDeadlineSeconds": 60, "status": {"startTime": STARTED}},
         JobDeadline(60.0, 1704067210.0)),
        # suspended: the controller clears startTime; a stale one counts for nothing
        ({"activeDeadlineSeconds": 60, "suspend": True, "status": {"startTime": STARTED}},
         JobDeadline(60.0, None)),
    ],
    ids=["not-started", "started", "suspended"],
)  # fmt: skip
def test_a_job_s_deadline_is_in_the_snapshot_by_its_uid(
    spec: dict[str, Any], expected: JobDeadline
) -> None:
    assert deadlines_of(job(**spec)) == {"uid-j": expected}


def test_a_job_without_a_deadline_is_not_in_the_snapshot() -> None:
    assert deadlines_of(job(), job("k", activeDeadlineSeconds=5)) == {"uid-k": JobDeadline(5, None)}


@pytest.mark.parametrize(
    ("owner", "expected"),
    [
        (JOB_OWNER, "uid-j"),
        ({**JOB_OWNER, "controller": False}, ""),
        ({**JOB_OWNER, "apiVersion": "batch.volcano.sh/v1alpha1"}, ""),
        ({**JOB_OWNER, "kind": "ReplicaSet"}, ""),
    ],
    ids=["its-job", "not-its-controller", "volcano-job", "replicaset"],
)
def test_a_task_knows_the_job_that_controls_its_pod(owner: dict[str, Any], expected: str) -> None:
    state = ClusterState()
    state.apply(pod_of("p", owner))
    (task,) = (t for j in state.snapshot().jobs.values() for t in j.tasks.values())
    assert task.owner_job == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"activeDeadlineSeconds": 0}, "spec.activeDeadlineSeconds: expected a positive integer"),
        ({"activeDeadlineSeconds": "60"}, "spec.activeDeadlineSeconds: expected a positive"),
        ({"activeDeadlineSeconds": 60, "suspend": "yes"}, "spec.suspend: expected true or false"),
        ({"activeDeadlineSeconds": 60, "status": {"startTime": "noon"}},
         "status.startTime: expected an RFC 3339 time"),
    ],
)  # fmt: skip
def test_a_bad_job_is_refused_naming_the_field_and_the_rest_goes_on(
    spec: dict[str, Any], message: str
) -> None:
    state = ClusterState()
    state.apply(job("good", activeDeadlineSeconds=30))
    with pytest.raises(ObjectError, match=f"Job ns/bad: {message}"):
        state.apply(job("bad", **spec))
    assert set(state.refused("Job")) == {"ns/bad"}
    assert state.snapshot().job_deadlines == {"uid-good": JobDeadline(30.0, None)}


def test_the_snapshot_follows_each_write_and_deletion_of_a_job() -> None:
    """(The deadlines are kept between snapshots while no Job is written.)"""
    state = ClusterState()
    state.apply(job(activeDeadlineSeconds=60))
    first = state.snapshot().job_deadlines
    assert state.snapshot().job_deadlines is first
    state.apply(job(activeDeadlineSeconds=60, status={"startTime": STARTED}))
    assert state.snapshot().job_deadlines == {"uid-j": JobDeadline(60.0, 1704067210.0)}
    state.delete("Job", "ns", "j")
    assert state.snapshot().job_deadlines == {}
