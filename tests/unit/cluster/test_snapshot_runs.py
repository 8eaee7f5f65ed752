"""The snapshot's pass takes pods in runs (``Shortcuts.task_runs``: a job's tasks accounted
per run of one job, template, role, priority and status; ``Shortcuts.lookup_runs``: a
template and class priority looked up per run of one spec, a job per run of one unit).
Switched off, every task is accounted on its own and every pod looked up anew; either way
a snapshot is the same to the bit, on random clusters whose pods come in gangs (long
runs, broken by a status, a role, a priority, another template or another scheduler's
pod) and one by one."""

import random
from typing import Any

import numpy as np
import pytest

from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from unit.cluster.test_snapshot_accounts import MEMORY, PHASES, nodes_and_queue

CPUS = ["1", "0.1", "0.3"]


def cluster(seed: int, shortcuts: Shortcuts = ALL) -> ClusterState:
    rng = random.Random(seed)
    state = nodes_and_queue(shortcuts)
    groups = 8
    for g in range(groups):
        spec: dict[str, Any] = {"minMember": rng.randint(1, 6), "queue": "default"}
        if rng.random() < 0.3:
            spec["minTaskMember"] = {"ps": rng.randint(0, 2), "worker": rng.randint(0, 3)}
        state.apply({"kind": "PodGroup", "metadata": {"name": f"g{g}", "namespace": "ns"}, "spec": spec})  # fmt: skip
    p = 0
    for _ in range(30):  # runs of pods, each of one group (or none) and mostly one spec
        of = f"g{rng.randrange(groups)}" if rng.random() < 0.85 else None
        requests = {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORY)}
        template: dict[str, Any] = {"schedulerName": "kbatch"}
        if rng.random() < 0.2:
            template["priorityClassName"] = "high"
        status = rng.choice(PHASES)
        for _ in range(rng.randint(1, 12)):
            annotations = {"scheduling.k8s.io/group-name": of} if of else {}
            spec = dict(template)
            if rng.random() < 0.1:  # a pod of the run unlike the rest
                changed = rng.choice(["role", "priority", "request", "status", "scheduler"])
                if changed == "role":
                    annotations["kbatch.io/task"] = rng.choice(["ps", "worker"])
                elif changed == "priority":
                    spec["priority"] = rng.randint(-5, 5)
                elif changed == "request":
                    requests = {"cpu": rng.choice(CPUS), "memory": rng.choice(MEMORY)}
                elif changed == "status":
                    status = rng.choice(PHASES)
                else:
                    spec["schedulerName"] = "other"
            if status["phase"] != "Pending":
                spec["nodeName"] = f"n{rng.randrange(3)}"
            containers = [{"name": "c", "resources": {"requests": dict(requests)}}]
            metadata = {"name": f"p{p}", "namespace": "ns", "uid": f"u{p}", "annotations": annotations}  # fmt: skip
            state.apply({"kind": "Pod", "metadata": metadata, "spec": {**spec, "containers": containers}, "status": status})  # fmt: skip
            p += 1
    return state


def figures(snap: Snapshot) -> list[Any]:
    """Everything the pass gives a snapshot: each job's tasks, counts, sums, priority and
    gang minimum, the nodes' rows, and the orphans."""
    out: list[Any] = []
    for key, job in snap.jobs.items():
        tasks = [
            (t.uid, t.job, t.status, t.node, t.nominated, t.priority, t.request.tobytes())
            for t in job.tasks.values()
        ]
        minimum = None if job.min_resources is None else job.min_resources.tobytes()
        out.append(
            (key, tasks, job.counts, job.ready_count, job.allocated.tobytes(),
             job.total_request.tobytes(), job.priority, minimum)
        )  # fmt: skip
    nodes = snap.nodes
    for matrix in (nodes.used, nodes.releasing, nodes.pipelined, nodes.nominated, nodes.free):
        out.append(np.asarray(matrix).tobytes())
    out.append(snap.orphans)
    return out


@pytest.mark.parametrize("seed", range(20))
def test_the_pass_in_runs_is_the_pass_pod_by_pod(seed: int) -> None:
    in_runs = figures(cluster(seed).snapshot())
    pod_by_pod = Shortcuts().without("task_runs", "lookup_runs")
    assert figures(cluster(seed, pod_by_pod).snapshot()) == in_runs
