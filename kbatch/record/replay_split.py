"""A replay shared between processes: ``kbatch replay --jobs N``.

A replayed session depends on the recording alone: the state it runs on is the one the
recorded changes build (the recording brings what followed from each decision, the
replay applies none of its own), and what the scheduler keeps from one session to the
next only saves work (``Shortcuts``: a session without it decides the same, as a replay
``--from`` a time shows). So the recording's sessions can be cut into runs of
consecutive ones, each replayed by a process of its own: it reads the recording from the
last checkpoint before its first session (a segment's first records: the state then;
the recording's start for the first run), applies the changes up to that session
without running the sessions there (about a quarter of what replaying them costs), then
replays its own. The shares' results are added up in order, the differences numbered as
one replay numbers them.

The sessions and checkpoints are found first (``replay_marks``: in the index beside
each segment, else in its lines, decompressed, not decoded), to cut the shares where
they cost about the same. A process holds the state its checkpoint holds and what follows: what is
alive, not the history before it.
Without ``--jobs`` (``replay_auto``) a replay is shared between the cores this process
may use, one process per ``AUTO_SPLIT_BYTES`` of the window's lines and per checkpoint
in it at most; a short window, or a recording without checkpoints (one segment, as
recordings were made before them), is replayed by one process: another would cost
more to start than it saves, or apply, and hold, all that came before its run.
"""

import bisect
import itertools
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from kbatch.record.replay import KINDS, SHOWN_DIFFERENCES, Replay, Result, replay
from kbatch.record.replay_marks import (
    Begin,
    Checkpoint,
    Marks,
    begin_for,
    reads_from,
    session_marks,
    window,
)
from kbatch.record.store import segments

# What applying a recorded change without its session costs, against replaying it with
# its session, by the bytes of their lines (the simulated day's recording, 1.7 GB of
# lines: 105 CPU s to apply every change, 480 s to replay it all).
APPLIED_COST = 0.25
# Without ``--jobs``: a window of fewer bytes of lines than this is replayed by one
# process. Each other process starts an interpreter, imports kbatch and reads from a
# checkpoint (a second or so); 64 MB of the simulated day's lines replay in about 14 s.
AUTO_SPLIT_BYTES = 64 << 20


def shares(
    sessions: range, offsets: list[int], workers: int, checkpoints: Sequence[Checkpoint] = ()
) -> list[range]:
    """The recorded sessions cut into ``workers`` runs of consecutive ones that cost
    about the same: a share's cost taken as the bytes of lines from its first session
    of ``sessions`` (those to replay) to its last, and ``APPLIED_COST`` of the bytes
    before it from where it starts reading (applied without their sessions): the last
    of ``checkpoints`` before its warm-up, else the recording's start. ``offsets``: the
    bytes before each recorded session. The first share runs from the recording's first
    session, the last on past ``sessions`` (a count that missed some leaves none out)."""
    if workers <= 1 or not sessions:
        return [range(0, sys.maxsize)]
    low = offsets[sessions.start - 1] if sessions.start else 0
    high = offsets[sessions.stop - 1]

    def read_from(at: float) -> int:
        checkpoint = reads_from(checkpoints, bisect.bisect_left(offsets, at))
        return 0 if checkpoint is None else checkpoint.offset

    def ends(cost: float) -> list[float]:
        at, found = float(low), []
        for _ in range(workers):
            at = at + cost - APPLIED_COST * (at - read_from(at))
            found.append(at)
        return found

    cheap, dear = 0.0, float(high) + 1.0
    for _ in range(60):  # the cost at which the last share ends at the window's end
        cost = (cheap + dear) / 2
        cheap, dear = (cost, dear) if ends(cost)[-1] < high else (cheap, cost)
    bounds = [0]
    for end in ends(dear)[:-1]:
        bounds.append(min(max(bounds[-1], bisect.bisect_left(offsets, end)), sessions.stop))
    bounds.append(sys.maxsize)
    return [range(a, b) for a, b in itertools.pairwise(bounds)]


