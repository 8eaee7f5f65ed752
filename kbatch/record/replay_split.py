"""A replay shared between processes: ``kbatch replay --jobs N``.

A replayed session depends on the recording alone: the state it runs on is the one the
recorded changes build (the recording brings what followed from each decision, the
replay applies none of its own), and what the scheduler keeps from one session to the
next only saves work (``Shortcuts``: a session without it decides the same, as a replay
``--from`` a time shows). So the recording's sessions can be cut into runs of
consecutive ones, each replayed by a process of its own: it reads the recording from the
start, applies the changes before its first session without running the sessions there
(a small part of a session's cost), then replays its own. The shares' results are added
up in order, the differences numbered as one replay numbers them.

The sessions are counted first, from the recording's lines (a decompression, no JSON
decoding), to give each process about as many of those to replay. Small recordings
replay in one process: the start of another would cost more than it saves.
"""

import itertools
import multiprocessing
import os
import sys
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from kbatch.record.replay import KINDS, SHOWN_DIFFERENCES, Replay, Result
from kbatch.record.store import segments

# One process below this many compressed bytes (``workers_for``): the half-hour trace's
# recording (0.57 MB) replays in about 10 s, a process starts in about 1 s.
SPLIT_FROM_BYTES = 4 << 20
# The later shares also apply the changes before their first session: each gets this
# much less than the one before it (of an even share), so that they end together.
LATER_SHARE_LESS = 0.1
# A session's record, and the first record's time, as the recorder writes them (a
# line each, the operation then the time first, no spaces): a recording written
# otherwise is counted short, which shares its sessions unevenly, no more.
_SESSION = b'\n{"op":"out","t":'
_RECORD = b'\n{"op":"'  # (the header comes first, its own line)
_CHUNK = 1 << 18


def workers_for(directory: Path, jobs: int | None) -> int:
    """How many processes replay ``directory``: ``jobs`` when given, else one per
    core this process may use (at most 4) for a recording of ``SPLIT_FROM_BYTES`` or
    more, one for a smaller one."""
    if jobs is not None:
        return max(1, jobs)
    if not directory.is_dir():
        return 1  # (the replay says what is wrong with it)
    size = sum(path.stat().st_size for _, path in segments.segment_files(directory))
    if size < SPLIT_FROM_BYTES:
        return 1
    return max(1, min(4, _cores()))


def _cores() -> int:
    """The cores this process may run on (all the machine's where that is not told)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def session_times(directory: Path) -> tuple[float, list[float]]:
    """The time of the recording's first record, and of each session recorded (its
    ``out`` record), read up to the first break in a segment's compressed stream."""
    first: float | None = None
    times: list[float] = []
    for _, path in segments.segment_files(directory):
        decompress = zlib.decompressobj(zlib.MAX_WBITS | 16)  # gzip
        tail = b""  # from the last line break on: a line not ended yet
        try:
            with path.open("rb") as raw:
                while chunk := raw.read(_CHUNK):
                    text = tail + decompress.decompress(chunk)
                    ended = text.rfind(b"\n")  # the lines before it are whole
                    if first is None and (at := text.find(_RECORD, 0, max(ended, 0))) >= 0:
                        first = _time_at(text, text.index(b'"t":', at) + 4)
                    at = text.find(_SESSION, 0, max(ended, 0))
                    while at >= 0:
                        times.append(_time_at(text, at + len(_SESSION)))
                        at = text.find(_SESSION, at + 1, ended)
                    tail = text[max(ended, 0) :]
        except (OSError, zlib.error, ValueError):
            break  # (the replay says where it stopped)
    return first or 0.0, times


def _time_at(text: bytes, at: int) -> float:
    """The number written at ``at`` in ``text``, up to the comma after it."""
    return float(text[at : text.index(b",", at)])


def sessions_in(directory: Path, start: float | None = None, end: float | None = None) -> range:
    """The recorded sessions (numbered from 0 in the recording's order) that a replay
    from ``start`` to ``end`` seconds after the recording's first record replays."""
    first, times = session_times(directory)
    low = 0.0 if start is None else start
    high = float("inf") if end is None else end
    inside = [n for n, t in enumerate(times) if low <= t - first <= high]
    return range(inside[0], inside[-1] + 1) if inside else range(0)


def shares(sessions: range, workers: int) -> list[range]:
    """The recorded sessions cut into ``workers`` runs of consecutive ones, each with
    as many of ``sessions`` (those to replay) as the one before it less
    ``LATER_SHARE_LESS`` of an even share; the first runs from the recording's first
    session, the last on past ``sessions`` (a count that missed some leaves none out)."""
    weights = [1.0 - LATER_SHARE_LESS * i for i in range(workers)]
    total = sum(weights)
    bounds = [0]
    taken = 0.0
    for weight in weights[:-1]:
        taken += len(sessions) * weight / total
        bounds.append(sessions.start + round(taken))
    bounds.append(sys.maxsize)
    return [range(a, b) for a, b in itertools.pairwise(bounds)]


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
    parts = shares(sessions_in(directory, start, end), workers)
    context = multiprocessing.get_context("spawn")  # (no fork of a threaded process)
    with ProcessPoolExecutor(len(parts), mp_context=context) as pool:
        futures = [pool.submit(_replay_share, directory, start, end, part) for part in parts]
        results = [future.result() for future in futures]
    merged = added_up(str(directory), start, end, results)
    merged.wall_seconds = time.perf_counter() - began
    for message in merged.warnings:
        warn(message)
    if merged.stopped is not None:
        warn(f"the recording stops early: {merged.stopped}")
    return merged


def _replay_share(directory: Path, start: float | None, end: float | None, share: range) -> Result:
    return Replay(directory, start, end, share=share).run()


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
        total.warnings += [w for w in part.warnings if w not in total.warnings]
        total.stopped = total.stopped or part.stopped
    return total
