"""``kbatch bench --record-cost``: what the flight recorder adds to a session.

The same synthetic cluster (``kbatch.bench.scheduling``) goes through ``kbatch run``'s
loop (``SchedulerLoop``) twice a round, once with recording off and once with it on,
in alternating order, in this process. With recording on the recorder is hooked as
``kbatch run --record`` hooks it: the cluster state's observer from before the first
object, the loop's backend and clock wrapped (``kbatch.record.store.hooks``), and the
conf told before each session; it writes into a temporary directory.

The backend stands in for the live one as the cluster state sees it: each session
takes its snapshot from the state, and each bind or eviction is assumed in the state
as the binder and evictor do before they send it (the observer hears of every one);
statuses and events go nowhere. So the timed region, one session (snapshot, actions,
outcome applied, metrics), holds everything the recorder adds to the session's
thread: the observer's calls and the queueing. It does not hold the writer thread,
which turns the queue into compressed JSON beside it; that thread's CPU seconds, from
the start of the timed session until what it queued is on disk, are reported apart,
because on a machine with few cores it competes with the scheduler all the same.

Before a timed session the heap is collected and the writer has written what loading
the cluster queued, so that neither lands in the session of one mode only.

``--backlog`` times the session after the first instead, as ``kbatch bench --backlog``
does: the first session's pods Running (as their watch events would bring them), the
rest waiting, under the actions enqueue, reclaim, allocate, backfill, preempt.

Wall seconds on a loaded machine say little, and the session thread's CPU seconds
(``cpu_*``, also reported) not much more. Its voluntary context switches
(``switches_*``) count the times it waited, none with recording off: with it on, the
hand-overs of the interpreter to the writer, each a wait for a CPU on a busy machine.
``--opcodes`` (``python -m kbatch.bench.record_cost``) counts the Python opcodes this
thread executes in the timed region instead (``OpcodeCounter``), which is the same on
every run. It counts the interpreter's work, not what C code does for it: the
recorder's C work (JSON, gzip) is the writer thread's, and its queue's ``put`` is one
call each.
"""

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from kbatch.api.podgroup import PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.bench import scheduling
from kbatch.cluster.assumed import ASSUMED_TTL
from kbatch.cluster.state import ClusterState
from kbatch.config import SchedulerConf
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.interface import Outcome, Snapshot
from kbatch.operators.scheduler.runtime.loop import ConfSource, SchedulerLoop
from kbatch.record.store import recorder, segments

SIZE = (1_000, 10_000)
BACKLOG_SIZE = (1_000, 50_000)
MAX_BYTES = 1 << 30  # the bound of each round's recording: none is reached
SCHEDULER_NAMES = frozenset({"kbatch"})
Timer = Callable[[], float]


@dataclass(frozen=True, slots=True)
class Spec:
    nodes: int
    pods: int
    backlog: bool = False


@dataclass(frozen=True, slots=True)
class Round:
    """One timed session: its seconds (or opcodes), its thread's CPU seconds and
    voluntary context switches (``switches``), its binds and evictions; with recording
    on, the writer thread's CPU seconds and the recording's bytes."""

    seconds: float
    cpu_seconds: float
    switches: int
    binds: int
    evictions: int
    writer_cpu_seconds: float = 0.0
    recording_bytes: int = 0


