"""The ETA's backtest: the scorer on hand-made estimates (exact medians and p90s), and
small runs on a recording and on the simulated day."""

import json
from pathlib import Path
from typing import Any

import pytest

from kbatch.api import API_VERSION
from kbatch.cli.main import main
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.record import eta_accuracy, eta_score
from kbatch.record.eta_score import Asked
from kbatch.sim import manifests, runner

GROUP_NAME = "scheduling.k8s.io/group-name"


def _rows(scored: dict) -> dict[tuple[str, str], dict]:
    return {(row["confidence"], row["wait"]): row for row in scored["rows"]}


def test_the_scorer_gives_exact_medians_and_p90s_by_confidence_and_wait() -> None:
    starts = {"a": [100.0], "b": [700.0, 2000.0], "c": []}
    asked = [
        Asked("a", 0.0, 90.0, "high"),  # wait 100: error 0.1
        Asked("a", 50.0, 60.0, "high"),  # wait 50: 0.2
        Asked("b", 100.0, 660.0, "high"),  # wait 600: 0.1
        Asked("b", 400.0, 450.0, "high"),  # wait 300 (5 min, not over): 0.5
        Asked("b", 1000.0, 500.0, "medium"),  # its next start, 2000: wait 1000, 0.5
        Asked("c", 0.0, 10.0, "low"),  # never started
        Asked("c", 2000.0, 500.0, "medium"),  # never started: said after the end, 2100
        Asked("b", 1000.0, None, "none", later_than=800.0),  # right: it waited 1000
        Asked("a", 0.0, None, "none"),  # unknown
    ]
    scored = eta_score.score(asked, starts, end=2100.0)
    rows = _rows(scored)
    assert rows["high", "all"] == {
        "confidence": "high",
        "wait": "all",
        "estimates": 4,
        "jobs": 2,
        "median": 0.15,
        "p90": 0.41,  # linear between ranks: 0.2 + 0.7 * (0.5 - 0.2)
        "early": 0.25,  # 90 before 100; 60, 660, 450 after 50, 600, 300
        "newer_first": None,  # not told when the jobs were first seen
    }
    assert (rows["high", "wait <= 5 min"]["median"], rows["high", "wait <= 5 min"]["p90"]) == (
        0.2,
        0.44,
    )
    assert rows["high", "wait > 5 min"]["estimates"] == 1
    assert rows["medium", "wait > 5 min"]["median"] == 0.5
    assert ("low", "all") not in rows
    assert scored["scored"] == 5
    assert scored["never_started"] == {"high": 0, "medium": 1, "low": 1, "none": 0}
    assert scored["never_started_estimated_past_the_end"] == 1
    assert scored["no_time"] == {"estimates": 1, "later_than": 1, "later_than_held": 1}
    assert scored["target"]["holds"] is True
    assert scored["target"]["median"] == 0.1


def test_the_target_fails_when_the_median_error_of_long_high_waits_is_over_a_fifth() -> None:
    starts = {"a": [1000.0]}
    asked = [Asked("a", 0.0, 700.0, "high"), Asked("a", 100.0, 600.0, "high")]  # 0.3, 1/3
    scored = eta_score.score(asked, starts)
    assert scored["target"]["holds"] is False
    assert scored["target"]["median"] == pytest.approx(0.3167, abs=1e-4)
    assert "FAILS: median 31.7% over 2 estimates" in eta_score.table(scored)


def test_the_share_of_estimates_that_a_newer_job_went_ahead_of() -> None:
    """``newer first``: a job first seen after the question started before the job."""
    starts = {"a": [1000.0], "b": [2000.0], "new": [500.0], "old": [1500.0]}
    seen = {"a": 0.0, "b": 0.0, "new": 200.0, "old": 0.0}
    asked = [
        Asked("a", 100.0, 900.0, "low"),  # "new", seen at 200, started at 500: yes
        Asked("a", 300.0, 700.0, "low"),  # "new" was seen before this question: no
        Asked("b", 1200.0, 800.0, "low"),  # only "old" started in between: no
        Asked("b", 100.0, 1900.0, "low"),  # "new" started at 500: yes
    ]
    row = _rows(eta_score.score(asked, starts, seen=seen))["low", "all"]
    assert row["newer_first"] == 0.5
    assert "newer first" in eta_score.table(eta_score.score(asked, starts, seen=seen))