def usable_cores() -> int:
    """The cores this process may run on (its affinity, where the system tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every system)
        return os.cpu_count() or 1


def replay_auto(
    directory: Path,
    start: float | None,
    end: float | None,
    warn: Callable[[str], None] = lambda _: None,
) -> Result:
    """``kbatch replay`` without ``--jobs``: ``directory`` replayed from ``start`` to
    ``end`` by as many processes as ``usable_cores``, ``auto_workers`` at most, the
    results added up as one replay's. A recording without checkpoints, or a short
    window, is replayed by this process alone, as ``replay.replay`` replays it."""
    began = time.perf_counter()
    cores = usable_cores()
    checkpointed = len(segments.segment_files(directory)) > 1  # (each after the first)
    if start is None and (cores < 2 or not checkpointed):
        return replay(directory, start, end, warn)
    marks = session_marks(directory)
    workers = min(cores, auto_workers(marks, window(marks.first, marks.times, start, end)))
    if workers < 2:
        return replay(directory, start, end, warn, marks)
    return _split(directory, start, end, workers, warn, marks, began)


def auto_workers(marks: Marks, sessions: range) -> int:
    """How many processes are worth starting for ``sessions``, cores aside: one per
    ``AUTO_SPLIT_BYTES`` of their lines, and at most one more than the checkpoints
    among them (more would read from the same checkpoint, and apply what lies between
    it and their first session for nothing)."""
    if not sessions:
        return 1
    lines = marks.offsets[sessions.stop - 1] - marks.offsets[sessions.start]
    inside = sum(1 for c in marks.checkpoints if sessions.start < c.sessions < sessions.stop)
    return max(1, min(lines // AUTO_SPLIT_BYTES, inside + 1))


def replay_split(
    directory: Path,
    start: float | None,
    end: float | None,
    workers: int,
    warn: Callable[[str], None] = lambda _: None,
) -> Result:
    """``directory`` replayed from ``start`` to ``end`` by ``workers`` processes, the
    results added up as one replay's; ``warn`` is told each warning once, at the end."""
    began = time.perf_counter()
    return _split(directory, start, end, workers, warn, session_marks(directory), began)


def _split(
    directory: Path,
    start: float | None,
    end: float | None,
    workers: int,
    warn: Callable[[str], None],
    marks: Marks,
    began: float,
) -> Result:
    """``replay_split`` with the recording's ``marks`` found, since ``began``."""
    sessions = window(marks.first, marks.times, start, end)
    parts = shares(sessions, marks.offsets, workers, marks.checkpoints)
    context = multiprocessing.get_context("spawn")  # (no fork of a threaded process)
    with ProcessPoolExecutor(len(parts), mp_context=context) as pool:
        futures = [
            pool.submit(_replay_share, directory, start, end, part, begin_for(marks, part.start))
            for part in parts
        ]
        results = [future.result() for future in futures]
    merged = added_up(str(directory), start, end, results)
    merged.wall_seconds = time.perf_counter() - began
    for message in merged.warnings:
        warn(message)
    if merged.stopped is not None:
        warn(f"the recording stops early: {merged.stopped}")
    return merged


def _replay_share(
    directory: Path, start: float | None, end: float | None, share: range, begin: Begin | None
) -> Result:
    return Replay(directory, start, end, share=share, begin=begin).run()


def added_up(directory: str, start: float | None, end: float | None, parts: list[Result]) -> Result:
    """The shares' results, in order, as one replay's: counts added, the differences
    numbered by the session as one replay counts them, each warning once."""
    total = Result(directory, start=start, end=end)
    for part in parts:
        total.recorded_version = total.recorded_version or part.recorded_version
        for kind in KINDS:
            mine, theirs = total.counts[kind], part.counts[kind]
            mine.recorded += theirs.recorded
            mine.replayed += theirs.replayed
            mine.differing += theirs.differing
        for difference in part.differences:
            if len(total.differences) < SHOWN_DIFFERENCES:
                numbered = {**difference, "session": difference["session"] + total.sessions}
                total.differences.append(numbered)
        total.sessions += part.sessions
        total.shares.append(
            {
                "sessions": part.sessions,
                "fromSegment": part.first_segment,
                "wall_seconds": round(part.wall_seconds, 3),
                "cpu_seconds": round(part.cpu_seconds, 3),
            }
        )
        total.warnings += [w for w in part.warnings if w not in total.warnings]
        total.stopped = total.stopped or part.stopped
    return total
