"""The simulated cluster's event log: an event told lately is held back, and the log
knows when it may be told again."""

import math

from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.operators.scheduler.core.framework.outcome import EVENT_REPEAT_SECONDS
from kbatch.sim.events import EventLog

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
