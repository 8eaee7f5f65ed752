"""Where a recording's sessions and checkpoints are, and where a replay starts reading.

The sessions and checkpoints are found in the index the writer keeps beside each closed
segment, else in its lines (decompressed, not decoded): a replay ``--from`` a time
reads from the last checkpoint before it, and a replay shared between processes
(``replay_split``) cuts its shares by them.
"""

import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kbatch.record.store import segments

# A share of the sessions (``Replay``'s ``share``) runs this many before its first,
# within the window, uncompared: their scheduler then keeps what the whole replay's
# does (the gangs resting), and its first session decides as that one's.
WARM_UP_SESSIONS = 3


@dataclass(frozen=True)
class Begin:
    """Where a replay starts reading a recording other than at its start: a segment's
    checkpoint (``segment``, its number), the sessions recorded before it, and the time
    of the recording's first record (what ``--from`` and ``--to`` count from)."""

    segment: int
    sessions: int
    first: float


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
    in a segment's compressed stream: of each segment, from the index the writer kept
    beside it (``segments.SegmentIndex``), else from its lines."""
    marks = Marks()
    read = 0  # the lines' bytes before the segment
    for position, (number, path) in enumerate(segments.segment_files(directory)):
        found = segments.SegmentIndex.of(path)
        whole = found is not None
        if found is None:
            found, whole = _scanned(path)
        if found.first is not None:
            if position == 0:
                marks.first = found.first
            else:  # (the oldest segment kept is where a replay starts anyway)
                marks.checkpoints.append(Checkpoint(number, read, len(marks.times), found.first))
        marks.times += found.times
        marks.offsets += [read + at for at in found.offsets]
        read += found.lines
        if not whole:
            break  # (the replay says where it stopped)
    return marks


def _scanned(path: Path) -> tuple[segments.SegmentIndex, bool]:
    """The segment's marks, found in its decompressed lines, and whether it was read to
    its end (not: the compressed stream breaks, and what was found before counts)."""
    found = segments.SegmentIndex()
    decompress = zlib.decompressobj(zlib.MAX_WBITS | 16)  # gzip
    tail = b""  # from the last line break on: a line not ended yet
    try:
        with path.open("rb") as raw:
            while chunk := raw.read(_CHUNK):
                text = tail + decompress.decompress(chunk)
                ended = max(text.rfind(b"\n"), 0)  # the lines before it are whole
                if found.first is None and (at := text.find(_RECORD, 0, ended)) >= 0:
                    found.first = _time_at(text, text.index(b'"t":', at) + 4)
                at = text.find(_SESSION, 0, ended)
                while at >= 0:
                    found.times.append(_time_at(text, at + len(_SESSION)))
                    found.offsets.append(found.lines + at)
                    at = text.find(_SESSION, at + 1, ended)
                found.lines += ended
                tail = text[ended:]
    except (OSError, zlib.error, ValueError):
        return found, False
    found.lines += len(tail)
    return found, True


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


def begin_for(marks: Marks, first: int) -> Begin | None:
    """Where a replay whose own sessions begin at the recorded session ``first`` starts
    reading (``reads_from``), with the recording's first time; None: at its start."""
    checkpoint = reads_from(marks.checkpoints, first)
    if checkpoint is None:
        return None
    return Begin(checkpoint.segment, checkpoint.sessions, marks.first)


def checkpoint_at(marks: Marks, seconds: float) -> Begin | None:
    """The last checkpoint taken before ``seconds`` after the recording's first record,
    where a reader that needs the state then and every record from then on starts
    (None: the recording's start). Before, not at: a record of that very time may come
    before the checkpoint, which holds only what it changed."""
    found = None
    for checkpoint in marks.checkpoints:
        if checkpoint.t - marks.first >= seconds:
            break
        found = checkpoint
    return None if found is None else Begin(found.segment, found.sessions, marks.first)


def reads_from(checkpoints: Sequence[Checkpoint], first: int) -> Checkpoint | None:
    """The checkpoint a replay whose own sessions begin at the recorded session ``first``
    reads from: the last before the ``WARM_UP_SESSIONS`` a share runs first (a replay
    ``--from`` runs none, and reads those few sessions' changes for nothing)."""
    return checkpoint_before(checkpoints, first - WARM_UP_SESSIONS)
