"""Two runs compared (``kbatch.sim.compare``), on a pair small enough to work out by hand,
and the HTML report's template (``kbatch.sim.report``), one run and two."""

import re

import pytest

from kbatch.sim import compare, report
from kbatch.sim.timeline import Timeline, Wait

# Four jobs; under the other conf a starts 10 s later, b 15 s earlier, c at the same time,
# and d, which never started under the base conf, starts at 50 s.
BASE = compare.RunFigures(
    "base",
    {
        "PodGroup ns/a": compare.JobStart("q1", 0.0, 10.0),
        "PodGroup ns/b": compare.JobStart("q1", 0.0, 30.0),
        "PodGroup ns/c": compare.JobStart("q2", 5.0, 5.0),
        "PodGroup ns/d": compare.JobStart("q2", 5.0, None),
    },
    {
        "utilisation": {"cpu": {"mean": 0.5, "whileWaiting": 0.8}, "waitingSeconds": 3.0},
        "fairShare": {"q1": {"share": 0.25, "fairShare": 0.5, "belowFairShareSeconds": 7.0}},
        "evictions": {"total": 2, "byQueue": {"q2": 2}},
        "overTime": {"window": 10.0, "share": {"q1": [0.25]}, "fairShare": {"q1": [0.5]}},
    },
)
OTHER = compare.RunFigures(
    "other",
    {
        "PodGroup ns/a": compare.JobStart("q1", 0.0, 20.0),
        "PodGroup ns/b": compare.JobStart("q1", 0.0, 15.0),
        "PodGroup ns/c": compare.JobStart("q2", 5.0, 5.0),
        "PodGroup ns/d": compare.JobStart("q2", 5.0, 50.0),
    },
    {
        "utilisation": {"cpu": {"mean": 0.625, "whileWaiting": 0.9}, "waitingSeconds": 1.0},
        "fairShare": {"q1": {"share": 0.5, "fairShare": 0.5, "belowFairShareSeconds": 0.0}},
        "evictions": {"total": 0, "byQueue": {}},
        "overTime": {"window": 10.0, "share": {"q1": [0.5]}, "fairShare": {"q1": [0.5]}},
    },
)


def test_waits_per_queue_by_nearest_rank() -> None:
    queues = compare.compare(BASE, OTHER).to_json()["queues"]
    # q1 waits: base 10, 30; other 20, 15 (sorted 15, 20). p50 is the first, p99 the second.
    assert queues["q1"]["waitP50"] == [10.0, 15.0]
    assert queues["q1"]["waitP99"] == [30.0, 20.0]
    # q2: base 0 (d never started); other 0 and 45 (d waited 50 − 5).
    assert queues["q2"]["waitP50"] == [0.0, 0.0]
    assert queues["q2"]["waitP99"] == [0.0, 45.0]


def test_fairness_utilisation_and_evictions_side_by_side() -> None:
    out = compare.compare(BASE, OTHER).to_json()
    assert out["runs"] == ["base", "other"]
    assert out["queues"]["q1"]["share"] == [0.25, 0.5]
    assert out["queues"]["q1"]["fairShare"] == [0.5, 0.5]
    assert out["queues"]["q1"]["belowFairShareSeconds"] == [7.0, 0.0]
    assert out["queues"]["q2"]["share"] == [None, None]  # no share figures for q2
    assert out["queues"]["q2"]["evictions"] == [2, 0]
    assert out["utilisation"] == {"cpu": {"mean": [0.5, 0.625], "whileWaiting": [0.8, 0.9]}}
    assert out["evictions"] == [2, 0]
    assert out["overTime"][1] == {
        "window": 10.0,
        "share": {"q1": [0.5]},
        "fairShare": {"q1": [0.5]},
    }


def test_jobs_started_earlier_or_later() -> None:
    jobs = compare.compare(BASE, OTHER).to_json()["jobs"]
    assert jobs["earlier"] == [
        {"job": "PodGroup ns/b", "queue": "q1", "started": [30.0, 15.0], "difference": -15.0}
    ]
    assert jobs["later"] == [
        {"job": "PodGroup ns/a", "queue": "q1", "started": [10.0, 20.0], "difference": 10.0}
    ]
    assert jobs["onlyOther"] == ["PodGroup ns/d"] and jobs["onlyBase"] == []
    assert jobs["same"] == 1
    # the other way round, earlier and later swap
    back = compare.compare(OTHER, BASE).to_json()["jobs"]
    assert [r["job"] for r in back["earlier"]] == ["PodGroup ns/a"]
    assert back["onlyBase"] == ["PodGroup ns/d"]


def test_largest_change_first() -> None:
    later = compare.RunFigures(
        "later", {k: compare.JobStart(j.queue, j.submitted, 100.0) for k, j in BASE.jobs.items()}
    )
    moved = compare.compare(BASE, later).to_json()["jobs"]["later"]
    # c moves 95 s, a 90 s, b 70 s; d started only in the later run
    assert [(r["job"], r["difference"]) for r in moved] == [
        ("PodGroup ns/c", 95.0),
        ("PodGroup ns/a", 90.0),
        ("PodGroup ns/b", 70.0),
    ]


def test_table_and_json_round_trip() -> None:
    table = compare.compare(BASE, OTHER).to_table()
    assert re.search(r"^q1 +10s → 15s +30s → 20s +25.0% → 50.0%", table, re.M)
    assert "STARTED EARLIER (1)" in table and "-15s" in table
    assert "STARTED LATER (1)" in table and "+10s" in table
    assert "evictions: 2 → 0" in table
    again = compare.RunFigures.from_json(BASE.to_json())
    assert again == BASE


def test_figures_that_cannot_be_read_are_refused_naming_what() -> None:
    with pytest.raises(ValueError, match=r"run figures: .*'jobs'"):
        compare.RunFigures.from_json({"name": "x"})


def _side(name: str, started: float | None) -> report.Side:
    timeline = Timeline(end=60.0)
    timeline.waits[("PodGroup", "ns", "<b>")] = Wait("PodGroup", "ns", "<b>", "q1", 0.0, started)
    result = {
        "time": 60.0,
        "summary": {"sessions": 3, "binds": 1, "evictions": 0},
        "podGroups": [],
        "pods": [],
    }
    return report.Side(name, timeline, result)


def _self_contained(page: str) -> None:
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for outside in ("<script", "<link", "src=", "url(", "@import"):
        assert outside not in page
    assert set(re.findall(r"https?://[^\"' ]+", page)) <= {"http://www.w3.org/2000/svg"}


def test_template_renders_one_run() -> None:
    side = _side("", 12.0)
    page = report.render(side.timeline, side.result, title="one <run>")
    _self_contained(page)
    assert "<title>one &lt;run&gt;</title>" in page
    assert page.count("<svg") == 3
    assert "ns/&lt;b&gt;" in page and "<b>" not in page.split("</h1>", 1)[1].split("<svg")[0]


def test_template_renders_two_runs_side_by_side() -> None:
    sides = [_side("base", 12.0), _side("other", None)]
    page = report.render_comparison(sides, compare.compare(BASE, OTHER).to_json(), title="t")
    _self_contained(page)
    assert page.count("<svg") == 8  # per run: fairness, queues, utilisation, waits
    assert page.count("<section>") == 2 and '<div class="sides">' in page
    assert "<td>q1</td><td>10s → 15s</td><td>30s → 20s</td><td>25.0% → 50.0%</td>" in page
    assert '<td class="earlier">−15s</td>' in page and '<td class="later">+10s</td>' in page
    assert "never ran" in page  # the other run's table
    assert "Queues: share vs fair share" in page