def test_an_estimate_asked_in_the_instant_its_job_started_is_not_scored() -> None:
    scored = eta_score.score([Asked("a", 100.0, 0.0, "high")], {"a": [100.0]})
    assert scored["scored"] == 0 and scored["rows"] == []
    assert scored["target"]["holds"] is None


def _stream() -> list[dict[str, Any]]:
    """One node of 8 cpu, and a job of one 8-cpu pod every 30 s, each running its
    activeDeadlineSeconds, 2 minutes: the jobs queue up, each waits for the one before."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node-1"},
            "status": {
                "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    ]
    for i in range(6):
        name, submit = f"job-{i}", {manifests.SUBMIT_AT: f"{30 * i}s"}
        objects.append(
            {
                "apiVersion": API_VERSION,
                "kind": "PodGroup",
                "metadata": {"name": name, "annotations": submit},
                "spec": {"minMember": 1},
            }
        )
        annotations = {**submit, manifests.DURATION: "2m", GROUP_NAME: name}
        container = {"name": "main", "resources": {"requests": {"cpu": "8"}}}
        objects.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-0", "annotations": annotations},
                "spec": {
                    "schedulerName": "kbatch",
                    "activeDeadlineSeconds": 120,
                    "containers": [container],
                },
            }
        )
    return objects


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stream of jobs (``_stream``), recorded."""
    loaded = manifests.load_documents(_stream(), "<stream>")
    directory = tmp_path_factory.mktemp("rec") / "recording"
    options = runner.Options(until=1200.0, record=(directory, 16 << 20))
    runner.Simulation(loaded, default_conf(), options).run()
    return directory


def test_every_scored_estimate_is_of_a_job_that_waited_and_started_later(
    recording: Path,
) -> None:
    settings = eta_accuracy.Settings(every=20.0)
    replay = eta_accuracy.EtaReplay(recording, settings)
    shown = replay.backtested()
    backtest = replay.backtest
    assert shown["scored"] > 0
    # each ran its deadline: the forecast is highly confident, and exact (a step, 1 s)
    assert shown["target"]["holds"] is True
    assert [(row["confidence"], row["p90"]) for row in shown["rows"]] == [("high", 0.0)] * 3
    for one in backtest.asked:
        starts = backtest.starts.get(one.job, [])
        start = eta_score.first_start(starts, one.at)
        if start is not None:
            assert start > one.at  # it waited when asked
            assert starts[0] > one.at  # and had never started before


def test_replay_eta_accuracy_prints_the_table_as_json(
    recording: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["replay", str(recording), "--eta-accuracy", "--eta-every", "20s", "-o", "json"]
    assert main(args) == 0
    shown = json.loads(capsys.readouterr().out)
    for key in ("rows", "scored", "never_started", "no_time", "target", "instants"):
        assert key in shown
    assert {"confidence", "wait", "estimates", "jobs", "median", "p90"} <= set(shown["rows"][0])
    assert main(["replay", str(recording), "--eta-accuracy", "--eta-every", "20s"]) == 0
    assert "target (high confidence, wait > 5 min" in capsys.readouterr().out


def test_bad_backtest_settings_are_refused_naming_the_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "--eta-accuracy", "--size", "10x100"]) == 2
    assert "--eta-accuracy goes with --trace only" in capsys.readouterr().err
    assert main(["replay", "somewhere", "--eta-accuracy", "--eta-sample", "0"]) == 2
    assert "--eta-sample: expected a positive number, not 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--eta-every"):
        eta_accuracy.Settings(every=0.0)
    with pytest.raises(ValueError, match="--eta-sample"):
        eta_accuracy.Settings(sample=0)


def test_the_simulated_day_is_backtested_as_it_runs(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--trace", "--trace-hours", "0.25", "--trace-nodes", "3"]
    assert main([*args, "--eta-accuracy", "--eta-every", "1m", "-o", "json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["trace"] == {"nodes": 3, "hours": 0.25, "seed": 0}
    assert 0 < shown["instants"] <= 15  # minutes of the quarter hour, to its last change
    assert shown["forecasts"] <= shown["instants"]
    for key in ("rows", "scored", "never_started", "no_time", "target"):
        assert key in shown
