"""kbatch run's scheduler conf: reloaded when the file changes; a bad file keeps the last good."""

import logging
from pathlib import Path

import pytest

from kbatch.config import ConfigError
from kbatch.operators.scheduler.runtime.loop import ConfSource

GOOD = 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
BETTER = (
    'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins:\n  - name: gang\n  - name: drf\n'
)


def test_reloads_on_change_and_keeps_the_last_good_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "conf.yaml"
    path.write_text(GOOD)
    source = ConfSource(path)
    assert source.current().actions == ("enqueue", "allocate")
    path.write_text(BETTER)
    assert source.current().actions == ("enqueue", "allocate", "backfill")
    path.write_text('actions: "allocate, teleport"\ntiers:\n- plugins:\n  - name: gang\n')
    with caplog.at_level(logging.ERROR):
        assert source.current().actions == ("enqueue", "allocate", "backfill")
    assert "unknown action 'teleport'" in caplog.text
    path.unlink()
    assert source.current().actions == ("enqueue", "allocate", "backfill")


def test_a_bad_file_at_start_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "conf.yaml"
    path.write_text("tiers: []\n")
    with pytest.raises(ConfigError):
        ConfSource(path)


def test_no_file_means_the_default_conf() -> None:
    actions = ("enqueue", "reclaim", "allocate", "backfill", "reserve")
    assert ConfSource(None).current().actions == actions


def test_sessions_run_when_there_is_work_else_every_few_periods() -> None:
    from kbatch.metrics import SchedulerMetrics
    from kbatch.operators.scheduler.runtime.loop import SchedulerLoop

    work = {"now": False, "generation": 0, "busy": False}
    loop = SchedulerLoop(
        cluster=None,  # type: ignore[arg-type]
        conf=ConfSource(None),
        period=1.0,
        metrics=SchedulerMetrics(),
        may_schedule=lambda: True,
        has_work=lambda: bool(work["now"]),
        generation=lambda: int(work["generation"]),
        busy=lambda: bool(work["busy"]),
        idle_every=3,
        busy_idle_every=5,
    )
    assert loop._due()  # the first: everything is new
    assert [loop._due() for _ in range(6)] == [False, False, True, False, False, True]
    work["generation"] = 1  # a pod went Running: statuses catch up at once
    assert [loop._due() for _ in range(2)] == [True, False]
    work["busy"], work["generation"] = True, 2  # ...but not while binds are in flight,
    # and their longer beat: a session when 5 periods have passed since the last
    assert [loop._due() for _ in range(8)] == [False] * 3 + [True] + [False] * 4
    work["busy"] = False  # the burst is over: the change is seen at once
    assert [loop._due() for _ in range(2)] == [True, False]
    work["busy"] = True
    assert [loop._due() for _ in range(2)] == [False, False]
    work["now"] = True
    assert [loop._due() for _ in range(3)] == [True, True, True]
