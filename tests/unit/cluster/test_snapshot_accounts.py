"""The one pass over the pods that puts each task in its job and gathers what the job's
counts, sums, gang minimum and priority take from its tasks gives, to the bit, what
``JobInfo.add_task`` one task at a time and those figures worked out from ``job.tasks``
give, over clusters of mixed pods (templates, roles, priorities, statuses, requests
that do not add up exactly in floating point)."""

import random
from typing import Any

import numpy as np
import pytest

from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import JobInfo
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

PHASES = [
    {"phase": "Pending"},
    {"phase": "Running", "startTime": "2024-01-01T00:01:00Z"},
    {"phase": "Succeeded"},
    {"phase": "Failed"},
]
CPUS = ["1", "0.1", "0.3", "2"]
MEMORY = ["1.1", "0.7", "3Gi"]  # bytes with fractions: sums that depend on their order


def nodes_and_queue(shortcuts: Shortcuts = ALL) -> ClusterState:
    """A state of three nodes, the default queue and a PriorityClass ``high``, taking
    ``shortcuts``."""
    state = ClusterState(shortcuts=shortcuts)
    state.apply({"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}})
    state.apply({"kind": "PriorityClass", "metadata": {"name": "high"}, "value": 100})
    for n in range(3):
        allocatable = {"cpu": "64", "memory": "256Gi", "pods": "110"}
        state.apply({"kind": "Node", "metadata": {"name": f"n{n}"}, "status": {"allocatable": allocatable}})  # fmt: skip
    return state


def cluster(seed: int) -> ClusterState:
    rng = random.Random(seed)
    state = nodes_and_queue()
    for g in range(6):
        spec: dict[str, Any] = {"minMember": rng.randint(1, 4), "queue": "default"}
        if rng.random() < 0.5:
            spec["minTaskMember"] = {"ps": rng.randint(0, 2), "worker": rng.randint(0, 3)}
        if rng.random() < 0.3:
            spec["priorityClassName"] = "high"
        if rng.random() < 0.2:
            spec["minResources"] = {"cpu": "1"}
        state.apply({"kind": "PodGroup", "metadata": {"name": f"g{g}", "namespace": "ns"}, "spec": spec})  # fmt: skip
    for p in range(60):
        of = f"g{rng.randrange(6)}" if rng.random() < 0.9 else None
        annotations = {"scheduling.k8s.io/group-name": of} if of else {}
        if rng.random() < 0.6:
            annotations["kbatch.io/task"] = rng.choice(["ps", "worker", "eval"])
        spec = {"schedulerName": "kbatch"}
        if rng.random() < 0.3:
            spec["priority"] = rng.randint(-5, 5)
        status = rng.choice(PHASES)
        if status["phase"] != "Pending":
            spec["nodeName"] = f"n{rng.randrange(3)}"
        requests = {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORY)}
        containers = [{"name": "c", "resources": {"requests": requests}}]
        metadata = {"name": f"p{p}", "namespace": "ns", "uid": f"u{p}", "annotations": annotations}  # fmt: skip
        state.apply({"kind": "Pod", "metadata": metadata, "spec": {**spec, "containers": containers}, "status": status})  # fmt: skip
    return state


def tasks_one_by_one(job: JobInfo) -> JobInfo:
    again = JobInfo(job.uid, job.namespace, job.name, job.queue, job.min_member, job.created, job.dims_len)  # fmt: skip
    for task in job.tasks.values():
        again.add_task(task)
    return again


def gang_minimum_of_tasks(job: JobInfo) -> np.ndarray:
    """The webhook's minResources worked out from the job's tasks one by one."""
    requests = [task.template.request for task in job.tasks.values()]
    smallest = np.min(requests, axis=0)
    total, counted = np.zeros_like(smallest), 0
    for role, minimum in job.min_task_member.items():
        of_role = [task.template.request for task in job.tasks.values() if task.role == role]
        if of_role and minimum:
            total += np.min(of_role, axis=0) * minimum
            counted += minimum
    return 0.0 + total + smallest * max(job.min_member - counted, 0)


@pytest.mark.parametrize("seed", range(20))
def test_a_jobs_accounts_are_its_tasks_added_one_by_one(seed: int) -> None:
    state = cluster(seed)
    snap = state.snapshot()
    groups = state.pod_groups()
    with_tasks = [job for job in snap.jobs.values() if job.tasks]
    assert with_tasks
    for job in with_tasks:
        again = tasks_one_by_one(job)
        assert (job.counts, job.ready_count) == (again.counts, again.ready_count)
        assert job.allocated.tolist() == again.allocated.tolist()
        assert job.total_request.tolist() == again.total_request.tolist()
        group = groups.get(job.uid)
        if group is None:
            continue
        if not group.spec.priority_class_name:
            assert job.priority == max(task.priority for task in job.tasks.values())
        if not group.spec.min_resources:
            assert job.min_resources is not None
            assert job.min_resources.tolist() == gang_minimum_of_tasks(job).tolist()
