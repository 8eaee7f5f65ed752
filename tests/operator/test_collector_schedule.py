"""kbatch run's loop freezes what outlives each session out of the cyclic collector's
sight, and now and then, between sessions with no bind in flight, walks it all once:
the collector's passes over a large cache held every thread, the bind workers too, for
tenths of a second every few seconds."""

import gc
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.runtime.collector_schedule import CollectorSchedule
from kbatch.operators.scheduler.runtime.loop import ConfSource, SchedulerLoop


class Cycle:
    """An object that refers to itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.itself = self


@pytest.fixture(autouse=True)
def nothing_stays_frozen() -> Iterator[None]:
    yield
    gc.unfreeze()


def dropped_cycle() -> "weakref.ref[Cycle]":
    """A cycle nothing refers to any more, made before now and frozen with all else."""
    cycle = Cycle()
    seen = weakref.ref(cycle)
    gc.freeze()
    del cycle
    return seen


def frozen(obj: object) -> bool:
    """Whether the collector froze it: no generation holds it any more. (Counting the
    frozen does not tell: a frozen object freed by its last reference leaves the count.)"""
    return not any(seen is obj for seen in gc.get_objects())


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_what_outlives_a_session_is_out_of_the_collectors_sight() -> None:
    schedule = CollectorSchedule(full_every=600.0, clock=Clock())
    gc.unfreeze()
    with schedule.around_session(binds_in_flight=False):
        assert not gc.isenabled(), "no pass while the session runs"
        kept = [Cycle() for _ in range(10)]
    assert gc.isenabled()
    assert gc.get_count()[0] < 100, "the youngest generation starts empty"
    assert all(frozen(cycle) for cycle in kept)
    assert gc.get_freeze_count() >= len(kept)


def test_a_full_pass_is_due_only_after_its_interval_and_frees_frozen_cycles() -> None:
    clock = Clock()
    schedule = CollectorSchedule(full_every=600.0, clock=clock)
    seen = dropped_cycle()
    gc.collect()
    assert seen() is not None, "frozen: no pass walks it"
    clock.now = 599.0
    schedule.before_session(binds_in_flight=False)
    assert seen() is not None and schedule.full_passes == 0
    clock.now = 600.0
    schedule.before_session(binds_in_flight=False)
    assert seen() is None and schedule.full_passes == 1
    assert gc.get_freeze_count() > 0, "what is alive is frozen again"
    schedule.before_session(binds_in_flight=False)
    assert schedule.full_passes == 1, "the next one is 600 s later"


def test_no_full_pass_while_binds_are_in_flight() -> None:
    clock = Clock()
    schedule = CollectorSchedule(full_every=10.0, clock=clock)
    seen = dropped_cycle()
    clock.now = 1000.0
    schedule.before_session(binds_in_flight=True)
    assert seen() is not None and schedule.full_passes == 0
    schedule.before_session(binds_in_flight=False)
    assert seen() is None and schedule.full_passes == 1


class Told:
    """A schedule that notes what the loop tells it."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    @contextmanager
    def around_session(self, binds_in_flight: bool) -> Iterator[None]:
        self.calls.append(("before", binds_in_flight))
        yield
        self.calls.append("ended")

    def between_sessions(self) -> None:
        self.calls.append("between")


class Broken:
    def snapshot(self) -> Any:
        raise RuntimeError("no snapshot")


def told_loop(told: Told, leads: bool = True, **options: Any) -> SchedulerLoop:
    """A loop whose sessions fail at once (no snapshot), telling ``told``."""
    return SchedulerLoop(
        Broken(),  # type: ignore[arg-type]
        ConfSource(None),
        1.0,
        SchedulerMetrics(),
        lambda: leads,
        collector=told,  # type: ignore[arg-type]
        **options,
    )


def test_the_loop_tells_the_schedule_around_each_session_even_a_failed_one() -> None:
    told = Told()
    told_loop(told, busy=lambda: False).period_once()
    assert told.calls == ["between", ("before", False), "ended"]


def test_no_session_due_tells_it_only_of_the_time_between() -> None:
    told = Told()
    told_loop(told, leads=False).period_once()
    assert told.calls == ["between"], "what came in is frozen all the same"


def test_what_comes_in_between_sessions_is_frozen_at_most_every_half_second() -> None:
    clock = Clock()
    schedule = CollectorSchedule(full_every=600.0, clock=clock, freeze_every=0.5)
    gc.unfreeze()
    early = Cycle()
    clock.now = 0.4
    schedule.between_sessions()
    assert gc.get_freeze_count() == 0
    clock.now = 0.5
    schedule.between_sessions()
    assert frozen(early)
    kept = Cycle()
    clock.now = 0.9
    schedule.between_sessions()
    assert not frozen(kept), "not again so soon"
    clock.now = 1.0
    schedule.between_sessions()
    assert frozen(kept)


def test_a_loop_waiting_for_binds_freezes_what_comes_in_meanwhile() -> None:
    told = Told()
    in_flight = [True]

    def busy() -> bool:
        if len(told.calls) >= 3:
            in_flight[0] = False
        return in_flight[0]

    told_loop(told, busy=busy, binds_wait=5.0).period_once()
    assert told.calls == ["between", "between", "between", ("before", False), "ended"]
