"""``kbatch bench``: fixed synthetic clusters through one scheduling session.

Each size runs in a fresh Python process (``python -m kbatch.bench.scheduling NODES PODS``)
and prints one JSON line: nodes, pods, binds, seconds (the session: open,
actions, close), snapshot_seconds (building the snapshot from parsed objects),
and peak_rss_mib, the peak resident memory of that process — the interpreter
and kbatch's imports (some 60 MiB) plus that size's objects, and nothing left
over from an earlier size. The heap is collected once the cluster is loaded, before
the timing starts (``settled_heap``). Jobs are gangs of 10 tasks of 1 cpu / 2Gi (so pods
is a multiple of 10); nodes 32 cpu / 128Gi / 110 pods; 10 queues of weights
1..10 (or another layout of queues, flat or a tree: ``kbatch.bench.queue_layout``);
default tiers; action allocate.

``--queues tree:AxBxC --versus-flat`` runs each size with its jobs in the tree and in as
many flat queues, alternating, each run in a fresh process, and prints both runs'
min/median/max seconds and the ratio of their medians (tree over flat).

``--backlog`` times the session that follows instead, on a cluster with more
pods than room, under the chart's actions (enqueue, reclaim, allocate, backfill,
preempt): the first session's pods are Running, the rest wait. That session has
little to place and much to try (every waiting gang asks reclaim and preempt for
room), which is what a busy cluster paid every period. Its line adds running,
waiting and evictions; and what ``kbatch run``'s loop pays once that backlog has
settled (``settled_loop``): the sessions of ``SETTLED_PERIODS`` periods, and their
seconds per period.

``--trace`` simulates a day of a mixed workload instead (``kbatch.sim.trace``) and
prints how many simulated seconds a wall second covers.
"""

import gc
import itertools
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbatch.bench.queue_layout import FLAT_10, QueueLayout
from kbatch.cluster.state import ClusterState
from kbatch.config import KUBE_BATCH_CONF, SchedulerConf
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.interface import Outcome, Snapshot

if TYPE_CHECKING:
    from kbatch.sim.trace import TraceSpec

SIZES = ((100, 1_000), (1_000, 10_000), (5_000, 50_000), (10_000, 100_000))
BACKLOG_SIZES = ((100, 5_000), (1_000, 50_000))
FULL_ACTIONS = ("enqueue", "reclaim", "allocate", "backfill", "preempt")
SETTLED_PERIODS = 20
TASKS_PER_JOB = 10


