"""``kbatch explain --eta`` on a synthetic cluster of 1,000 nodes and 10,000 pending pods.

A measurement more than a test: it prints how long the command took (everything but
listing the objects from an API server) and checks only that the answer is one. No
timing is asserted: the machine it runs on decides the figure. Run it with ``-s`` to
see the figure.
"""

import json
import random
import time

import pytest

from kbatch.cli import main as cli
from kbatch.cli import visibility as cli_visibility
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.sim import clock
from kbatch.visibility import standing as visibility

NOW = 1_700_000_000.0
NODES = 1000
GANGS, GANG_SIZE = 1000, 10  # waiting: 10,000 pods of 1 cpu
RUNNING_PER_NODE = 4  # 8 cpu each, nodes of 32 cpu: the cluster is full
QUEUES = 10


def stamp(seconds_ago: float) -> str:
    return clock.timestamp(NOW - seconds_ago)


def node(i: int) -> dict:
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
) -> dict:
    spec = {
        "schedulerName": "kbatch",
        "containers": [
            {"name": "main", "image": "x", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}
        ],
    }
    status: dict = {"phase": "Pending"}
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


def pod_group(name: str, size: int, queue: str, phase: str, created: float) -> dict:
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


def synthetic_cluster() -> visibility.ClusterObjects:
    """Full nodes whose pods end within two hours (their deadlines), and gangs waiting
    in 10 queues of weights 1 to 10, the first 300 admitted."""
    rng = random.Random(13)
    pods, groups = [], []
    for i in range(NODES):
        group = f"running-{i}"
        groups.append(pod_group(group, RUNNING_PER_NODE, f"q{i % QUEUES}", "Running", 7200))
        for k in range(RUNNING_PER_NODE):
            deadline = 600 + rng.randint(60, 7200)
            pods.append(pod(f"{group}-{k}", group, "8", 7200, f"node-{i:04d}", deadline))
    for i in range(GANGS):
        group = f"waiting-{i}"
        created = 3000 - i
        groups.append(
            pod_group(
                group, GANG_SIZE, f"q{i % QUEUES}", "Inqueue" if i < 300 else "Pending", created
            )
        )
        pods += [pod(f"{group}-{k}", group, "1", created) for k in range(GANG_SIZE)]
    queues = [
        {
            "kind": "Queue",
            "metadata": {"name": f"q{i}", "creationTimestamp": stamp(86400)},
            "spec": {"weight": i + 1},
        }
        for i in range(QUEUES)
    ]
    nodes = [node(i) for i in range(NODES)]
    return visibility.ClusterObjects(
        now=NOW, nodes=nodes, pods=pods, pod_groups=groups, queues=queues
    )


class Source:
    def __init__(self, objects: visibility.ClusterObjects) -> None:
        self._objects = objects

    def objects(self, *, jobs: bool, events_in: str | None) -> visibility.ClusterObjects:
        return self._objects

    def conf(self):
        return default_conf(), "the default"


@pytest.mark.parametrize("target", ["waiting-5", "waiting-500"])
def test_explain_eta_on_1000_nodes_and_10000_pending_pods(target, monkeypatch, capsys) -> None:
    objects = synthetic_cluster()
    monkeypatch.setattr(cli_visibility, "source_for", lambda args: Source(objects))
    began = time.perf_counter()
    code = cli.main(["explain", f"bench/{target}", "--eta", "--eta-budget", "10m", "-o", "json"])
    seconds = time.perf_counter() - began
    out, _ = capsys.readouterr()
    assert code == 0
    eta = json.loads(out)["eta"]
    assert eta["seconds"] is not None and eta["confidence"] == "high", eta
    with capsys.disabled():
        print(f"\nkbatch explain bench/{target} --eta: {seconds:.1f} s ({eta['text']})")
