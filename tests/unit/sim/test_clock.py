"""Simulated timestamps: those kept for the recent seconds (``Shortcuts.timestamps``)
are the ones formatted anew."""

import random

import pytest

from kbatch.sim import clock


def test_kept_timestamps_are_those_formatted_anew() -> None:
    rng = random.Random(2)
    times = [rng.uniform(-3600, 3 * 86400) for _ in range(500)] + [0.0, -0.0, 59.999, 60.0]
    # twice: the second time round, most seconds were kept and then pushed out
    kept = [clock.timestamp(t) for t in times + times]
    assert kept == [clock.timestamp(t, kept=False) for t in times + times]


def test_a_timestamp_is_the_whole_second_before() -> None:
    assert clock.timestamp(90061.9) == "1970-01-02T01:01:01Z"
    assert clock.timestamp(-0.5) == "1969-12-31T23:59:59Z"


@pytest.mark.parametrize("text", ["30s", "1h30m", "500ms", "1.5s", ".5m", "2h0m0s"])
def test_a_duration_read_before_is_known_as_read(text: str) -> None:
    seconds = clock.parse_duration(text, "first")
    assert clock.known_duration(text) == seconds
    assert clock.parse_duration(text, "again") == seconds


@pytest.mark.parametrize("text", ["30", "1x", "", "m", "-1s"])
def test_a_bad_duration_is_never_known_and_names_where_each_time(text: str) -> None:
    for where in ("first", "second"):
        with pytest.raises(clock.DurationError, match=f"^{where}: "):
            clock.parse_duration(text, where)
        assert clock.known_duration(text) is None


def test_past_its_size_the_oldest_duration_read_is_read_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kbatch.api import duration

    monkeypatch.setattr(duration, "_READ", {})
    monkeypatch.setattr(duration, "_READ_SIZE", 3)
    for seconds in range(1, 5):
        assert clock.parse_duration(f"{seconds}s", "where") == seconds
    assert clock.known_duration("1s") is None, "the oldest goes"
    assert [clock.known_duration(f"{s}s") for s in (2, 3, 4)] == [2, 3, 4]
