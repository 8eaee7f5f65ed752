"""kbatch bench: the synthetic cluster is scheduled whole and reported as JSON lines."""

import json

import pytest

from kbatch.cli import main as cli


def test_bench_places_every_gang_and_prints_one_json_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["bench", "--size", "20x200"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    result = json.loads(line)
    keys = {"nodes", "pods", "queues", "binds", "seconds", "snapshot_seconds", "peak_rss_mib"}
    assert set(result) == keys
    assert (result["nodes"], result["pods"], result["binds"]) == (20, 200, 200)
    assert result["queues"] == "flat:10"


def test_bench_binds_only_what_fits() -> None:
    from kbatch.bench import scheduling as bench

    # 2 nodes × 32 cpu hold 6 gangs of 10 (60 cpu), never a seventh half-placed
    result = bench.run_size(2, 100, bench.bench_conf())
    assert result["binds"] == 60


def test_bad_size_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--size", "lots"]) == 2
    assert "expected NODESxPODS" in capsys.readouterr().err


def test_backlog_times_the_next_session_on_a_full_cluster() -> None:
    """2 nodes × 32 cpu: 6 gangs run, 4 wait; alike, none may evict another."""
    from kbatch.bench import scheduling as bench

    result = bench.run_backlog(2, 100)
    assert (result["running"], result["waiting"]) == (60, 40)
    assert (result["binds"], result["evictions"]) == (0, 0)
    assert result["seconds"] >= 0
    # Settled, kbatch run's loop runs a session a beat (every 5 periods), not a period.
    assert result["settled_periods"] == bench.SETTLED_PERIODS == 20
    assert result["settled_sessions"] == 4
    assert result["settled_seconds_per_period"] >= 0


def test_backlog_from_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--backlog", "--size", "2x100"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["waiting"] == 40
