"""A replay shared between processes finds what one replay finds: the sessions are
counted from the recording's lines, each share applies the changes before its first
session without running them, and the shares' results add up to the whole's."""

import gzip
import itertools
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from kbatch.cli.main import main
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.record import replay, replay_marks, replay_split
from kbatch.record.store import segments
from kbatch.sim import manifests, runner, trace
from tests.unit.record.test_replay import _copy, recording

__all__ = ["recording"]  # the fixture, used by name


def _recorded_sessions(directory: Path) -> int:
    return sum(1 for r in segments.Reading(directory).records() if r.get("op") == "out")


def sessions_in(directory: Path, start: float | None = None, end: float | None = None) -> range:
    """The recorded sessions a replay from ``start`` to ``end`` replays, as the split
    finds them."""
    marks = replay_marks.session_marks(directory)
    return replay_marks.window(marks.first, marks.times, start, end)


def _same(result: dict[str, Any]) -> dict[str, Any]:
    """What a replay found, less its cost (and how it was shared)."""
    return {k: v for k, v in result.items() if k not in ("wall_seconds", "shares")}


def test_the_sessions_are_counted_from_the_lines(recording: Path, tmp_path: Path) -> None:
    counted = sessions_in(recording)
    assert counted == range(_recorded_sessions(recording)) and len(counted) > 50
    marks = replay_marks.session_marks(recording)
    first, times, offsets = marks.first, marks.times, marks.offsets
    assert first <= times[0] and times == sorted(times) and marks.checkpoints == []
    lines = b"".join(gzip.decompress(p.read_bytes()) for _, p in segments.segment_files(recording))
    assert all(lines[at : at + 13] == b'\n{"op":"out",' for at in offsets)
    spaced = _copy(recording, tmp_path / "spaced", lambda _: None)  # json.dumps' ", " and ": "
    assert sessions_in(spaced) == range(0), "not as the recorder writes it"
    assert replay_split.replay_split(spaced, None, None, 2).sessions == len(counted)


