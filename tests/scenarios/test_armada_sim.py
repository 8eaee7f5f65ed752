"""Armada's own simulator and kbatch's on one small pair of Armada's test data (the basic
workload on the tiny cluster), as ``kbatch bench --armada-sim`` runs them: both finish,
both start every job, and the line carries both wall times. Needs the binary that
``scripts/provision-armada-sim.sh`` caches; skipped without it."""

from pathlib import Path

import pytest

from kbatch.bench import armada_sim

TESTDATA = Path(__file__).parents[3] / "shared" / armada_sim.TESTDATA_NAME
BINARY = armada_sim.default_armada_bin()
if not TESTDATA.is_dir():
    pytest.skip(f"no Armada simulator testdata at {TESTDATA}", allow_module_level=True)
if not BINARY.is_file():
    pytest.skip(
        f"Armada's simulator is not cached at {BINARY} (scripts/provision-armada-sim.sh)",
        allow_module_level=True,
    )


def test_both_simulators_run_the_basic_workload(tmp_path: Path) -> None:
    options = armada_sim.Options(testdata=TESTDATA, armada_bin=BINARY, timeout=300.0)
    line = armada_sim.compare_pair(
        options,
        TESTDATA / "workloads/basicWorkload.yaml",
        TESTDATA / "clusters/tinyCluster.yaml",
        tmp_path,
    )
    assert line["workload"] == "workloads/basicWorkload.yaml"
    for name in ("armada", "kbatch"):
        result = line[name]
        assert "error" not in result, (name, result)
        assert result["wall_seconds"] > 0
        # ten 1-cpu jobs on 160 cores: all start in the first cycle, none waits long
        assert result["queues"]["a"]["started"] == 10, (name, result)
        assert result["queues"]["a"]["p99"] <= armada_sim.DEFAULT_PERIOD, (name, result)
    assert line["kbatch_speedup"] > 0
