"""Simulated timestamps: those kept for the recent seconds (``clock.KEEP_TIMESTAMPS``)
are the ones formatted anew."""

import random

import pytest

from kbatch.sim import clock


def test_kept_timestamps_are_those_formatted_anew(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(2)
    times = [rng.uniform(-3600, 3 * 86400) for _ in range(500)] + [0.0, -0.0, 59.999, 60.0]
    # twice: the second time round, most seconds were kept and then pushed out
    kept = [clock.timestamp(t) for t in times + times]
    monkeypatch.setattr(clock, "KEEP_TIMESTAMPS", False)
    assert kept == [clock.timestamp(t) for t in times + times]


def test_a_timestamp_is_the_whole_second_before() -> None:
    assert clock.timestamp(90061.9) == "1970-01-02T01:01:01Z"
    assert clock.timestamp(-0.5) == "1969-12-31T23:59:59Z"