class StateBackend:
    """``kbatch run``'s backend as its cluster state sees it: snapshots from the state,
    binds and evictions assumed in it before they would be sent; the API calls left out."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.binds = 0
        self.evictions = 0
        self.bound: dict[str, str] = {}  # pod key -> node

    def snapshot(self) -> Snapshot:
        return self.state.snapshot()

    def apply(self, outcome: Outcome) -> None:
        decided.apply_in_order(self, outcome)

    def bind(self, task: TaskInfo, node: str) -> None:
        self.binds += 1
        self.bound[task.key] = node
        self.state.assume_bound(task.namespace, task.name, node)

    def evict(self, task: TaskInfo, reason: str, disruption: str) -> None:
        self.evictions += 1
        self.state.assume_releasing(task.namespace, task.name)

    def flush(self) -> None:
        pass

    def nominate(self, task: TaskInfo, node: str | None) -> None:
        pass

    def update_pod_group(self, namespace: str, name: str, status: PodGroupStatus) -> None:
        pass

    def update_queue(self, name: str, status: QueueStatus) -> None:
        pass

    def update_pod_condition(self, condition: decided.PodCondition) -> None:
        pass

    def record(self, ref: Any, type_: str, reason: str, message: str) -> None:
        pass


class OpcodeCounter:
    """A timer that counts instead of timing: called twice, it gives the number of
    Python opcodes this thread executed between the calls (``sys.settrace`` with
    opcode events; other threads, the recorder's writer among them, are not traced)."""

    def __init__(self) -> None:
        self.count = 0
        self.counting = False

    def _trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        if event == "opcode":
            self.count += 1
        return self._trace

    def __call__(self) -> float:
        if self.counting:
            sys.settrace(None)
            self.counting = False
            return float(self.count)
        self.counting = True
        value = float(self.count)
        sys.settrace(self._trace)
        return value


def conf_of(spec: Spec) -> SchedulerConf:
    """``kbatch bench``'s conf for the size, or for the backlog."""
    if spec.backlog:
        return scheduling.kube_batch_conf().model_copy(update={"actions": scheduling.FULL_ACTIONS})
    return scheduling.bench_conf()


def one_round(spec: Spec, directory: Path | None, timer: Timer = time.perf_counter) -> Round:
    """One timed session of ``spec``, recorded into ``directory`` (empty or new) as
    ``kbatch run --record`` records, or not recorded when it is None."""
    state = ClusterState(SCHEDULER_NAMES)
    flight = None
    if directory is not None:
        header = recorder.state_header(SCHEDULER_NAMES, False, ASSUMED_TTL, "monotonic")
        flight = recorder.Recorder(directory, MAX_BYTES, time.monotonic, header)
        state.observer = flight
    try:
        objects = list(scheduling.synthetic_objects(spec.nodes, spec.pods))
        for obj in objects:
            state.apply(obj)
        backend = StateBackend(state)
        loop = SchedulerLoop(
            backend,
            ConfSource.fixed(conf_of(spec)),
            period=1.0,
            metrics=SchedulerMetrics(),
            may_schedule=lambda: True,
            recorder=flight,
        )
        if spec.backlog:
            loop.run_once()
            _run_bound(state, objects, backend.bound)
        binds, evictions = backend.binds, backend.evictions
        _written(flight)
        scheduling.settled_heap()
        others, cpu, switches = _other_threads_cpu(), time.thread_time(), _switches()
        started = timer()
        loop.run_once()
        seconds = timer() - started
        cpu, switches = time.thread_time() - cpu, _switches() - switches
    finally:
        if flight is not None:
            flight.close(timeout=None)
    writer_cpu = _other_threads_cpu() - others if flight is not None else 0.0
    return Round(
        seconds,
        cpu,
        switches,
        backend.binds - binds,
        backend.evictions - evictions,
        writer_cpu,
        _bytes(directory) if directory is not None else 0,
    )


def _run_bound(state: ClusterState, objects: list[dict[str, Any]], bound: dict[str, str]) -> None:
    """The pods bound so far Running on their nodes, as their watch events bring them."""
    for obj in objects:
        if obj["kind"] != "Pod":
            continue
        node = bound.get(f"{obj['metadata']['namespace']}/{obj['metadata']['name']}")
        if node is not None:
            state.apply(
                {**obj, "spec": {**obj["spec"], "nodeName": node}, "status": {"phase": "Running"}}
            )


def _written(flight: recorder.Recorder | None) -> None:
    """Wait until the writer has written everything queued so far."""
    if flight is not None:
        flight.written()


def _switches() -> int:
    """This thread's voluntary context switches so far (Linux; else 0): each time it
    waited, for the interpreter among others. A session with recording off waits for
    nothing; each wait with it on is a hand-over to the writer thread, which on a busy
    machine costs a wait for a CPU."""
    try:
        with open("/proc/thread-self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _other_threads_cpu() -> float:
    """The CPU seconds of this process's threads but this one so far."""
    return time.process_time() - time.thread_time()


def _bytes(directory: Path) -> int:
    return sum(path.stat().st_size for _, path in segments.segment_files(directory))


def measure(spec: Spec, rounds: int, timer: Timer = time.perf_counter) -> dict[str, Any]:
    """``rounds`` rounds of a session with recording off and one with it on, in turns
    (off first in even rounds, on first in odd ones): one JSON line's fields."""
    off: list[Round] = []
    on: list[Round] = []
    for number in range(rounds):
        for recording in (False, True) if number % 2 == 0 else (True, False):
            if not recording:
                off.append(one_round(spec, None, timer))
                continue
            with tempfile.TemporaryDirectory(prefix="kbatch-record-cost-") as temp:
                on.append(one_round(spec, Path(temp) / "recording", timer))
    seconds_off = round(statistics.median(r.seconds for r in off), 6)
    seconds_on = round(statistics.median(r.seconds for r in on), 6)
    return {
        "nodes": spec.nodes,
        "pods": spec.pods,
        "backlog": spec.backlog,
        "rounds": rounds,
        "unit": "seconds" if timer is time.perf_counter else "opcodes",
        "binds": on[-1].binds,
        "evictions": on[-1].evictions,
        "seconds_off": seconds_off,
        "seconds_on": seconds_on,
        "ratio": round(seconds_on / seconds_off, 4) if seconds_off else None,
        "off_min_median_max": _spread([r.seconds for r in off]),
        "on_min_median_max": _spread([r.seconds for r in on]),
        "cpu_off_min_median_max": _spread([r.cpu_seconds for r in off]),
        "cpu_on_min_median_max": _spread([r.cpu_seconds for r in on]),
        "switches_off_min_median_max": _spread([r.switches for r in off]),
        "switches_on_min_median_max": _spread([r.switches for r in on]),
        "writer_cpu_seconds_min_median_max": _spread([r.writer_cpu_seconds for r in on]),
        "recording_bytes": max(r.recording_bytes for r in on),
    }


def _spread(values: Sequence[float]) -> list[float]:
    return [round(v, 6) for v in (min(values), statistics.median(values), max(values))]


def main(
    sizes: list[tuple[int, int]] | None, backlog: bool, rounds: int, opcodes: bool = False
) -> int:
    """One JSON line per size (default ``SIZE``, or ``BACKLOG_SIZE`` with ``backlog``)."""
    chosen = sizes or [BACKLOG_SIZE if backlog else SIZE]
    for nodes, pods in chosen:
        scheduling.check_size(nodes, pods)
    for nodes, pods in chosen:
        timer = OpcodeCounter() if opcodes else time.perf_counter
        print(json.dumps(measure(Spec(nodes, pods, backlog), rounds, timer)), flush=True)
    return 0


if __name__ == "__main__":
    # python -m kbatch.bench.record_cost [--size NxP] [--backlog] [--rounds R] [--opcodes]
    parser = argparse.ArgumentParser(prog="python -m kbatch.bench.record_cost")
    parser.add_argument("--size", default=None, metavar="NODESxPODS")
    parser.add_argument("--backlog", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--opcodes", action="store_true", help="count opcodes, not seconds")
    args = parser.parse_args()
    size = tuple(int(n) for n in args.size.split("x")) if args.size else None
    sys.exit(main([size] if size else None, args.backlog, args.rounds, args.opcodes))  # type: ignore[list-item]
