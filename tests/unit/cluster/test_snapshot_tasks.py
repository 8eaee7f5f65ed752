"""The snapshot's tasks, field by field (the builder makes them by position), and what it
works out once per pod version rather than per snapshot."""

import dataclasses
from typing import Any

import pytest

from kbatch.cluster import records
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import NO_NODE, TaskInfo, TaskStatus


def node(name: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def pod(name: str, cpu: str = "1", **extra: Any) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "creationTimestamp": "2024-01-01T00:00:10Z",
            "annotations": {"scheduling.k8s.io/group-name": "g", "kbatch.io/task": "worker"},
        },
        "spec": {
            "schedulerName": "kbatch",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            **extra.pop("spec", {}),
        },
        **extra,
    }


GROUP = {
    "kind": "PodGroup",
    "metadata": {"name": "g", "namespace": "ns"},
    "spec": {"minMember": 3, "queue": "default"},
}
CONDITION = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}


def tasks_of(*objects: dict[str, Any]) -> tuple[dict[str, TaskInfo], Any]:
    state = ClusterState()
    for obj in (node("a"), node("b"), *objects):
        state.apply(obj)
    snap = state.snapshot()
    return {t.name: t for job in snap.jobs.values() for t in job.tasks.values()}, snap


def test_every_field_of_a_task_is_its_pods() -> None:
    running = pod(
        "running",
        spec={
            "nodeName": "b",
            "priority": 7,
            "priorityClassName": "system-node-critical",
            "activeDeadlineSeconds": 600,
        },
        status={"phase": "Running", "startTime": "2024-01-01T00:01:00Z"},
    )
    running["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "job-uid", "controller": True}
    ]
    waiting = pod("waiting", status={"phase": "Pending", "nominatedNodeName": "a"})
    waiting["status"]["conditions"] = [CONDITION]
    tasks, snap = tasks_of(GROUP, running, waiting)
    index = snap.nodes.index
    expected = {
        "running": {"status": TaskStatus.RUNNING, "node": index["b"], "nominated": NO_NODE,
                    "priority": 7, "started": 1704067260.0, "critical": True,
                    "scheduled_condition": None, "walltime": 600.0, "owner_job": "job-uid"},
        "waiting": {"status": TaskStatus.PENDING, "node": NO_NODE, "nominated": index["a"],
                    "priority": 0, "started": None, "critical": False,
                    "scheduled_condition": ("False", "Unschedulable", "m"), "walltime": None,
                    "owner_job": ""},
    }  # fmt: skip
    for name, fields in expected.items():
        task = tasks[name]
        common = {"uid": f"uid-{name}", "namespace": "ns", "name": name, "job": "ns/g",
                  "created": 1704067210.0, "role": "worker"}  # fmt: skip
        assert {key: getattr(task, key) for key in {**common, **fields}} == {**common, **fields}
        assert task.template.request[snap.dims.index["cpu"]] == 1000
        assert task.last_event is None  # a memo of the sessions', not the pod's
    what_it_is = {f.name for f in dataclasses.fields(TaskInfo) if f.compare}
    assert what_it_is == {*common, *fields, "template"}


def test_a_pods_status_and_job_follow_a_replaced_record() -> None:
    """The state's assumptions replace records (dataclasses.replace): what a record works
    out from its fields is worked out again."""
    record = records.parse_pod(pod("p", spec={"nodeName": "a"}, status={"phase": "Running"}))
    assert (record.task_status, record.unit) == (TaskStatus.RUNNING, "ns/g")
    releasing = dataclasses.replace(record, deleting=True)
    assert releasing.task_status is TaskStatus.RELEASING
    alone = records.parse_pod({**pod("p"), "metadata": {"name": "p", "namespace": "ns"}})
    assert (alone.task_status, alone.unit) == (TaskStatus.PENDING, "pod:ns/p")
    assert dataclasses.replace(alone, node_name="a").task_status is TaskStatus.BOUND
    assert records.task_status(releasing) is releasing.task_status  # the simulator's reading


@pytest.mark.parametrize(
    ("cpus", "min_task_member", "expected"),
    [
        (("1", "1", "1"), None, 3000),  # one template: its request × minMember
        (("2", "1", "3"), None, 3000),  # the smallest request × minMember
        (("2", "1", "3"), {"worker": 2}, 2 * 1000 + 1 * 1000),  # a role's minimum, the rest
    ],
)
def test_a_group_without_min_resources_gets_its_smallest_gang(
    cpus: tuple[str, ...], min_task_member: dict[str, int] | None, expected: float
) -> None:
    group = {**GROUP, "spec": {**GROUP["spec"], "minTaskMember": min_task_member}}
    _, snap = tasks_of(group, *(pod(f"p{i}", cpu) for i, cpu in enumerate(cpus)))
    minimum = snap.jobs["ns/g"].min_resources
    assert minimum is not None and minimum[snap.dims.index["cpu"]] == expected
