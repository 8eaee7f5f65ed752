"""The snapshot's jobs, field by field (the builder makes them by position from parts it
keeps per PodGroup object)."""

import dataclasses
from typing import Any

from kbatch.api.podgroup import PodGroupPhase
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import JobInfo, TopologyRequest

GROUP = {
    "kind": "PodGroup",
    "metadata": {
        "name": "g",
        "namespace": "ns",
        "creationTimestamp": "2024-01-01T00:00:10Z",
        "annotations": {"kbatch.io/lifetime": "1h", "kbatch.io/topology-required": "rack"},
    },
    "spec": {
        "minMember": 3,
        "queue": "q",
        "priorityClassName": "high",
        "minResources": {"cpu": "3"},
        "minTaskMember": {"ps": 1},
    },
    "status": {"phase": "Inqueue"},
}
CLASS = {"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 9}
NODE = {"kind": "Node", "metadata": {"name": "a"}, "status": {"allocatable": {"cpu": "8"}}}


def test_every_field_of_a_job_is_its_groups() -> None:
    state = ClusterState()
    for obj in (NODE, CLASS, GROUP):
        state.apply(obj)
    snap = state.snapshot()
    job = snap.jobs["ns/g"]
    group = state.pod_groups()["ns/g"]
    expected: dict[str, Any] = {
        "uid": "ns/g", "namespace": "ns", "name": "g", "queue": "q", "min_member": 3,
        "created": 1704067210.0, "dims_len": len(snap.dims), "priority": 9,
        "lifetime": 3600.0, "min_task_member": {"ps": 1},
        "topology": TopologyRequest("required", "rack"), "phase": PodGroupPhase.INQUEUE,
        "conditions": group.status.conditions, "old_status": group.status,
        "has_pod_group": True, "pod_group_missing": False, "gated": None, "tasks": {},
        "ready_count": 0,
        "kept_status": None,  # no session has closed on it yet
        "touched": False,  # nor changed a task of it
        "change_log": [],  # its builder's, told nothing yet
    }  # fmt: skip
    assert {name: getattr(job, name) for name in expected} == expected
    assert job.min_resources is not None
    assert job.min_resources.tolist() == [3000.0 if d == "cpu" else 0.0 for d in snap.dims.names]
    assert job.counts == [0] * len(job.counts)
    assert not job.allocated.any() and not job.total_request.any()
    # Every field is one of those checked.
    checked = {*expected, "min_resources", "counts", "allocated", "total_request"}
    assert {field.name for field in dataclasses.fields(JobInfo)} == checked
