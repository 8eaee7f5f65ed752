"""Bind throughput: ``kbatch run`` against a bare pods/binding loop, same server, same run.

    .venv/bin/python tests/e2e/bench_binds.py [--pods 2000] [--nodes 50]

Starts a local control plane (as the e2e suite does, or uses KBATCH_E2E_KUBECONFIG),
then (1) creates N pods no scheduler owns and binds them from a thread pool as fast
as the server takes it (the physical limit here), (2) creates N pods for kbatch,
starts ``kbatch run`` and times from its first bind to the last. Prints one JSON line.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from e2e.controlplane import Cluster, discover
from kbatch.operators.scheduler.kube import request

WORKERS = 16
NAMESPACE = "default"


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def node_status() -> dict[str, Any]:
    return {
        "status": {
            "allocatable": {"cpu": "1000", "memory": "4000Gi", "pods": "10000"},
            "capacity": {"cpu": "1000", "memory": "4000Gi", "pods": "10000"},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    }


def pod(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "10m"}}}],
        },
    }


def create_pods(api: Any, prefix: str, count: int, scheduler: str) -> None:
    with ThreadPoolExecutor(WORKERS) as pool:
        list(
            pool.map(
                lambda i: request(
                    api,
                    "POST",
                    f"/api/v1/namespaces/{NAMESPACE}/pods",
                    pod(f"{prefix}-{i}", scheduler),
                ),
                range(count),
            )
        )


def bare_loop(api: Any, count: int, nodes: int) -> float:
    create_pods(api, "bare", count, "nobody")

    def bind(i: int) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": f"bare-{i}"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": f"node-{i % nodes}"},
        }
        request(api, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods/bare-{i}/binding", body)

    started = time.perf_counter()
    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(bind, range(count)))
    return count / (time.perf_counter() - started)


def pooled(api: Any) -> Any:
    api.configuration.connection_pool_maxsize = 32
    api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 32
    return api


def bound(api: Any, prefix: str) -> int:
    pods = request(api, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods", timeout=60)["items"]
    return sum(
        1 for p in pods if p["metadata"]["name"].startswith(prefix) and p["spec"].get("nodeName")
    )


def kbatch_run(api: Any, cluster: Cluster, count: int) -> float:
    create_pods(api, "kb", count, "kbatch")
    kbatch = Path(sys.executable).with_name("kbatch")
    proc = subprocess.Popen(
        [
            str(kbatch),
            "run",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--no-leader-elect",
            "--metrics-address",
            "",
            "--health-address",
            "",
            "--log-level",
            "warning",
        ],
    )
    try:
        started = None
        while True:
            done = bound(api, "kb")
            if started is None and done > 0:
                started = time.perf_counter()
            if done >= count:
                break
            time.sleep(0.05)
        assert started is not None
        # the first poll that saw a bind came up to one poll late: count the whole run from it
        return count / max(time.perf_counter() - started, 1e-9)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=50)
    args = parser.parse_args()
    source = discover()
    cluster = source if isinstance(source, Cluster) else source.start()
    try:
        api = pooled(cluster.api_client())
        crds = Path(__file__).resolve().parents[2] / "crds"
        for path in sorted(crds.glob("*.yaml")):
            import yaml

            request(
                api,
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                yaml.safe_load(path.read_text()),
            )
        for i in range(args.nodes):
            request(api, "POST", "/api/v1/nodes", node(f"node-{i}"))
            request(
                api,
                "PATCH",
                f"/api/v1/nodes/node-{i}/status",
                node_status(),
                "application/merge-patch+json",
            )
        bare = bare_loop(api, args.pods, args.nodes)
        ours = kbatch_run(api, cluster, args.pods)
        print(
            json.dumps(
                {
                    "pods": args.pods,
                    "nodes": args.nodes,
                    "workers": WORKERS,
                    "bare_binds_per_second": round(bare, 1),
                    "kbatch_binds_per_second": round(ours, 1),
                    "ratio": round(ours / bare, 3),
                }
            )
        )
    finally:
        if cluster is not source:
            source.stop()  # type: ignore[union-attr]
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
