"""The recording's segments: what is written reads back, rotation keeps the bound and
each segment's checkpoint, and a cut or corrupt segment reads up to where it breaks."""

import gzip
import shutil
import zlib
from pathlib import Path
from typing import Any

import pytest

from kbatch.record.store import segments
from kbatch.record.store.recorder import Recorder


def _writer(directory: Path, max_bytes: int = 1 << 20, held: list[Any] | None = None) -> Any:
    return segments.SegmentWriter(
        directory, max_bytes, {"kbatch": "9.9", "format": 1}, lambda: list(held or [])
    )


def _pod(i: int) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": f"p-{i}", "namespace": "ns"}, "pad": "x" * i}


def test_what_is_written_reads_back_in_order(tmp_path: Path) -> None:
    writer = _writer(tmp_path)
    written = [{"op": "a", "t": float(i), "o": _pod(i)} for i in range(50)]
    for record in written:
        writer.write(record)
    writer.close()
    reading = segments.Reading(tmp_path)
    assert list(reading.records()) == written
    assert reading.stopped is None
    assert reading.headers == [{"kbatch": "9.9", "format": 1, "segment": 1}]


def test_a_directory_with_a_recording_is_refused_and_so_is_a_tiny_bound(tmp_path: Path) -> None:
    _writer(tmp_path).close()
    with pytest.raises(segments.RecordingError, match=r"segment-000001\.jsonl\.gz: .* holds a"):
        _writer(tmp_path)
    with pytest.raises(segments.RecordingError, match="--record-max-bytes: 100 is below"):
        _writer(tmp_path / "other", max_bytes=100)
    (tmp_path / "empty").mkdir()
    with pytest.raises(segments.RecordingError, match="no recording here"):
        list(segments.Reading(tmp_path / "empty").records())


def test_rotation_keeps_the_bound_and_each_segment_starts_from_its_checkpoint(
    tmp_path: Path,
) -> None:
    held = [{"op": "a", "t": 0.0, "o": {"kind": "Node", "metadata": {"name": "n"}}}]
    writer = _writer(tmp_path, max_bytes=16384, held=held)
    for i in range(3000):  # (each record's crc differs: they compress less)
        writer.write({"op": "a", "t": float(i), "o": _pod(i % 7), "r": zlib.crc32(b"%d" % i)})
        if i % 50 == 0:
            writer.flush()
    writer.close()
    files = segments.segment_files(tmp_path)
    assert len(files) > 1
    assert files[0][0] > 1, "the oldest segments were dropped"
    assert sum(path.stat().st_size for _, path in files) <= 16384 + 16384 // 4
    records = list(segments.Reading(tmp_path).records())
    assert records[0] == {**held[0], "b": 1}, "the oldest segment kept starts with its checkpoint"
    assert records[-1]["t"] == 2999.0
    times = [r["t"] for r in records[1:]]
    assert times == sorted(times) and len(set(times)) == len(times), "each record once"
    indexes = sorted(segments.index_path(path).name for _, path in files)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [path.name for _, path in files] + indexes
    ), "each segment kept has its index beside it, and a dropped one's went with it"


