"""kbatch bench: the synthetic cluster is scheduled whole and reported as JSON lines."""

import json

import pytest

from kbatch import cli


def test_bench_places_every_gang_and_prints_one_json_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["bench", "--size", "20x200"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    result = json.loads(line)
    assert set(result) == {"nodes", "pods", "binds", "seconds", "snapshot_seconds", "peak_rss_mib"}
    assert (result["nodes"], result["pods"], result["binds"]) == (20, 200, 200)


def test_bench_binds_only_what_fits() -> None:
    from kbatch import bench

    # 2 nodes × 32 cpu hold 6 gangs of 10 (60 cpu), never a seventh half-placed
    result = bench.run_size(2, 100, bench.bench_conf())
    assert result["binds"] == 60


def test_bad_size_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--size", "lots"]) == 2
    assert "expected NODESxPODS" in capsys.readouterr().err
