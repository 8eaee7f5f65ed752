"""The recorder's writer takes its turn between sessions: what a running session queues
waits for its end (or for a flush interval, if it runs long or never ends)."""

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kbatch.record.store import recorder, segments


def _until(done: Callable[[], bool], seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(0.01)
    return done()


def test_what_a_session_queues_is_written_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder, "FLUSH_SECONDS", 30.0)  # no session runs that long here
    flight = recorder.Recorder(tmp_path / "rec")
    queued = flight._queue.qsize
    try:
        flight.session()
        assert _until(lambda: queued() == 0)  # taken with the session's opening
        flight.now(1.0)
        flight.assumed("as", "bench/pod-0", "node-0")
        time.sleep(0.3)
        assert queued() == 2  # the session runs: the writer waits
        flight.ended()
        assert _until(lambda: queued() == 0)
    finally:
        flight.close()
    ops = [r["op"] for r in segments.Reading(tmp_path / "rec").records()]
    assert ops == ["sess", "now", "as"]


def test_a_session_that_never_ends_holds_the_writing_back_a_flush_interval_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder, "FLUSH_SECONDS", 0.2)
    flight = recorder.Recorder(tmp_path / "rec")
    try:
        flight.session()
        for n in range(5):
            flight.assumed("as", f"bench/pod-{n}", "node-0")
        assert _until(lambda: flight._queue.qsize() == 0, seconds=5.0)
    finally:
        flight.close()
    ops = [r["op"] for r in segments.Reading(tmp_path / "rec").records()]
    assert ops == ["sess"] + ["as"] * 5


def test_a_session_beginning_pauses_a_large_batch_being_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recorder, "FLUSH_SECONDS", 30.0)
    flight = recorder.Recorder(tmp_path / "rec")
    total = 100_000  # a full cluster's first lists: longer to write than between sessions
    try:
        flight.session()  # the writer waits: what follows is queued whole
        for n in range(total):
            flight.assumed("as", f"bench/pod-{n}", "node-0")
        flight.ended()
        assert _until(lambda: flight._queue.qsize() == 0)  # taken in one batch
        assert _until(lambda: flight._written > 0)  # and under way
        flight.session()
        time.sleep(0.2)
        paused_at = flight._written
        time.sleep(0.3)
        assert flight._written == paused_at < total  # it waits for the session's end
        flight.ended()
        assert flight.written(timeout=30.0)
    finally:
        flight.close()
    ops = [r["op"] for r in segments.Reading(tmp_path / "rec").records()]
    assert ops.count("as") == total and ops[0] == ops[-1] == "sess"
