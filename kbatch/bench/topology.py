"""``kbatch bench --topology``: the cost of topology-aware gang placement (DESIGN §12).

A synthetic cluster on a 4-level topology — zones of 5 blocks, blocks of 10 racks,
racks of 20 nodes, and the hostname — with nodes of 32 cpu / 128Gi, and gangs of 8
to 64 pods of 1 cpu / 2Gi (sizes cycling 8, 16, ..., 64) in 10 queues, every gang
preferring one rack (``kbatch.io/topology-preferred: kbatch.io/rack``). One session
of the allocate action with the default tiers places them; the same cluster with
no gang asking is timed too, each in a fresh process, and the line gives both and
their ratio (the issue's bound: 1.5), with how many gangs landed in one rack.

    python -m kbatch.bench.topology NODES PODS [plain]   # one run, one JSON line
"""

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

from kbatch.bench.scheduling import (
    CountingCluster,
    bench_conf,
    gang_objects,
    loaded_state,
    peak_rss_kib,
    timed_session,
)
from kbatch.config import SchedulerConf, TopologyConf

ZONE, BLOCK, RACK, HOST = (
    "topology.kubernetes.io/zone",
    "kbatch.io/block",
    "kbatch.io/rack",
    "kubernetes.io/hostname",
)
LEVELS = (ZONE, BLOCK, RACK, HOST)
NODES_PER_RACK, RACKS_PER_BLOCK, BLOCKS_PER_ZONE = 20, 10, 5
GANG_SIZES = (8, 16, 24, 32, 40, 48, 56, 64)
QUEUES = 10
SIZES = ((5_000, 50_000),)


def topology_objects(nodes: int, pods: int, prefer: bool) -> Iterator[dict[str, Any]]:
    for q in range(QUEUES):
        yield {"kind": "Queue", "metadata": {"name": f"q{q}"}, "spec": {"weight": q + 1}}
    yield {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}}
    for n in range(nodes):
        rack = n // NODES_PER_RACK
        block = rack // RACKS_PER_BLOCK
        name = f"node-{n:05d}"
        labels = {
            ZONE: f"zone-{block // BLOCKS_PER_ZONE}",
            BLOCK: f"block-{block:03d}",
            RACK: f"rack-{rack:04d}",
            HOST: name,
        }
        yield {
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "status": {
                "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    yield from _gangs(pods, prefer)


def _gangs(pods: int, prefer: bool) -> Iterator[dict[str, Any]]:
    annotations = {"kbatch.io/topology-preferred": RACK} if prefer else None
    uids = itertools.count()
    left = pods
    for j, size in enumerate(itertools.cycle(GANG_SIZES)):
        size = min(size, left)
        if size <= 0:
            return
        left -= size
        yield from gang_objects(f"gang-{j:05d}", size, f"q{j % QUEUES}", uids, annotations)


def topology_conf() -> SchedulerConf:
    return bench_conf().model_copy(update={"topology": TopologyConf(levels=LEVELS)})


def run_once(nodes: int, pods: int, prefer: bool) -> dict[str, Any]:
    state = loaded_state(topology_objects(nodes, pods, prefer))
    started = time.perf_counter()
    snap = state.snapshot()
    snapshot_seconds = time.perf_counter() - started
    racks = {info.name: info.labels[RACK] for info in snap.nodes.infos}
    cluster = CountingCluster(snap)
    seconds = timed_session(cluster, topology_conf())
    by_gang: dict[str, set[str]] = {}
    for pod, node in cluster.bound.items():
        by_gang.setdefault(pod.rpartition("-")[0], set()).add(racks[node])
    return {
        "nodes": nodes,
        "pods": pods,
        "gangs": len(by_gang),
        "binds": cluster.binds,
        "seconds": round(seconds, 3),
        "snapshot_seconds": round(snapshot_seconds, 3),
        "gangs_in_one_rack": sum(1 for found in by_gang.values() if len(found) == 1),
        "peak_rss_mib": round(peak_rss_kib() / 1024, 1),
    }


def _fresh(nodes: int, pods: int, prefer: bool) -> dict[str, Any]:
    mode = [] if prefer else ["plain"]
    done = subprocess.run(
        [sys.executable, "-P", "-m", "kbatch.bench.topology", str(nodes), str(pods), *mode],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the topology benchmark of {nodes}x{pods} failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def measure(nodes: int, pods: int) -> dict[str, Any]:
    """Both runs, each in a fresh process: the line ``kbatch bench --topology`` prints."""
    preferring = _fresh(nodes, pods, prefer=True)
    plain = _fresh(nodes, pods, prefer=False)
    return {
        **preferring,
        "plain_seconds": plain["seconds"],
        "plain_gangs_in_one_rack": plain["gangs_in_one_rack"],
        "ratio": round(preferring["seconds"] / max(plain["seconds"], 1e-9), 2),
    }


def check_size(nodes: int, pods: int) -> None:
    """ValueError unless both are positive (gangs of any size: the last one is cut)."""
    if nodes <= 0 or pods <= 0:
        raise ValueError("nodes and pods must be positive")


def main(sizes: list[tuple[int, int]] | None = None) -> int:
    """``kbatch bench --topology``: one line per size (default ``SIZES``), each measured
    in fresh processes (``measure``)."""
    chosen = sizes or list(SIZES)
    for nodes, pods in chosen:
        check_size(nodes, pods)
    for nodes, pods in chosen:
        print(json.dumps(measure(nodes, pods)), flush=True)
    return 0


if __name__ == "__main__":
    nodes, pods = (int(arg) for arg in sys.argv[1:3])
    print(json.dumps(run_once(nodes, pods, prefer=sys.argv[3:] != ["plain"])))
