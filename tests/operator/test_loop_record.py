"""kbatch run's loop with a flight recorder: each scheduler it makes, each conf it
sessions under, each session's time and decisions are recorded, and the recording
replays with the same decisions. The recorder's calls only enqueue: with its writer
held up, the loop's sessions run on, and everything is written once it is free.

The cluster is the simulator's (``SimBackend``), as in ``test_loop_settled``."""

import gzip
import json
import threading
import time
from pathlib import Path
from typing import Any

from kbatch.cluster.state import ClusterState
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core.runner import load_conf
from kbatch.operators.scheduler.runtime.loop import ConfSource, SchedulerLoop
from kbatch.record import replay
from kbatch.record.store import recorder, segments
from kbatch.sim.backend import SimBackend
from kbatch.sim.clock import SimClock
from tests.unit.framework.test_kept_statuses import group, node, pending_pod, queue

OTHER_CONF = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'


def _records(directory: Path) -> list[dict[str, Any]]:
    lines = []
    for _, path in segments.segment_files(directory):
        with gzip.open(path, "rb") as stream:
            lines += [json.loads(line) for line in stream]
    return lines


def test_the_loop_records_its_sessions_and_they_replay(tmp_path: Path) -> None:
    made = recorder.Recorder(tmp_path / "rec", 1 << 20, clock=time.monotonic)
    state = ClusterState()
    state.observer = made
    for obj in (node("a", "4"), queue(), group("g", "2"), pending_pod("g-0", "1", "g")):
        state.apply(obj)
    leading = [True]
    conf = ConfSource.fixed(
        load_conf('actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n')
    )
    loop = SchedulerLoop(
        SimBackend(state, SimClock()),
        conf,
        period=1.0,
        metrics=SchedulerMetrics(),
        may_schedule=lambda: leading[0],
        recorder=made,
    )
    loop.run_once()
    state.apply(pending_pod("g-1", "1", "g"))
    loop.run_once()
    conf._conf = load_conf(OTHER_CONF)  # a reloaded conf
    loop.run_once()
    leading[0] = False
    loop.period_once()  # the lead lost: the next session's scheduler is a new one
    leading[0] = True
    state.apply(pending_pod("g-2", "1", "g"))
    loop.run_once()
    made.close()
    ops = [r["op"] for r in _records(tmp_path / "rec") if "op" in r]
    assert ops.count("sched") == 2
    assert ops.count("conf") == 2
    assert ops.count("sess") == ops.count("out") == ops.count("now") == 4
    result = replay.replay(tmp_path / "rec").as_json()
    assert result["sessions"] == 4
    assert result["by_kind"]["binds"]["recorded"] >= 2
    assert result["decisions"]["differing"] == 0


def test_the_recorders_calls_only_enqueue(tmp_path: Path) -> None:
    made = recorder.Recorder(tmp_path / "rec", 1 << 20, clock=lambda: 0.0)
    free = threading.Event()
    write = made.writer.write

    def held_up(record: dict[str, Any]) -> None:
        free.wait(30)
        write(record)

    made.writer.write = held_up  # type: ignore[method-assign]
    started = time.perf_counter()
    for i in range(2000):
        made.applied("Pod", f"ns/p-{i}", {"kind": "Pod", "metadata": {"name": f"p-{i}"}})
    made.session()
    made.decided(([["ns/p-1", "a"]], [], [], [], []))
    assert time.perf_counter() - started < 5.0  # the writer waits; the calls did not
    free.set()
    made.close()
    records = list(segments.Reading(tmp_path / "rec").records())
    assert len(records) == 2002
    assert records[-1]["binds"] == [["ns/p-1", "a"]]
