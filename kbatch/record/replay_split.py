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

The sessions and checkpoints are found first in the recording's lines (decompressed,
not decoded), to cut the shares where they cost about the same. A process holds the
state its checkpoint holds and what follows: what is alive, not the history before it.
It is asked for, not the default (a recording made before checkpoints, one segment,
would have every process but the first apply, and hold, all that came before its run).
"""

import bisect
import itertools
import multiprocessing
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from kbatch.record.replay import KINDS, SHOWN_DIFFERENCES, WARM_UP_SESSIONS, Begin, Replay, Result
from kbatch.record.store import segments

# What applying a recorded change without its session costs, against replaying it with
# its session, by the bytes of their lines (the simulated day's recording, 1.7 GB of
# lines: 105 CPU s to apply every change, 480 s to replay it all).
APPLIED_COST = 0.25
# A session's record, and the first record's time, as the recorder writes them (a
# line each, the operation then the time first, no spaces): a recording written
# otherwise is counted short, which shares its sessions unevenly, no more.
_SESSION = b'\n{"op":"out","t":'
_RECORD = b'\n{"op":"'  # (the header comes first, its own line)
_CHUNK = 1 << 18


@dataclass(frozen=True)
class Checkpoint:
    """A segment after the first, which starts from a checkpoint (the state then): its
    number, the bytes of lines before it, the sessions recorded before it, and its time."""

    segment: int
    offset: int
    sessions: int
    t: float


@dataclass
class Marks:
    """Where a recording's sessions are: the time of its first record, and of each
    session recorded (its ``out`` record) its time and the bytes of lines before it (all
    segments'); and the checkpoints a replay can start from."""

    first: float = 0.0
    times: list[float] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)

    def checkpoint_before(self, session: int) -> Checkpoint | None:
        return checkpoint_before(self.checkpoints, session)


def checkpoint_before(checkpoints: Sequence[Checkpoint], session: int) -> Checkpoint | None:
    """The last of ``checkpoints`` from which the recorded session ``session`` is read
    whole (a checkpoint may fall between a session's beginning and its decisions: the
    session its decisions follow is not); None: read from the start."""
    found = None
    for checkpoint in checkpoints:
        if checkpoint.sessions + 1 > session:
            break
        found = checkpoint
    return found


def session_marks(directory: Path) -> Marks:
    """The marks of the recording in ``directory`` (``Marks``), read up to the first break
    in a segment's compressed stream."""
    marks = Marks()
    read = 0  # the lines' bytes before ``text``
    for index, (number, path) in enumerate(segments.segment_files(directory)):
        decompress = zlib.decompressobj(zlib.MAX_WBITS | 16)  # gzip
        tail = b""  # from the last line break on: a line not ended yet
        begins = read  # the bytes of lines before this segment
        looking = True  # for the segment's first record (after its header)
        try:
            with path.open("rb") as raw:
                while chunk := raw.read(_CHUNK):
                    text = tail + decompress.decompress(chunk)
                    ended = max(text.rfind(b"\n"), 0)  # the lines before it are whole
                    if looking and (at := text.find(_RECORD, 0, ended)) >= 0:
                        looking = False
                        t = _time_at(text, text.index(b'"t":', at) + 4)
                        if index == 0:
                            marks.first = t
                        else:  # (the oldest segment kept is where a replay starts anyway)
                            marks.checkpoints.append(
                                Checkpoint(number, begins, len(marks.times), t)
                            )
                    at = text.find(_SESSION, 0, ended)
                    while at >= 0:
                        marks.times.append(_time_at(text, at + len(_SESSION)))
                        marks.offsets.append(read + at)
                        at = text.find(_SESSION, at + 1, ended)
                    read += ended
                    tail = text[ended:]
        except (OSError, zlib.error, ValueError):
            break  # (the replay says where it stopped)
        read += len(tail)
    return marks


def _time_at(text: bytes, at: int) -> float:
    """The number written at ``at`` in ``text``, up to the comma after it."""
    return float(text[at : text.index(b",", at)])


def window(first: float, times: list[float], start: float | None, end: float | None) -> range:
    """The recorded sessions (numbered from 0 in the recording's order) that a replay
    from ``start`` to ``end`` seconds after the recording's first record replays."""
    low = 0.0 if start is None else start
    high = float("inf") if end is None else end
    inside = [n for n, t in enumerate(times) if low <= t - first <= high]
    return range(inside[0], inside[-1] + 1) if inside else range(0)


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
        checkpoint = _read_from(checkpoints, bisect.bisect_left(offsets, at))
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
    marks = session_marks(directory)
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


def begin_for(marks: Marks, first: int) -> Begin | None:
    """Where a replay whose own sessions begin at the recorded session ``first`` starts
    reading (``_read_from``), with the recording's first time; None: at its start."""
    checkpoint = _read_from(marks.checkpoints, first)
    if checkpoint is None:
        return None
    return Begin(checkpoint.segment, checkpoint.sessions, marks.first)


def _read_from(checkpoints: Sequence[Checkpoint], first: int) -> Checkpoint | None:
    """The checkpoint a replay whose own sessions begin at the recorded session ``first``
    reads from: the last before the ``WARM_UP_SESSIONS`` a share runs first (a replay
    ``--from`` runs none, and reads those few sessions' changes for nothing)."""
    return checkpoint_before(checkpoints, first - WARM_UP_SESSIONS)


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
