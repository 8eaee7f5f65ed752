"""``kbatch bench --record-cost``: its recording-on session really records (the recording
replays decision for decision), its line says what it measured, and the recorder's
hook stays within 5% of a session's Python work (opcodes, not seconds: the same on
any machine)."""

import json
from pathlib import Path

import pytest

from kbatch.bench import record_cost
from kbatch.cli.main import main
from kbatch.record import replay


@pytest.mark.parametrize("backlog", [False, True], ids=["size", "backlog"])
def test_the_recorded_session_replays_with_every_decision(backlog: bool, tmp_path: Path) -> None:
    spec = record_cost.Spec(20, 1000 if backlog else 200, backlog)
    directory = tmp_path / "recording"
    measured = record_cost.one_round(spec, directory)
    assert measured.recording_bytes > 0
    assert measured.binds > 0 or backlog  # (the backlog's session has no room to bind into)
    result = replay.replay(directory).as_json()
    # The timed session and, with the backlog, the one before it.
    assert result["sessions"] == (2 if backlog else 1)
    assert result["decisions"]["differing"] == 0, result["differences"]
    binds = result["by_kind"]["binds"]
    assert binds["recorded"] == binds["replayed"] > 0
    assert binds["recorded"] == (200 if not backlog else 640)  # 20 nodes of 32 cpu
    assert result["by_kind"]["groups"]["recorded"] > 0
    assert result["stopped"] is None


def test_a_round_without_recording_leaves_nothing(tmp_path: Path) -> None:
    measured = record_cost.one_round(record_cost.Spec(20, 200), None)
    assert measured.binds == 200
    assert measured.recording_bytes == 0 and measured.writer_cpu_seconds == 0.0


def test_the_command_prints_both_runs_side_by_side(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--record-cost", "--size", "20x200", "--rounds", "2"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["unit"] == "seconds" and line["rounds"] == 2 and line["binds"] == 200
    assert line["ratio"] == round(line["seconds_on"] / line["seconds_off"], 4)
    low, median, high = line["on_min_median_max"]
    assert low <= median == line["seconds_on"] <= high
    assert line["recording_bytes"] > 0
    assert len(line["writer_cpu_seconds_min_median_max"]) == 3
    assert {"switches_off_min_median_max", "switches_on_min_median_max"} <= set(line)


def test_record_cost_refuses_the_trace(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--record-cost", "--trace"]) == 2
    assert "--record-cost goes with neither --trace" in capsys.readouterr().err


def test_the_hook_adds_at_most_five_percent_of_the_session_s_opcodes() -> None:
    line = record_cost.measure(record_cost.Spec(50, 1000), 1, record_cost.OpcodeCounter())
    assert line["unit"] == "opcodes"
    assert line["seconds_off"] > 100_000
    assert 1.0 < line["ratio"] <= 1.05, line
