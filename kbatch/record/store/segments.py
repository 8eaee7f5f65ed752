"""A recording on disk: numbered segments of gzip-compressed JSON lines.

``segment-000001.jsonl.gz``, ``segment-000002.jsonl.gz``, ...: each starts with a
header line (``{"kbatch": version, "format": 1, "segment": n, ...}``), then the
records of a checkpoint (every object held when the segment began, each marked
``"b": 1``; none in the first), then the records as they come. Once a segment's
compressed bytes reach a quarter of the bound, or ``CHECKPOINT_BYTES`` when that is
less, the next begins; while the segments together are over the bound, the oldest are
deleted. So a recording keeps about its bound less a segment, and any segment can be
replayed from: its checkpoint is the state it starts from (``Reading(first_segment=)``:
a replay from late in a long recording, or a share of one, reads no segment before
the last checkpoint it needs).

The writer ends its lines on a gzip sync flush (``flush``): the bytes on disk then
decompress to whole lines, so a run killed at any moment leaves a recording readable
up to its last flush. The reader reads every line it can and says where it stopped
(file, offset in the decompressed stream, the object) when a segment ends early or
holds a line that is not a record.
"""

import gzip
import re
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from kbatch import json_codec
from kbatch.record.store.errors import RecordingError as RecordingError  # (re-exported)

FORMAT = 1
PATTERN = re.compile(r"segment-(\d{6})\.jsonl\.gz")
SEGMENTS_PER_BOUND = 4
MIN_BYTES = 4096  # the smallest bound: below it a segment cannot hold its header
# The compressed bytes after which a segment ends even under a large bound, so that a
# replay from late in a recording starts from a checkpoint near it. On the simulated day
# (1,000 nodes, 68.5 MB in all) they came at 9.9, 14.2, 17.9 and 23.5 h, each the 6,800
# to 14,200 objects alive then: together 1.7% of the recording.
CHECKPOINT_BYTES = 16 << 20
COMPRESS_LEVEL = 5


def segment_name(number: int) -> str:
    return f"segment-{number:06d}.jsonl.gz"


def index_path(segment: Path) -> Path:
    """Where the writer notes what ``segment`` holds (``SegmentIndex``): beside it."""
    return segment.with_name(segment.name.removesuffix(".jsonl.gz") + ".marks.json.gz")


@dataclass(slots=True)
class SegmentIndex:
    """What a segment holds, noted by the writer as it writes and kept beside it once it
    is closed, so that a reader finds the sessions without decompressing it: the bytes
    of its lines, the time of its first record after the header (None: none), and of
    each session's record (``out``) its time and the offset of the line break before
    it in the segment's lines. ``size`` and ``trailer``: the closed file's bytes and
    its last 8 (gzip's CRC-32 and length of the lines): an index of another file, or
    of this one before it changed, is not trusted. ``whole``: False once a record
    without a time was written (no index is kept then)."""

    size: int = 0
    trailer: str = ""
    lines: int = 0
    first: float | None = None
    times: list[float] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    whole: bool = True

    def note(self, record: dict[str, Any], length: int) -> None:
        """A record written (its line ``length`` bytes long, after those noted)."""
        op, t = record.get("op"), record.get("t")
        if op is not None:  # (not the header)
            if not isinstance(t, int | float) or isinstance(t, bool):
                self.whole = False
            else:
                self.first = float(t) if self.first is None else self.first
                if op == "out":
                    self.times.append(float(t))
                    self.offsets.append(self.lines - 1)
        self.lines += length

    def to_json(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "trailer": self.trailer,
            "lines": self.lines,
            "first": self.first,
            "times": self.times,
            "offsets": self.offsets,
        }

    @staticmethod
    def of(segment: Path) -> "SegmentIndex | None":
        """The index kept beside ``segment``, if it is whole and of this very file; None:
        none to trust (a run killed before the segment closed leaves none)."""
        try:
            data = json_codec.loads(gzip.decompress(index_path(segment).read_bytes()))
            first = data["first"]
            index = SegmentIndex(
                int(data["size"]),
                str(data["trailer"]),
                int(data["lines"]),
                None if first is None else float(first),
                [float(t) for t in data["times"]],
                [int(at) for at in data["offsets"]],
            )
            size, trailer = _size_and_trailer(segment)
        except (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError):
            return None
        if (index.size, index.trailer) != (size, trailer):
            return None
        return index if len(index.times) == len(index.offsets) else None


