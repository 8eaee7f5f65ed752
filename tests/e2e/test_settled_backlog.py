"""On a real API server, ``kbatch run`` with work that cannot move runs no session every
period: once a session has changed nothing, the next waits for a change (or the beat,
every 5 periods); a change gets one at once. Before, the pod waiting alone ran a
session every period, to decide nothing."""

import time
from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.test_ha import Corner

pytestmark = pytest.mark.e2e

PERIOD = 0.2
WATCHED = 3.0  # seconds: 15 periods, 3 beats
IDLE_EVERY = 5  # SchedulerLoop's default


def told_unschedulable(corner: Corner) -> bool:
    return any(
        c["type"] == "PodScheduled" and c["status"] == "False"
        for p in corner.pods()
        for c in (p.get("status") or {}).get("conditions") or []
    )


def test_a_backlog_that_cannot_move_costs_a_session_a_beat(
    corner: Corner, kbatch_runs: Any
) -> None:
    corner.add_nodes(1, "2")
    corner.add_pods([corner.pod("big", "4")])
    run = kbatch_runs.start(
        f"settled-{corner.suffix}",
        scheduler_names=(corner.scheduler_name,),
        lock_namespace=corner.namespace,
        period=f"{int(PERIOD * 1000)}ms",
    )
    try:
        poll("the pod told it is unschedulable", lambda: told_unschedulable(corner), 60)
        time.sleep(4 * PERIOD)  # the write seen back, and the session after it
        before = run.health()["sessions"]
        time.sleep(WATCHED)
        ran = run.health()["sessions"] - before
        periods = WATCHED / PERIOD
        print(f"{ran} sessions in {periods:.0f} periods")
        assert ran <= periods / IDLE_EVERY + 2, ran
        assert corner.bound() == []
        corner.add_node(f"settled-{corner.suffix}-big", "8")  # a change: a session at
        # once, which binds the pod
        poll("the pod bound", lambda: corner.bound(), 30)
    finally:
        run.stop()