def test_an_index_is_kept_of_a_closed_segment_only_and_trusted_for_that_file(
    tmp_path: Path,
) -> None:
    writer = _writer(tmp_path)
    for i in range(20):
        writer.write({"op": "out" if i % 3 else "a", "t": float(i), "o": _pod(i)})
    writer.flush()
    path = segments.segment_files(tmp_path)[0][1]
    assert segments.SegmentIndex.of(path) is None, "not closed yet (a run killed now)"
    writer.close()
    index = segments.SegmentIndex.of(path)
    assert (
        index is not None
        and index.first == 0.0
        and index.times == [float(i) for i in range(20) if i % 3]
    )
    lines = gzip.decompress(path.read_bytes())
    assert index.lines == len(lines)
    assert all(lines[at : at + 13] == b'\n{"op":"out",' for at in index.offsets)
    kept = segments.index_path(path).read_bytes()
    other = gzip.decompress(kept).replace(b'"size":', b'"size":1')
    segments.index_path(path).write_bytes(gzip.compress(other))
    assert segments.SegmentIndex.of(path) is None, "of another file"
    segments.index_path(path).write_bytes(kept[:-5])
    assert segments.SegmentIndex.of(path) is None, "cut short"
    segments.index_path(path).write_bytes(gzip.compress(gzip.decompress(kept)[:-5]))
    assert segments.SegmentIndex.of(path) is None, "not JSON"
    segments.index_path(path).write_bytes(kept)
    assert segments.SegmentIndex.of(path) == index
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # the same size, another length in the trailer
    path.write_bytes(bytes(data))
    assert segments.SegmentIndex.of(path) is None, "of the file before it changed"
    untimed = _writer(tmp_path / "untimed")
    untimed.write({"op": "a", "o": _pod(1)})
    untimed.close()
    assert not segments.index_path(segments.segment_files(tmp_path / "untimed")[0][1]).exists()


def _cut(source: Path, target: Path, keep: int) -> None:
    target.mkdir()
    data = (source / segments.segment_name(1)).read_bytes()
    (target / segments.segment_name(1)).write_bytes(data[:keep])


def test_a_run_killed_after_a_flush_reads_up_to_it_and_says_where_it_stopped(
    tmp_path: Path,
) -> None:
    recorder = Recorder(tmp_path / "rec", 1 << 20, clock=lambda: 1.0)
    for i in range(200):
        recorder.applied("Pod", f"ns/p-{i}", _pod(i))
    recorder.close()
    whole = list(segments.Reading(tmp_path / "rec").records())
    assert len(whole) == 200
    size = (tmp_path / "rec" / segments.segment_name(1)).stat().st_size
    for n, keep in enumerate((size - 8, size // 2, size // 5)):
        cut = tmp_path / f"cut-{n}"
        _cut(tmp_path / "rec", cut, keep)
        reading = segments.Reading(cut)
        records = list(reading.records())
        assert records == whole[: len(records)], "a prefix, record for record"
        assert reading.stopped is not None
        assert reading.stopped.file == str(cut / segments.segment_name(1))
        assert reading.stopped.object == f"after Pod p-{len(records) - 1}", "the last read"
        if keep == size - 8:  # the gzip trailer alone is gone: every line is there
            assert len(records) == 200
        else:
            assert len(records) < 200


def test_a_corrupt_line_stops_the_reading_naming_file_offset_and_object(tmp_path: Path) -> None:
    good = b'{"kbatch":"1","format":1,"segment":1}\n{"op":"a","t":1,"o":{}}\n'
    bad = b'{"op":"a","t":2,"o":{"kind":"Pod","metadata":{"name":"p-7"\n'
    with gzip.open(tmp_path / segments.segment_name(1), "wb") as stream:
        stream.write(good + bad + b'{"op":"a","t":3}\n')
    reading = segments.Reading(tmp_path)
    assert list(reading.records()) == [{"op": "a", "t": 1, "o": {}}]
    assert reading.stopped is not None
    assert reading.stopped.offset == len(good)
    assert reading.stopped.object == "Pod p-7"
    assert "not a JSON record" in reading.stopped.why
    shutil.rmtree(tmp_path)


def test_a_stop_after_a_record_of_no_object_names_its_operation_and_time(
    tmp_path: Path,
) -> None:
    lines = b'{"kbatch":"1","format":1,"segment":1}\n{"op":"out","t":12.5,"binds":[]}\n'
    data = gzip.compress(lines)
    (tmp_path / segments.segment_name(1)).write_bytes(data[: len(data) - 8])  # no trailer
    reading = segments.Reading(tmp_path)
    assert list(reading.records()) == [{"op": "out", "t": 12.5, "binds": []}]
    assert reading.stopped is not None and "ends early" in reading.stopped.why
    assert reading.stopped.object == "after the 'out' record of t=12.5"
