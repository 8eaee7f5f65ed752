"""The simulated cluster's event log: an event told lately is held back, and the log
knows when it may be told again."""

import math
from pathlib import Path

import pytest

from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.operators.scheduler.core.framework.outcome import EVENT_REPEAT_SECONDS
from kbatch.sim import clock, simulate
from kbatch.sim.backend import SimBackend
from kbatch.sim.events import EventLog
from scenarios.objects import pod

SCENARIOS = Path(__file__).parents[2] / "scenarios"

POD = ObjectRef("Pod", "default", "p")


def test_an_event_is_told_again_only_after_the_repeat_interval() -> None:
    log = EventLog()
    for now in (0.0, 10.0, EVENT_REPEAT_SECONDS - 1, EVENT_REPEAT_SECONDS):
        log.record((POD, "uid-1"), POD, "Warning", "FailedScheduling", "no room", now)
    assert [e.time for e in log.entries] == [0.0, EVENT_REPEAT_SECONDS]


def test_retell_at_is_when_a_held_back_event_may_be_told_again() -> None:
    log = EventLog()
    assert log.retell_at == math.inf
    log.record((POD, "uid-1"), POD, "Warning", "FailedScheduling", "no room", 5.0)
    log.retell_at = math.inf  # as the runner does at each tick
    log.record((POD, "uid-1"), POD, "Warning", "FailedScheduling", "no room", 50.0)
    assert log.retell_at == 5.0 + EVENT_REPEAT_SECONDS, "held back: told again 5 minutes on"
    log.record((POD, "uid-1"), POD, "Normal", "Scheduled", "bound", 60.0)
    assert log.retell_at == 5.0 + EVENT_REPEAT_SECONDS, "the earliest of the tick's events"


def test_a_new_object_of_the_same_name_is_told_about_at_once() -> None:
    log = EventLog()
    log.record((POD, "uid-1"), POD, "Warning", "FailedScheduling", "no room", 0.0)
    log.record((POD, "uid-2"), POD, "Warning", "FailedScheduling", "no room", 1.0)
    assert len(log.entries) == 2


def _told_twice_with_the_pod_made_again() -> list[tuple[float, str, str]]:
    """A pod told about, removed (told about: no uid now), made again under its name
    and told the same."""
    cluster = SimBackend(ClusterState(frozenset({"kbatch"})), clock.SimClock())
    ref = ObjectRef("Pod", "default", "p")
    for now in (0.0, 1.0):
        cluster.clock.now = now
        cluster.create(pod("p", namespace="default"))
        cluster.record(ref, "Warning", "FailedScheduling", "no room")
        cluster.record(ref, "Warning", "FailedScheduling", "no room")  # held back
        cluster.delete_pod(cluster.state.get("Pod", "default", "p") or {})
        cluster.record(ref, "Warning", "FailedScheduling", "no room")  # of no object now
    return [(e.time, e.name, e.message) for e in cluster.event_log]


def test_a_pod_made_again_under_its_name_is_told_about_again() -> None:
    told = _told_twice_with_the_pod_made_again()
    assert told == [(0.0, "p", "no room"), (0.0, "p", "no room"), (1.0, "p", "no room")]


@pytest.mark.parametrize(
    "files", [["seed-reclaim.yaml"], ["policy/reclaim-pingpong.yaml"], ["seed-late-podgroup.yaml"]]
)
def test_remembered_uids_tell_the_events_looking_each_up_tells(
    files: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``SimBackend._uid_of`` remembers uids; switched off, each is looked up."""
    paths = [SCENARIOS / f for f in files]
    remembered = simulate(paths, until="5m", warn=lambda _: None)
    monkeypatch.setattr(SimBackend, "_uid_of", SimBackend._look_up_uid)
    assert simulate(paths, until="5m", warn=lambda _: None) == remembered
    assert remembered["events"]
