"""kbatch run's loop on a backlog that cannot move: once a session has changed nothing
(no bind, eviction, nomination, status or pod condition to write), the work waiting
gets no session of its own until the cluster or the conf changes, only the beat's; and
one scheduler runs every session, so that what rested at a close rests at the next open.

The cluster here is the simulator's (``SimBackend``): a state that plays API server,
writing back every status a session decides, as the watches would bring it back."""

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kbatch.cluster.state import ClusterState
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core.framework import pod_conditions, resting
from kbatch.operators.scheduler.runtime.loop import ConfSource, SchedulerLoop
from kbatch.sim.backend import SimBackend
from kbatch.sim.clock import SimClock
from tests.unit.framework.test_kept_statuses import group, node, pending_pod, queue, running_pod

IDLE_EVERY = 3
OTHER_CONF = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'


def backlog() -> ClusterState:
    """A node of 4 cpu running a gang of 2 cpu, and a gang of 2 pods of 8 cpu that
    cannot fit."""
    state = ClusterState()
    for obj in (
        node("a", "4"),
        queue(),
        group("runs", "2"),
        running_pod("runs-0", "2", "runs"),
        {**group("big", "16"), "spec": {**group("big", "16")["spec"], "minMember": 2}},
        pending_pod("big-0", "8", "big"),
        pending_pod("big-1", "8", "big"),
    ):
        state.apply(obj)
    return state


def looping(
    state: ClusterState,
    conf: ConfSource,
    leads: list[bool] | None = None,
    idle_every: int = IDLE_EVERY,
    clock: Callable[[], float] = time.time,
) -> SchedulerLoop:
    leading = [True] if leads is None else leads
    return SchedulerLoop(
        SimBackend(state, SimClock()),
        conf,
        period=1.0,
        metrics=SchedulerMetrics(),
        may_schedule=lambda: leading[0],
        has_work=state.has_work,
        generation=lambda: state.generation,
        idle_every=idle_every,
        clock=clock,
    )


def periods(loop: SchedulerLoop, count: int) -> list[bool]:
    """For each of ``count`` periods, whether a session ran."""
    ran = []
    for _ in range(count):
        before = loop.sessions
        loop.period_once()
        ran.append(loop.sessions > before)
    return ran


def test_a_backlog_that_cannot_move_waits_for_a_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pod_conditions, "PER_SESSION", 1)
    state = backlog()
    path = tmp_path / "conf.yaml"
    path.write_text(ConfSource(None).current().model_dump_json())  # (JSON is YAML)
    loop = looping(state, ConfSource(path))
    # The first session writes the waiting gang's status and a pod's condition, the
    # second the other pod's; the next finds them written and changes nothing: from
    # then on, the beat alone.
    assert periods(loop, 3) == [True, True, True]
    assert periods(loop, 2 * IDLE_EVERY) == [False, False, True] * 2
    assert state.has_work()  # the gang still waits: before, a session every period
    # A change to the cluster: a session at once.
    state.apply(node("b", "8"))
    state.apply(node("c", "8"))
    assert periods(loop, 1) == [True]  # (and it places the gang)
    assert all(state.get("Pod", "ns", f"big-{i}")["spec"].get("nodeName") for i in (0, 1))


def test_a_new_conf_gets_a_session_at_once(tmp_path: Path) -> None:
    state = backlog()
    path = tmp_path / "conf.yaml"
    path.write_text(ConfSource(None).current().model_dump_json())
    loop = looping(state, ConfSource(path))
    assert periods(loop, 2 + IDLE_EVERY) == [True, True, False, False, True]  # the beat
    assert periods(loop, 1) == [False]
    path.write_text(OTHER_CONF)
    assert periods(loop, 1) == [True]


def test_one_scheduler_carries_the_resting_gangs(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    quiet_gang = resting.rests

    def rests(job: Any, kept: Any) -> bool:
        asked.append(job.name)
        return quiet_gang(job, kept)

    monkeypatch.setattr("kbatch.operators.scheduler.core.runner.rests", rests)
    state = backlog()
    loop = looping(state, ConfSource(None))
    for _ in range(4):
        loop.run_once()  # (every one: the loop's beat is not what this asks)
    scheduler = loop._scheduler
    assert scheduler is not None and "ns/runs" in scheduler.resting.jobs
    # Asked whether it rests until it did, then carried from close to open, unasked.
    assert asked.count("runs") < 4
    loop.run_once()
    assert loop._scheduler is scheduler and asked.count("runs") < 4


def test_a_session_that_wrote_runs_again_though_its_write_did_not_land(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a session decides to write it decides again at the next: a write lost on
    the way (an API error) changes nothing in the cluster, yet is no reason to wait."""
    monkeypatch.setattr(SimBackend, "update_pod_condition", lambda *_: None)
    loop = looping(backlog(), ConfSource(None))
    assert periods(loop, 4) == [True] * 4


def test_a_replica_that_leads_again_starts_afresh() -> None:
    """Not leading, it forgets what it settled on and what rested: the cluster went on
    without it. Leading again, a session at once, by a new scheduler."""
    leads = [True]
    loop = looping(backlog(), ConfSource(None), leads)
    assert periods(loop, 3) == [True, True, False]
    scheduler = loop._scheduler
    leads[0] = False
    assert periods(loop, 2) == [False, False]
    leads[0] = True
    assert periods(loop, 1) == [True]
    assert loop._scheduler is not None and loop._scheduler is not scheduler


LIFETIME_CONF = """
actions: "enqueue, reclaim, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}, {name: lifetime}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
STARTED = 1704067260.0  # running_pod's startTime, 2024-01-01T00:01:00Z


def queue_a_full_b_waiting() -> ClusterState:
    """Queue qa fills the 4-cpu node with four 1-cpu jobs of lifetime 2m, started at
    STARTED; queue qb waits for 2 cpu, within its half: it may take them back once
    their lifetime is over (the lifetime plugin), not before."""
    state = ClusterState()
    state.apply(node("a", "4"))
    for name in ("qa", "qb"):
        state.apply({"kind": "Queue", "metadata": {"name": name}, "spec": {"weight": 1}})
    for i in range(4):
        protected = group(f"a{i}", "1")
        protected["spec"]["queue"] = "qa"
        protected["metadata"]["annotations"] = {"kbatch.io/lifetime": "2m"}
        state.apply(protected)
        state.apply(running_pod(f"a{i}-0", "1", f"a{i}"))
    asking = group("b", "2")
    asking["spec"]["queue"] = "qb"
    state.apply(asking)
    state.apply(pending_pod("b-0", "2", "b"))
    return state


def test_a_settled_backlog_runs_when_a_lifetime_ends(tmp_path: Path) -> None:
    """The lifetime plugin decides by the clock: the session it opens says when it
    decides otherwise (``Session.wakes_at``), and the loop runs one then, settled or
    not, beat or not."""
    path = tmp_path / "conf.yaml"
    path.write_text(LIFETIME_CONF)
    state = queue_a_full_b_waiting()
    now = [STARTED + 30.0]
    loop = looping(state, ConfSource(path), idle_every=1000, clock=lambda: now[0])  # (no beat)
    assert periods(loop, 3) == [True, True, False]  # settled: nothing may go yet
    now[0] = STARTED + 119.0
    assert periods(loop, 1) == [False]
    now[0] = STARTED + 120.0  # the lifetimes are over
    assert periods(loop, 1) == [True]
    evicted = [p for p in state.list("Pod") if p["metadata"].get("deletionTimestamp")]
    assert evicted, "qb took back its share"