def synthetic_objects(
    nodes: int, pods: int, layout: QueueLayout = FLAT_10
) -> Iterator[dict[str, Any]]:
    yield from layout.queue_objects()
    for n in range(nodes):
        yield {
            "kind": "Node",
            "metadata": {"name": f"node-{n:05d}"},
            "status": {
                "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    uids = itertools.count()
    for j in range(pods // TASKS_PER_JOB):
        yield from gang_objects(f"job-{j:05d}", TASKS_PER_JOB, layout.leaf(j), uids)


def gang_objects(
    name: str,
    size: int,
    queue: str,
    uids: Iterator[int],
    annotations: dict[str, str] | None = None,
) -> Iterator[dict[str, Any]]:
    """An admitted PodGroup of ``size`` pods of 1 cpu / 2Gi in namespace bench."""
    metadata: dict[str, Any] = {"name": name, "namespace": "bench", "creationTimestamp": None}
    if annotations:
        metadata["annotations"] = dict(annotations)
    yield {
        "kind": "PodGroup",
        "metadata": metadata,
        "spec": {"minMember": size, "queue": queue},
        "status": {"phase": "Inqueue"},
    }
    container = {"name": "main", "resources": {"requests": {"cpu": "1", "memory": "2Gi"}}}
    for t in range(size):
        yield {
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{t}",
                "namespace": "bench",
                "uid": f"{next(uids):08d}",
                "annotations": {"scheduling.k8s.io/group-name": name},
            },
            "spec": {"schedulerName": "kbatch", "containers": [container]},
        }


@dataclass
class CountingCluster:
    """Takes a session's outcome and only counts it."""

    snap: Snapshot
    binds: int = 0
    evictions: int = 0
    bound: dict[str, str] = field(default_factory=dict)  # pod key -> node

    def apply(self, outcome: Outcome) -> None:
        self.binds += len(outcome.binds)
        self.evictions += len(outcome.evictions)
        self.bound.update((bind.task.key, bind.node) for bind in outcome.binds)

    def snapshot(self) -> Snapshot:
        return self.snap


def loaded_state(objects: Iterable[dict[str, Any]]) -> ClusterState:
    state = ClusterState()
    for obj in objects:
        state.apply(obj)
    return state


def timed_session(cluster: CountingCluster, conf: SchedulerConf, now: float = 0.0) -> float:
    """One session on ``cluster``; its seconds (open, actions, close)."""
    scheduler = runner.Scheduler(cluster, conf, clock=lambda: now, session_ids=lambda: "bench")
    started = time.perf_counter()
    scheduler.run_once()
    return time.perf_counter() - started


def settled_heap() -> None:
    """A full garbage collection, before what is timed. Loading the cluster leaves the
    collector's counts wherever they happen to fall, so whether a full collection (a walk
    over every object the state holds: 0.3 s and more at 50,000 pods) landed in the timed
    snapshot or session hung on that history rather than on their own work: a change
    elsewhere (more objects made while loading) moved one into the snapshot, doubling
    snapshot_seconds. Collections the timed code sets off itself are still timed."""
    gc.collect()


def run_size(
    nodes: int, pods: int, conf: SchedulerConf, layout: QueueLayout = FLAT_10
) -> dict[str, Any]:
    state = loaded_state(synthetic_objects(nodes, pods, layout))
    settled_heap()
    started = time.perf_counter()
    snap = state.snapshot()
    snapshot_seconds = time.perf_counter() - started
    cluster = CountingCluster(snap)
    seconds = timed_session(cluster, conf)
    return {
        "nodes": nodes,
        "pods": pods,
        "queues": str(layout),
        "binds": cluster.binds,
        "seconds": round(seconds, 3),
        "snapshot_seconds": round(snapshot_seconds, 3),
        "peak_rss_mib": round(peak_rss_kib() / 1024, 1),
    }


def run_backlog(nodes: int, pods: int, layout: QueueLayout = FLAT_10) -> dict[str, Any]:
    """The session after the first, under FULL_ACTIONS: what fits Running, the rest
    waiting."""
    conf = kube_batch_conf().model_copy(update={"actions": FULL_ACTIONS})
    objects = list(synthetic_objects(nodes, pods, layout))
    state = loaded_state(objects)
    first = CountingCluster(state.snapshot())
    timed_session(first, conf)
    for obj in objects:
        if obj["kind"] != "Pod":
            continue
        node = first.bound.get(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")
        if node is not None:
            obj["spec"]["nodeName"] = node
            obj["status"] = {"phase": "Running"}
            state.apply(obj)
    cluster = CountingCluster(state.snapshot())
    settled_heap()
    seconds = timed_session(cluster, conf, now=1.0)
    return {
        "nodes": nodes,
        "pods": pods,
        "queues": str(layout),
        "running": first.binds,
        "waiting": pods - first.binds,
        "binds": cluster.binds,
        "evictions": cluster.evictions,
        "seconds": round(seconds, 3),
        **settled_loop(state, conf),
        "peak_rss_mib": round(peak_rss_kib() / 1024, 1),
    }


def settled_loop(
    state: ClusterState, conf: SchedulerConf, periods: int = SETTLED_PERIODS
) -> dict[str, Any]:
    """``kbatch run``'s loop (``SchedulerLoop``, a period at a time) on ``state`` through
    the simulator's cluster, which writes back every status and pod condition a session
    decides, as the API server would: periods until a session changes nothing (the
    backlog has settled: nothing can move), then ``periods`` more. Their sessions, and
    their wall seconds per period."""
    from kbatch.metrics import SchedulerMetrics
    from kbatch.operators.scheduler.runtime.loop import ConfSource, SchedulerLoop
    from kbatch.sim.backend import SimBackend
    from kbatch.sim.clock import SimClock

    loop = SchedulerLoop(
        SimBackend(state, SimClock()),
        ConfSource.fixed(conf),
        period=1.0,
        metrics=SchedulerMetrics(),
        may_schedule=lambda: True,
        has_work=state.has_work,
        generation=lambda: state.generation,
    )
    while not loop.settled():
        loop.period_once()
    sessions = loop.sessions
    started = time.perf_counter()
    for _ in range(periods):
        loop.period_once()
    seconds = time.perf_counter() - started
    return {
        "settled_periods": periods,
        "settled_sessions": loop.sessions - sessions,
        "settled_seconds_per_period": round(seconds / periods, 3),
    }


def run_trace(
    spec: "TraceSpec", record: tuple[Path, int] | None = None, conf: Path | None = None
) -> dict[str, Any]:
    """``--trace``: a day of a mixed workload simulated (``kbatch.sim.trace``), in this
    process, under the scheduler conf in the file ``conf`` (``main``'s ``trace_conf``;
    None: the default conf); with its peak RSS; recorded into ``record`` (directory,
    bound) if given."""
    from kbatch.sim import trace

    loaded = None if conf is None else runner.load_conf_file(conf)
    result = trace.run(spec, record, loaded)
    return {
        **result,
        "conf": "default" if conf is None else str(conf),
        "peak_rss_mib": round(peak_rss_kib() / 1024, 1),
    }


def peak_rss_kib() -> int:
    """This process's peak resident memory. Linux: VmHWM, which starts afresh at exec
    (ru_maxrss does not: it keeps the forking parent's peak)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS


def kube_batch_conf() -> SchedulerConf:
    """kube-batch's conf, pinned (not the default, which borrows and reserves): the
    bench measures what it always has, so builds compare."""
    return runner.load_conf(KUBE_BATCH_CONF, "<kube-batch conf>")


def bench_conf() -> SchedulerConf:
    """kube-batch's tiers, with the allocate action alone."""
    return kube_batch_conf().model_copy(update={"actions": ("allocate",)})


def check_size(nodes: int, pods: int) -> None:
    """ValueError unless both are positive and pods fill whole gangs."""
    if nodes <= 0 or pods <= 0:
        raise ValueError("nodes and pods must be positive")
    if pods % TASKS_PER_JOB:
        raise ValueError(
            f"pods must be a multiple of {TASKS_PER_JOB} (gangs of {TASKS_PER_JOB} tasks)"
        )


def run_in_fresh_process(
    nodes: int, pods: int, backlog: bool = False, layout: QueueLayout = FLAT_10
) -> dict[str, Any]:
    """``run_size`` (or ``run_backlog``) in a new interpreter, so that its peak RSS is
    that size's own."""
    # -P: import kbatch as installed, not from a source tree in the working directory.
    mode = ["backlog"] if backlog else []
    done = subprocess.run(
        [
            *(sys.executable, "-P", "-m", "kbatch.bench.scheduling"),
            *(str(nodes), str(pods), str(layout), *mode),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the benchmark of {nodes}x{pods} ({layout}) failed:\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def versus_flat(
    nodes: int, pods: int, layout: QueueLayout, rounds: int, backlog: bool = False
) -> dict[str, Any]:
    """``layout`` against its leaves laid flat (``QueueLayout.flat``): ``rounds`` runs of
    each, alternating which goes first, each in a fresh process; min/median/max seconds
    of both and the ratio of the medians (layout over flat)."""
    if layout.depth == 1:
        raise ValueError(f"--queues {layout}: the side by side needs a tree, tree:AxBxC")
    flat = layout.flat()
    runs: dict[QueueLayout, list[dict[str, Any]]] = {layout: [], flat: []}
    for r in range(rounds):
        for each in (layout, flat) if r % 2 == 0 else (flat, layout):
            runs[each].append(run_in_fresh_process(nodes, pods, backlog, each))

    def spread(which: QueueLayout) -> list[float]:
        seconds = sorted(run["seconds"] for run in runs[which])
        return [seconds[0], statistics.median(seconds), seconds[-1]]

    tree_s, flat_s = spread(layout), spread(flat)
    return {
        "nodes": nodes,
        "pods": pods,
        "queues": str(layout),
        "flat_queues": str(flat),
        "binds": runs[layout][-1]["binds"],
        "flat_binds": runs[flat][-1]["binds"],
        "rounds": rounds,
        "seconds_min_median_max": tree_s,
        "flat_seconds_min_median_max": flat_s,
        "ratio": round(tree_s[1] / max(flat_s[1], 1e-9), 3),
    }


def main(
    sizes: list[tuple[int, int]] | None = None,
    backlog: bool = False,
    trace_conf: Path | None = None,
    trace: "TraceSpec | None" = None,
    record: tuple[Path, int] | None = None,
    layout: QueueLayout = FLAT_10,
    versus_flat_rounds: int | None = None,
) -> int:
    """``record``: with ``trace``, the directory and bound of its flight recording.
    ``versus_flat_rounds``: run each size as ``versus_flat`` with that many rounds."""
    if trace is not None:
        print(json.dumps(run_trace(trace, record, trace_conf)), flush=True)
        return 0
    chosen = sizes or list(BACKLOG_SIZES if backlog else SIZES)
    for nodes, pods in chosen:
        check_size(nodes, pods)
    for nodes, pods in chosen:
        if versus_flat_rounds is None:
            line = run_in_fresh_process(nodes, pods, backlog, layout)
        else:
            line = versus_flat(nodes, pods, layout, versus_flat_rounds, backlog)
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    # One size, in this process:
    # ``python -m kbatch.bench.scheduling NODES PODS [LAYOUT] [backlog]``.
    nodes, pods = (int(arg) for arg in sys.argv[1:3])
    rest = sys.argv[3:]
    chosen_layout = QueueLayout.parse(rest.pop(0)) if rest and ":" in rest[0] else FLAT_10
    if rest == ["backlog"]:
        print(json.dumps(run_backlog(nodes, pods, chosen_layout)))
    else:
        print(json.dumps(run_size(nodes, pods, bench_conf(), chosen_layout)))
