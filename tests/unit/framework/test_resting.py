"""Resting gangs (``framework.resting``): one scheduler's sessions over a state that
hands jobs from snapshot to snapshot write and tell the same with them as without
(``Shortcuts.rest_quiet_gangs`` off), while running gangs rest, one is preempted (the session
touches it: it wakes), a queue comes, and a gang finishes; and what rested is carried
to the next session only along one line of snapshots, under the same conf and queues."""

from typing import Any, cast

import pytest

from kbatch.bench.scheduling import FULL_ACTIONS
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework import resting
from kbatch.operators.scheduler.core.framework.interface import Outcome, Snapshot
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from tests.unit.framework.test_kept_statuses import (
    Applying,
    Step,
    applying,
    group,
    node,
    nothing,
    pending_pod,
    queue,
    running_pod,
)


class Writing(Applying):
    """The state's snapshots, one after another, with the PodGroup and Queue statuses
    each session decides written back (as the simulator and the cluster do)."""

    def __init__(self, state: ClusterState) -> None:
        super().__init__(state, cast(Snapshot, None))  # (each made when asked)

    def snapshot(self) -> Snapshot:
        return self.state.snapshot()

    def apply(self, outcome: Outcome) -> None:
        for q in outcome.queues:
            self.written.append((q.name, q.status.model_dump(mode="json", exclude_none=True)))
        super().apply(outcome)


def urgent_pod() -> dict[str, Any]:
    pod = pending_pod("urgent", "1", "urgent")
    pod["spec"]["priority"] = 1000
    return pod


def on_node_b(pod: dict[str, Any]) -> dict[str, Any]:
    return {**pod, "spec": {**pod["spec"], "nodeName": "b"}}


def finished(name: str, of: str) -> dict[str, Any]:
    return running_pod(name, "1", of, phase="Succeeded")


STEPS: list[Step] = [
    applying(queue(), node("a", "2"), node("b", "1"), group("run", "1"), group("calm", "1")),
    applying(running_pod("run-0", "1", "run"), running_pod("run-1", "1", "run")),
    applying(on_node_b(running_pod("calm-0", "1", "calm"))),
    nothing,
    nothing,
    applying({"kind": "Queue", "metadata": {"name": "other"}, "spec": {"weight": 1}}),
    nothing,
    applying(group("urgent", "1"), urgent_pod()),
    nothing,
    applying(finished("run-0", "run"), finished("run-1", "run")),
    nothing,
]


def _sessions(shortcuts: Shortcuts = ALL) -> tuple[list[object], list[set[str]], list[set[str]]]:
    """What each session wrote and told (statuses, events, each job's conditions), and
    which jobs rested and which it walked (``active_jobs``), session by session, the
    scheduler taking ``shortcuts``."""
    conf = runner.default_conf().model_copy(update={"actions": FULL_ACTIONS})
    state = ClusterState()
    cluster = Writing(state)
    scheduler = runner.Scheduler(cluster, conf, lambda: 1000.0, lambda: "s", shortcuts)
    told: list[object] = []
    rested: list[set[str]] = []
    walked: list[set[str]] = []
    for step in STEPS:
        step(state)
        session = scheduler.run_once()
        told.append({k: str(session.conditions_of(j)) for k, j in session.jobs.items()})
        told.append(session.stats.evictions)
        walked.append({job.uid for job in session.active_jobs()})
        rested.append(set(session.resting.jobs))
    return [*told, cluster.written], rested, walked


def test_resting_gangs_change_nothing_written_or_told() -> None:
    quick, rested, walked = _sessions()
    assert any("ns/run" in uids for uids in rested[:7])  # it rested
    assert "ns/run" in walked[7]  # preempt evicted from it: woken, walked
    assert 1 in quick, "an eviction"
    slow, none_rested, _ = _sessions(Shortcuts().without("rest_quiet_gangs"))
    assert slow == quick
    assert not any(none_rested)


def _rested_gangs(conf: Any) -> tuple[ClusterState, resting.RestingGangs, Snapshot]:
    """A state with a running gang that rests at the close of a session on its last
    snapshot (taken and closed with ``conf``), and that snapshot."""
    state = ClusterState()
    for step in STEPS[:4]:
        step(state)
        runner.Scheduler(Writing(state), conf, lambda: 1.0, lambda: "s").run_once()
    snap = state.snapshot()
    keeper = resting.RestingGangs()
    session = runner.open_session(snap, conf, 1.0, "s", keeper)
    runner.close_session(session)
    keeper.closed(snap, conf)
    assert set(keeper.jobs) == {"ns/run", "ns/calm"}
    return state, keeper, snap


CONF = runner.default_conf()


def test_the_next_snapshot_of_a_line_carries_what_rested() -> None:
    state, keeper, _ = _rested_gangs(CONF)
    assert set(keeper.carried(state.snapshot(), CONF)) == {"ns/run", "ns/calm"}


def test_a_written_gang_is_not_carried() -> None:
    state, keeper, _ = _rested_gangs(CONF)
    state.apply(finished("run-0", "run"))
    assert set(keeper.carried(state.snapshot(), CONF)) == {"ns/calm"}
    assert keeper.by_queue["default"] == 1


CARRIED_NOTHING = {
    "another conf": lambda state, snap: (state.snapshot(), runner.default_conf()),
    "a snapshot skipped": lambda state, snap: (state.snapshot() and state.snapshot(), CONF),
    "the same snapshot again": lambda state, snap: (snap, CONF),
    "another line": lambda state, snap: (_rested_gangs(CONF)[0].snapshot(), CONF),
    "another queue": lambda state, snap: (
        applying({"kind": "Queue", "metadata": {"name": "q2"}})(state) or state.snapshot(),
        CONF,
    ),
}


@pytest.mark.parametrize("case", sorted(CARRIED_NOTHING))
def test_nothing_is_carried_off_the_line_or_under_another_conf(case: str) -> None:
    state, keeper, snap = _rested_gangs(CONF)
    assert not keeper.carried(*CARRIED_NOTHING[case](state, snap))
    assert not keeper.by_queue["default"]
    assert set(keeper.carried(state.snapshot(), CONF)) == set(), "not until a close"


OTHER_LINE: list[Step] = [
    applying(queue(), node("a", "8"), group("run", "1")),
    applying(running_pod("run-0", "3", "run")),
    *[nothing] * (len(STEPS) - 2),
]


def _two_lines(shortcuts: Shortcuts = ALL) -> list[object]:
    """Two schedulers' sessions (taking ``shortcuts``), on two states of alike jobs (the
    same names, other sizes), in turns: what each wrote (its Queue's status has
    proportion's sums)."""
    conf = runner.default_conf()
    lines = []
    for _ in range(2):
        state = ClusterState()
        cluster = Writing(state)
        scheduler = runner.Scheduler(cluster, conf, lambda: 1.0, lambda: "s", shortcuts)
        lines.append((state, cluster, scheduler))
    for steps in zip(STEPS, OTHER_LINE, strict=True):
        for step, (state, _, scheduler) in zip(steps, lines, strict=True):
            step(state)
            scheduler.run_once()
    return [cluster.written for _, cluster, _ in lines]


def test_queue_sums_kept_along_two_lines_in_turns_are_the_long_ways() -> None:
    """proportion's sums (``framework.job_sums``) take the jobs a snapshot keeps unchanged
    only after a session on the snapshot before it in its line."""
    quick = _two_lines()
    compared = Shortcuts().without("queue_sums_by_unchanged_jobs")
    assert _two_lines(compared) == quick
    assert _two_lines(compared.without("queue_sums")) == quick