def test_shares_cost_about_the_same_and_the_last_runs_on() -> None:
    even = [100 * n for n in range(1, 1001)]  # 100 bytes of lines per session
    parts = replay_split.shares(range(1000), even, 3)
    assert [p.start for p in parts] == [0, parts[0].stop, parts[1].stop]
    assert parts[-1].stop == sys.maxsize
    sizes = [len(parts[0]), len(parts[1]), 1000 - parts[2].start]
    assert sizes[0] > sizes[1] > sizes[2] > 200, "later shares apply more before theirs"
    applied = replay_split.APPLIED_COST
    costs = [size + applied * p.start for size, p in zip(sizes, parts, strict=True)]
    assert max(costs) - min(costs) <= 2, costs
    dearer_late = [100 * n + n * n // 10 for n in range(1, 1001)]  # later sessions longer
    assert replay_split.shares(range(1000), dearer_late, 2)[0].stop > parts[0].stop
    assert replay_split.shares(range(5), even, 1) == [range(0, sys.maxsize)]
    window = replay_split.shares(range(100, 200), even, 2)
    assert 100 < window[0].stop < 200 and window[1].stop == sys.maxsize
    few = replay_split.shares(range(1), even, 4)
    assert few[0].start == 0 and all(a.stop == b.start for a, b in itertools.pairwise(few))


def test_shares_add_up_to_the_whole_replay(recording: Path) -> None:
    whole = replay.replay(recording)
    offsets = replay_marks.session_marks(recording).offsets
    parts = replay_split.shares(sessions_in(recording), offsets, 3)
    results = [replay.Replay(recording, share=part).run() for part in parts]
    assert all(r.sessions > 10 for r in results), "each share replays sessions of its own"
    added = replay_split.added_up(str(recording), None, None, results)
    assert added.total().differing == 0
    assert _same(added.as_json()) == _same(whole.as_json())


def test_a_difference_is_numbered_as_one_replay_numbers_it(recording: Path, tmp_path: Path) -> None:
    total = len(sessions_in(recording))
    seen = {"out": 0, "moved": 0}

    def move_a_late_bind(record: dict[str, Any]) -> None:
        if record.get("op") != "out":
            return
        seen["out"] += 1
        if seen["out"] > total * 3 // 4 and record["binds"] and not seen["moved"]:
            record["binds"][0][1] = "nowhere"
            seen["moved"] = 1

    changed = _copy(recording, tmp_path / "late", move_a_late_bind)
    whole = replay.replay(changed).as_json()
    split = replay_split.replay_split(changed, None, None, workers=2).as_json()
    assert whole["decisions"]["differing"] == 2
    assert _same(split) == _same(whole)
    assert split["differences"][0]["session"] > total // 2, "counted from the first session"


def test_a_window_replayed_in_shares_is_the_window_replayed_once(recording: Path) -> None:
    window = replay.replay(recording, start=300.0, end=900.0)
    within = sessions_in(recording, 300.0, 900.0)
    assert len(within) == window.sessions > 0 and within.start > 0
    split = replay_split.replay_split(recording, 300.0, 900.0, workers=2)
    assert window.total().differing == 0
    assert _same(split.as_json()) == _same(window.as_json())


def test_the_command_line_splits_when_asked(
    recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["replay", str(recording), "--jobs", "2", "-o", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["decisions"]["differing"] == 0 and shown["sessions"] > 50
    assert sum(share["sessions"] for share in shown["shares"]) == shown["sessions"]
    assert main(["replay", str(recording), "--jobs", "2"]) == 0
    text = capsys.readouterr().out
    assert re.search(
        r"^process 2: \d+ sessions from segment 1 in [\d.]+ s \([\d.]+ s CPU\)$", text, re.M
    )
    with pytest.raises(SystemExit):
        main(["replay", str(recording), "--jobs", "0"])
    assert "--jobs: '0' is not a whole number of 1 or more" in capsys.readouterr().err
    assert main(["replay", str(recording), "--jobs", "2", "--eta-accuracy"]) == 2
    assert "--jobs goes without --eta-accuracy" in capsys.readouterr().err


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The recording of ``recording``'s simulation, its segments cut every 4 KiB:
    each after the first starts from a checkpoint."""
    spec = trace.TraceSpec(30, 1 / 3, 0)
    loaded = manifests.load_documents(trace.trace_objects(spec), "<trace>")
    directory = tmp_path_factory.mktemp("checkpointed") / "recording"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(segments, "CHECKPOINT_BYTES", segments.MIN_BYTES)
        options = runner.Options(until=spec.seconds, record=(directory, 64 << 20))
        runner.Simulation(loaded, default_conf(), options).run()
    return directory


def test_checkpoints_are_found_with_the_sessions_before_them(checkpointed: Path) -> None:
    marks = replay_marks.session_marks(checkpointed)
    files = segments.segment_files(checkpointed)
    assert len(files) > 4 and [c.segment for c in marks.checkpoints] == [n for n, _ in files[1:]]
    for checkpoint in marks.checkpoints:
        reading = segments.Reading(checkpointed, first_segment=checkpoint.segment)
        records = list(reading.records())
        assert records[0]["t"] == checkpoint.t and records[0]["op"] in ("a", "conf")
        outs = sum(1 for r in records if r.get("op") == "out")
        assert checkpoint.sessions + outs == len(marks.times), "every session counted once"
    assert replay_marks.checkpoint_before(marks.checkpoints, 0) is None
    last = marks.checkpoints[-1]
    assert replay_marks.checkpoint_before(marks.checkpoints, last.sessions + 1) == last
    assert replay_marks.checkpoint_before(marks.checkpoints, last.sessions) != last, (
        "its first session may be cut"
    )


def test_the_indexes_beside_the_segments_give_the_marks_their_lines_give(
    checkpointed: Path, tmp_path: Path
) -> None:
    indexed = replay_marks.session_marks(checkpointed)
    files = segments.segment_files(checkpointed)
    assert all(segments.SegmentIndex.of(path) is not None for _, path in files)
    bare = tmp_path / "bare"
    bare.mkdir()
    for _, path in files:
        shutil.copy(path, bare / path.name)
    assert replay_marks.session_marks(bare) == indexed, "found in the lines"
    stale = files[2][1]
    shutil.copy(segments.index_path(files[1][1]), bare / segments.index_path(stale).name)
    assert replay_marks.session_marks(bare) == indexed, "another segment's index is not used"


def test_shares_from_checkpoints_add_up_to_the_whole_replay(
    checkpointed: Path, recording: Path
) -> None:
    whole = replay.replay(checkpointed)
    assert whole.total().differing == 0
    assert whole.total() == replay.replay(recording).total(), "the same run, recorded alike"
    marks = replay_marks.session_marks(checkpointed)
    parts = replay_split.shares(sessions_in(checkpointed), marks.offsets, 3, marks.checkpoints)
    begins = [replay_marks.begin_for(marks, part.start) for part in parts]
    assert begins[0] is None and all(b is not None for b in begins[1:]), begins
    results = [
        replay.Replay(checkpointed, share=part, begin=begin).run()
        for part, begin in zip(parts, begins, strict=True)
    ]
    added = replay_split.added_up(str(checkpointed), None, None, results)
    assert _same(added.as_json()) == _same(whole.as_json())
    split = replay_split.replay_split(checkpointed, None, None, workers=2).as_json()
    assert _same(split) == _same(whole.as_json())
    first, second = split["shares"]
    assert first["fromSegment"] == 1 and second["fromSegment"] > 1, split["shares"]
    assert first["sessions"] + second["sessions"] == whole.sessions


def test_a_window_replayed_from_a_checkpoint_is_the_window_replayed_from_the_start(
    checkpointed: Path,
) -> None:
    from_checkpoint = replay.replay(checkpointed, start=600.0, end=1000.0)
    from_start = replay.Replay(checkpointed, start=600.0, end=1000.0).run()
    assert from_checkpoint.sessions == from_start.sessions > 0
    assert _same(from_checkpoint.as_json()) == _same(from_start.as_json())
    marks = replay_marks.session_marks(checkpointed)
    window = replay_marks.window(marks.first, marks.times, 600.0, 1000.0)
    begin = replay_marks.begin_for(marks, window.start)
    assert begin is not None and begin.segment > 1, "read from a checkpoint"


def test_how_many_processes_a_replay_is_worth() -> None:
    offsets = [n * (1 << 20) for n in range(1000)]  # a MB of lines per session
    at = [replay_marks.Checkpoint(k + 2, offsets[s], s, float(s)) for k, s in enumerate((300, 600))]
    marks = replay_marks.Marks(0.0, [float(n) for n in range(1000)], offsets, at)
    assert replay_split.auto_workers(marks, range(1000)) == 3, "one more than its checkpoints"
    assert replay_split.auto_workers(marks, range(400, 1000)) == 2, "one before it: no matter"
    assert replay_split.auto_workers(marks, range(610, 1000)) == 1
    assert replay_split.auto_workers(marks, range(250, 350)) == 1, "100 MB of lines"
    assert replay_split.auto_workers(marks, range(250, 400)) == 2
    assert replay_split.auto_workers(marks, range(0)) == 1
    assert (
        replay_split.auto_workers(replay_marks.Marks(0.0, marks.times, offsets), range(1000)) == 1
    )


def test_without_jobs_a_replay_is_shared_when_it_is_worth_it(
    checkpointed: Path,
    recording: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    whole = replay.replay(checkpointed).as_json()
    monkeypatch.setattr(replay_split, "usable_cores", lambda: 2)
    assert "shares" not in replay_split.replay_auto(checkpointed, None, None).as_json(), (
        "the window is short: one process"
    )
    monkeypatch.setattr(replay_split, "AUTO_SPLIT_BYTES", 1)
    shared = replay_split.replay_auto(checkpointed, None, None).as_json()
    assert len(shared["shares"]) == 2 and _same(shared) == _same(whole)
    window = replay_split.replay_auto(checkpointed, 600.0, 1000.0).as_json()
    assert _same(window) == _same(replay.replay(checkpointed, 600.0, 1000.0).as_json())
    assert "shares" not in replay_split.replay_auto(recording, None, None).as_json(), (
        "one segment: no checkpoint to start a second process from"
    )
    assert main(["replay", str(checkpointed), "-o", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["shares"]) == 2
    assert main(["replay", str(checkpointed), "--jobs", "1", "-o", "json"]) == 0
    assert "shares" not in json.loads(capsys.readouterr().out)
    monkeypatch.setattr(replay_split, "usable_cores", lambda: 1)
    alone = replay_split.replay_auto(checkpointed, None, None).as_json()
    assert "shares" not in alone and _same(alone) == _same(whole)
