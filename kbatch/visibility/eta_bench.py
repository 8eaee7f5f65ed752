"""``kbatch bench --eta``: ``kbatch explain --eta`` on a synthetic cluster of 1,000 full
nodes and 10,000 pending pods (1,000 gangs of 10 in 10 queues), timed.

One JSON line per job asked about: the forecast's answer and its cost, in wall seconds
and in this process's CPU seconds (steadier on a busy machine), split into opening the
session on the objects (what ``kbatch explain`` does without ``--eta``) and the forecast;
listing the objects from an API server is not in it. ``waiting-5`` starts within
minutes, ``waiting-500`` after about half the backlog.
"""

import json
import random
import sys
import time
from collections.abc import Sequence
from typing import Any

from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.sim import clock
from kbatch.visibility import eta, standing

Object = dict[str, Any]
TARGETS = ("waiting-5", "waiting-500")
NOW = 1_700_000_000.0
NODES = 1000
GANGS, GANG_SIZE = 1000, 10  # waiting: 10,000 pods of 1 cpu
RUNNING_PER_NODE = 4  # 8 cpu each, nodes of 32 cpu: the cluster is full
QUEUES = 10


def stamp(seconds_ago: float) -> str:
    return clock.timestamp(NOW - seconds_ago)


def node(i: int) -> Object:
    return {
        "kind": "Node",
        "metadata": {"name": f"node-{i:04d}", "creationTimestamp": stamp(86400)},
        "status": {
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str, group: str, cpu: str, created: float, node: str | None = None, deadline: int = 0
) -> Object:
    spec: Object = {
        "schedulerName": "kbatch",
        "containers": [
            {"name": "main", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
        ],
    }
    status: Object = {"phase": "Pending"}
    if node is not None:
        spec["nodeName"] = node
        spec["activeDeadlineSeconds"] = deadline
        status = {"phase": "Running", "startTime": stamp(600)}
    return {
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "creationTimestamp": stamp(created),
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": spec,
        "status": status,
    }


def pod_group(name: str, size: int, queue: str, phase: str, created: float) -> Object:
    return {
        "kind": "PodGroup",
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "metadata": {"name": name, "namespace": "bench", "creationTimestamp": stamp(created)},
        "spec": {
            "minMember": size,
            "queue": queue,
            "minResources": {"cpu": str(size), "memory": f"{size}Gi"},
        },
        "status": {"phase": phase},
    }


def synthetic_cluster(nodes: int = NODES, gangs: int = GANGS) -> standing.ClusterObjects:
    """Full nodes whose pods end within two hours (their deadlines), and gangs waiting
    in 10 queues of weights 1 to 10, the first 3 in 10 admitted (300 of 1,000)."""
    rng = random.Random(13)
    pods, groups = [], []
    for i in range(nodes):
        group = f"running-{i}"
        groups.append(pod_group(group, RUNNING_PER_NODE, f"q{i % QUEUES}", "Running", 7200))
        for k in range(RUNNING_PER_NODE):
            deadline = 600 + rng.randint(60, 7200)
            pods.append(pod(f"{group}-{k}", group, "8", 7200, f"node-{i:04d}", deadline))
    admitted = gangs * 3 // 10
    for i in range(gangs):
        group = f"waiting-{i}"
        created = 3000 - i
        phase = "Inqueue" if i < admitted else "Pending"
        groups.append(pod_group(group, GANG_SIZE, f"q{i % QUEUES}", phase, created))
        pods += [pod(f"{group}-{k}", group, "1", created) for k in range(GANG_SIZE)]
    queues = [
        {
            "kind": "Queue",
            "metadata": {"name": f"q{i}", "creationTimestamp": stamp(86400)},
            "spec": {"weight": i + 1},
        }
        for i in range(QUEUES)
    ]
    return standing.ClusterObjects(
        now=NOW, nodes=[node(i) for i in range(nodes)], pods=pods, pod_groups=groups, queues=queues
    )


def measure(target: str, objects: standing.ClusterObjects) -> dict[str, Any]:
    """One ``kbatch explain bench/TARGET --eta``, less the listing and the printing."""
    conf = default_conf()
    wall, cpu = time.perf_counter(), time.process_time()
    session, _ = standing.open_session(objects, conf)
    opened_wall, opened_cpu = time.perf_counter() - wall, time.process_time() - cpu
    uid = f"bench/{target}"
    forecast = eta.forecast(session, objects, conf, [uid], budget=600.0)
    estimate = forecast.estimates[uid]
    return {
        "target": target,
        "seconds": round(time.perf_counter() - wall, 3),
        "cpu_seconds": round(time.process_time() - cpu, 3),
        "open_seconds": round(opened_wall, 3),
        "open_cpu_seconds": round(opened_cpu, 3),
        "sessions": forecast.sessions,
        "step": forecast.step,
        "eta_seconds": estimate.seconds,
        "confidence": estimate.confidence,
    }


def main(targets: Sequence[str] = TARGETS) -> int:
    objects = synthetic_cluster()
    for target in targets:
        print(json.dumps(measure(target, objects)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or TARGETS))
