"""``kbatch bench``: fixed synthetic clusters through one scheduling session.

Each size prints one JSON line: nodes, pods, binds, seconds (the session: open,
actions, close), snapshot_seconds (building the snapshot from parsed objects),
and the process's peak RSS. Jobs are gangs of 10 tasks of 1 cpu / 2Gi; nodes
32 cpu / 128Gi / 110 pods; 10 queues of weights 1..10; default tiers; action
allocate.
"""

import itertools
import json
import resource
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kbatch.api.podgroup import PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.cluster.state import ClusterState
from kbatch.config import SchedulerConf
from kbatch.operators.scheduler import runner
from kbatch.operators.scheduler.framework.info import TaskInfo
from kbatch.operators.scheduler.framework.interface import ObjectRef, Snapshot

SIZES = ((100, 1_000), (1_000, 10_000), (5_000, 50_000))
TASKS_PER_JOB = 10
QUEUES = 10


def synthetic_objects(nodes: int, pods: int) -> Iterator[dict[str, Any]]:
    for q in range(QUEUES):
        yield {"kind": "Queue", "metadata": {"name": f"q{q}"}, "spec": {"weight": q + 1}}
    yield {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}}
    for n in range(nodes):
        yield {
            "kind": "Node",
            "metadata": {"name": f"node-{n:05d}"},
            "status": {
                "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    container = {"name": "main", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}
    counter = itertools.count()
    for j in range(pods // TASKS_PER_JOB):
        name = f"job-{j:05d}"
        yield {
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench", "creationTimestamp": None},
            "spec": {"minMember": TASKS_PER_JOB, "queue": f"q{j % QUEUES}"},
            "status": {"phase": "Inqueue"},
        }
        for t in range(TASKS_PER_JOB):
            yield {
                "kind": "Pod",
                "metadata": {
                    "name": f"{name}-{t}",
                    "namespace": "bench",
                    "uid": f"{next(counter):08d}",
                    "annotations": {"scheduling.k8s.io/group-name": name},
                },
                "spec": {"schedulerName": "kbatch", "containers": [container]},
            }


@dataclass
class CountingCluster:
    """Takes the session's side effects and only counts them."""

    snap: Snapshot
    binds: int = 0

    def __post_init__(self) -> None:
        self.binder = self.evictor = self.status = self.events = self

    def bind(self, task: TaskInfo, node: str) -> None:
        self.binds += 1

    def evict(self, task: TaskInfo, reason: str) -> None:
        pass

    def update_pod_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        pass

    def update_queue(self, name: str, status: QueueStatus) -> None:
        pass

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        pass

    def snapshot(self) -> Snapshot:
        return self.snap


def run_size(nodes: int, pods: int, conf: SchedulerConf) -> dict[str, Any]:
    state = ClusterState()
    for obj in synthetic_objects(nodes, pods):
        state.apply(obj)
    started = time.perf_counter()
    snap = state.snapshot()
    snapshot_seconds = time.perf_counter() - started
    cluster = CountingCluster(snap)
    scheduler = runner.Scheduler(cluster, conf, clock=lambda: 0.0, session_ids=lambda: "bench")
    started = time.perf_counter()
    scheduler.run_once()
    seconds = time.perf_counter() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "nodes": nodes,
        "pods": pods,
        "binds": cluster.binds,
        "seconds": round(seconds, 3),
        "snapshot_seconds": round(snapshot_seconds, 3),
        "peak_rss_mib": round(peak_kib / 1024, 1),
    }


def bench_conf() -> SchedulerConf:
    """The default tiers, with the allocate action alone."""
    return runner.default_conf().model_copy(update={"actions": ("allocate",)})


def main(sizes: list[tuple[int, int]] | None = None) -> int:
    conf = bench_conf()
    for nodes, pods in sizes or list(SIZES):
        print(json.dumps(run_size(nodes, pods, conf)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
