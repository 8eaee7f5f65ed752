"""Scenarios with preemption and reclaim, recorded in the simulator and replayed: every
bind, eviction, nomination and status is made again, none differing, and the
evictions are among them (a replay that held only binds could not pass)."""

from pathlib import Path

import pytest

from kbatch.record import replay
from kbatch.sim import manifests, runner

HERE = Path(__file__).parent
SCENARIOS = [
    "seed-reclaim.yaml",
    "seed-gang-job.yaml",
    "seed-priority.yaml",
    "policy/preempt-keeps-gangs.yaml",
    "policy/preempt-priority.yaml",
    "policy/reclaim-weights-13.yaml",
    "policy/reclaim-pingpong.yaml",
    "policy/lend-job-deadlines.yaml",  # (its lending reads the recorded Jobs)
]


@pytest.mark.parametrize("name", SCENARIOS)
def test_a_recorded_scenario_replays_every_decision(name: str, tmp_path: Path) -> None:
    loaded = runner.load([HERE / name])
    conf = runner.resolve_conf(None, loaded)
    manifests.check_unique(loaded)
    options = runner.Options(until=600.0, record=(tmp_path / "rec", 64 << 20))
    outcome = runner.Simulation(loaded, conf, options).run()
    result = replay.replay(tmp_path / "rec").as_json()
    assert result["differences"] == []
    assert result["decisions"]["differing"] == 0
    assert result["by_kind"]["binds"]["recorded"] == outcome.totals.binds > 0
    assert result["by_kind"]["evictions"]["recorded"] == outcome.totals.evictions
    assert result["sessions"] == outcome.totals.sessions