def _size_and_trailer(segment: Path) -> tuple[int, str]:
    """The file's bytes, and its last 8 (hex)."""
    with segment.open("rb") as raw:
        size = raw.seek(0, 2)
        raw.seek(max(size - 8, 0))
        return size, raw.read(8).hex()


def segment_files(directory: Path) -> list[tuple[int, Path]]:
    """The segments in ``directory``, oldest first."""
    found = []
    for path in directory.iterdir():
        matched = PATTERN.fullmatch(path.name)
        if matched is not None:
            found.append((int(matched.group(1)), path))
    return sorted(found)


class SegmentWriter:
    """Writes lines into rotating segments under ``directory``, their compressed bytes
    bounded by ``max_bytes`` in all. ``header``: the fields of every segment's header
    line; ``checkpoint``: the records a new segment starts with (the state then)."""

    def __init__(
        self,
        directory: Path,
        max_bytes: int,
        header: dict[str, Any],
        checkpoint: Callable[[], Iterable[dict[str, Any]]],
        checkpoint_bytes: int | None = None,
    ) -> None:
        """``checkpoint_bytes``: the compressed bytes after which a segment ends under
        any bound (None: ``CHECKPOINT_BYTES``)."""
        if max_bytes < MIN_BYTES:
            raise RecordingError(f"--record-max-bytes: {max_bytes} is below {MIN_BYTES}")
        every = CHECKPOINT_BYTES if checkpoint_bytes is None else checkpoint_bytes
        if every < MIN_BYTES:
            raise RecordingError(f"--record-checkpoint-every: {every} is below {MIN_BYTES}")
        directory.mkdir(parents=True, exist_ok=True)
        existing = segment_files(directory)
        if existing:
            raise RecordingError(
                f"{existing[0][1]}: {directory} holds a recording already; "
                "record into an empty directory"
            )
        self.directory = directory
        self.max_bytes = max_bytes
        self.segment_bytes = min(max_bytes // SEGMENTS_PER_BOUND, every)
        self.header = header
        self.checkpoint = checkpoint
        self.number = 0
        self.segments: list[tuple[int, Path]] = []
        self._raw: IO[bytes] | None = None
        self._gzip: gzip.GzipFile | None = None
        self._unsynced = 0  # uncompressed bytes written since the last sync flush
        self._checkpoint_end = 0  # the compressed bytes of the segment's header and checkpoint
        self._index = SegmentIndex()  # of the segment being written
        self._open_next(first=True)

    def _open_next(self, first: bool = False) -> None:
        self._close_current()
        self.number += 1
        path = self.directory / segment_name(self.number)
        self._raw = open(path, "wb")  # noqa: SIM115 (closed at rotation and close)
        self._gzip = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=COMPRESS_LEVEL)
        self.segments.append((self.number, path))
        self._index = SegmentIndex()
        self._put({**self.header, "segment": self.number})
        if not first:
            for record in self.checkpoint():
                self._put({**record, "b": 1})
        self._sync()
        self._prune()

    def _put(self, record: dict[str, Any]) -> int:
        assert self._gzip is not None
        line = json_codec.dumps(record) + b"\n"
        self._index.note(record, len(line))
        return self._gzip.write(line)

    def write(self, record: dict[str, Any]) -> None:
        self._unsynced += self._put(record)
        if self._unsynced >= self.segment_bytes:  # (a fast writer reaches its share early)
            self.flush()

    def flush(self) -> None:
        """Make every line written so far readable from the file (a gzip sync flush),
        and start the next segment if this one has reached its share of the bound."""
        if self._raw is None:
            return
        self._sync()
        written = self._raw.tell()
        # (a segment whose checkpoint alone fills its share takes half a share more)
        if written >= max(self.segment_bytes, self._checkpoint_end + self.segment_bytes // 2):
            self._open_next()

    def _sync(self) -> None:
        assert self._gzip is not None and self._raw is not None
        self._gzip.flush(zlib.Z_SYNC_FLUSH)
        self._raw.flush()
        self._unsynced = 0

    def _prune(self) -> None:
        assert self._raw is not None
        self._checkpoint_end = self._raw.tell()
        while len(self.segments) > 1 and self._total() > self.max_bytes:
            _, oldest = self.segments.pop(0)
            oldest.unlink(missing_ok=True)
            index_path(oldest).unlink(missing_ok=True)

    def _total(self) -> int:
        """The bytes the recording holds: its segments, and their indexes."""
        paths = [p for _, path in self.segments for p in (path, index_path(path))]
        return sum(path.stat().st_size for path in paths if path.exists())

    def _close_current(self) -> None:
        if self._gzip is not None:
            self._gzip.close()
        if self._raw is not None:
            self._raw.close()
            self._keep_index(self.segments[-1][1])
        self._gzip = self._raw = None

    def _keep_index(self, path: Path) -> None:
        """The closed segment's index, beside it (``SegmentIndex``); a reader that finds
        none, or one it cannot read, decompresses the segment instead."""
        index = self._index
        if not index.whole:
            return
        index.size, index.trailer = _size_and_trailer(path)
        text = json_codec.dumps(index.to_json())
        index_path(path).write_bytes(gzip.compress(text, COMPRESS_LEVEL, mtime=0))

    def close(self) -> None:
        self._close_current()


@dataclass(frozen=True, slots=True)
class Stop:
    """Where reading stopped before the end: the file, the offset of the line in its
    decompressed stream, what the line names (or its first bytes), and why."""

    file: str
    offset: int
    object: str
    why: str

    def __str__(self) -> str:
        return f"{self.file}: offset {self.offset}: {self.object}: {self.why}"


@dataclass(slots=True)
class Reading:
    """The records of a recording, oldest first (``records``), with each segment's
    header (``headers``) and where reading stopped early (``stopped``, else None).
    ``first_segment``: the number of the segment to start from (its checkpoint read as
    the first segment's); those before it are not read. 0: the first there is."""

    directory: Path
    headers: list[dict[str, Any]] = field(default_factory=list)
    stopped: Stop | None = None
    first_segment: int = 0

    def records(self) -> Iterator[dict[str, Any]]:
        """Each record once: the first segment's checkpoint, then every segment's
        records after its checkpoint. Stops at the first line that cannot be read."""
        files = segment_files(self.directory)
        if not files:
            raise RecordingError(f"{self.directory}: no recording here (no segment-*.jsonl.gz)")
        files = [(n, path) for n, path in files if n >= self.first_segment] or files[-1:]
        for index, (_, path) in enumerate(files):
            yield from self._segment(path, first=index == 0)
            if self.stopped is not None:
                return

    def _segment(self, path: Path, first: bool) -> Iterator[dict[str, Any]]:
        offset = 0
        line = b""
        try:
            with gzip.open(path, "rb") as stream:
                for line in stream:
                    record = self._parse(path, offset, line)
                    if record is None:
                        return
                    offset += len(line)
                    if "kbatch" in record and "segment" in record:
                        self.headers.append(record)
                    elif first or "b" not in record:
                        yield record
        except (EOFError, OSError, zlib.error) as exc:
            # the stream breaks between lines: name the last whole record read
            last = f"after {_named(line)}" if line else "before its first record"
            self.stopped = Stop(str(path), offset, last, f"the segment ends early ({exc})")

    def _parse(self, path: Path, offset: int, line: bytes) -> dict[str, Any] | None:
        if not line.endswith(b"\n"):
            self.stopped = Stop(str(path), offset, _named(line), "the last line is cut short")
            return None
        try:
            record = json_codec.loads(line)
        except ValueError as exc:
            self.stopped = Stop(str(path), offset, _named(line), f"not a JSON record ({exc})")
            return None
        if not isinstance(record, dict) or not isinstance(record.get("op", ""), str):
            self.stopped = Stop(str(path), offset, _named(line), "not a record")
            return None
        return record


def _named(line: bytes) -> str:
    """What a line names: its object's kind and name if they can be made out, else its
    operation and time, else its first bytes."""
    text = line.decode("utf-8", "replace")
    kind = re.search(r'"kind":"([^"]+)"', text)
    name = re.search(r'"name":"([^"]+)"', text)
    if kind and name:
        return f"{kind.group(1)} {name.group(1)}"
    record = re.match(r'\{"op":"([^"]+)","t":([0-9.e+-]+)', text)
    if record:  # a record of no object (a session's decisions, the clock, the conf)
        return f"the {record.group(1)!r} record of t={record.group(2)}"
    return repr(text[:60])
