"""The live benchmark's figures: quantiles, gang latencies, the most pods left partly
bound, a run's JSON line, and the min/median/max markdown table."""

import json
from pathlib import Path

import pytest

from kbatch.bench import live_figures as f
from kbatch.bench import live_workload as w


def test_percentile_interpolates() -> None:
    assert f.percentile([], 0.5) is None
    assert f.percentile([3.0], 0.99) == 3.0
    assert f.percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert f.percentile([float(i) for i in range(101)], 0.99) == pytest.approx(99.0)


def test_gang_latency_runs_from_the_last_creation_to_the_last_bind() -> None:
    created = {"a": 0.0, "b": 1.0, "c": 0.0, "d": 0.0}
    bound = {"a": 2.0, "b": 5.0, "c": 3.0}  # gang y is missing d: not counted
    gangs = {"a": "x", "b": "x", "c": "y", "d": "y"}
    assert f.gang_latencies(created, bound, gangs) == [4.0]


def test_partly_bound_counts_pods_of_gangs_not_whole() -> None:
    sizes = {"g1": 3, "g2": 2}
    binds = [(0.0, "g1"), (0.1, "g1"), (0.2, "g2"), (0.3, "g1"), (5.0, "g2")]
    # at 0.2: g1 has 2 of 3 and g2 1 of 2 -> 3 pods partly bound
    assert f.max_partly_bound(binds, sizes) == 3
    # counted only once partly bound for a second: g2 alone, 1 pod
    assert f.max_partly_bound(binds, sizes, grace=1.0) == 1
    whole = [(0.0, "g1"), (0.1, "g1"), (0.2, "g1"), (0.3, "g2"), (0.4, "g2")]
    assert f.max_partly_bound(whole, sizes, grace=1.0) == 0


def test_a_gang_left_partly_bound_counts_all_its_bound_pods() -> None:
    binds = [(0.0, "g"), (2.0, "g"), (3.0, "g")]
    assert f.max_partly_bound(binds, {"g": 4}, grace=1.0) == 3


def test_a_run_line_has_every_key_and_the_figures() -> None:
    spec = w.scenario("b", 2, 20)
    created = {w.pod_name(i): 0.1 * i for i in range(20)}
    bound = {w.pod_name(i): 10.0 + 0.5 * i for i in range(20)}
    line = f.run_line(spec, "kbatch", 2, created, bound, peak_rss_bytes=5, error=None)
    assert list(line)[: len(f.LINE_KEYS)] == list(f.LINE_KEYS)
    assert line["seconds_to_all_bound"] == 19.5
    assert line["binds_per_second"] == 2.0
    assert line["p50_seconds"] == pytest.approx(13.8)  # 10 + 0.4 i at i = 9.5
    assert (line["round"], line["pods"], line["nodes"], line["bound"]) == (2, 20, 2, 20)
    assert line["gang_p50_seconds"] is not None
    json.dumps(line)


def test_a_run_not_wholly_bound_has_no_time_to_all_bound() -> None:
    spec = w.scenario("a", 2, 3)
    line = f.run_line(spec, "volcano", 1, {"pod-0": 0.0}, {"pod-0": 1.0}, error="timeout")
    assert line["seconds_to_all_bound"] is None and line["binds_per_second"] is None
    assert line["error"] == "timeout" and line["bound"] == 1


def test_summary_takes_min_median_max_of_the_runs_that_finished() -> None:
    lines = [
        {"scheduler": "kbatch", "scenario": "a", "seconds_to_all_bound": s, "error": None}
        for s in (3.0, 1.0, 2.0)
    ]
    lines.append({"scheduler": "volcano", "scenario": "a", "error": "not built"})
    rows = f.summary(lines)
    assert rows[0]["to all bound (s)"] == (1.0, 2.0, 3.0)
    assert (rows[0]["runs"], rows[0]["failed"]) == (3, 0)
    assert (rows[1]["failed"], rows[1]["errors"]) == (1, ["not built"])
    text = f.table(rows)
    assert "1 / 2 / 3" in text and "volcano (a): not built" in text


def test_a_backlog_run_counts_the_time_to_all_bound_from_the_schedulers_start() -> None:
    spec = w.scenario("a", 1, 2)
    created, bound = {"pod-0": 0.0, "pod-1": 1.0}, {"pod-0": 5.0, "pod-1": 6.0}
    assert f.run_line(spec, "kbatch", 1, created, bound)["seconds_to_all_bound"] == 6.0
    assert f.run_line(spec, "kbatch", 1, created, bound, since=4.0)["seconds_to_all_bound"] == 2.0


def test_the_table_is_markdown_with_one_number_where_the_runs_agree() -> None:
    lines = [
        {"scheduler": "kbatch", "scenario": "b", "nodes": 200, "pods": 2000, "conf": "default",
         "client": "none", "seconds_to_all_bound": s, "peak_rss_bytes": 100 * 2**20,
         "api_requests": {"POST": 2000, "PATCH": n}, "error": None}
        for s, n in ((4.0, 10), (4.0, 30))
    ]  # fmt: skip
    text = f.table(f.summary(lines))
    head, rule, row = text.splitlines()
    assert head.startswith("| scheduler | scenario | nodes | pods |") and head.endswith(" |")
    assert rule == "|" + "---|" * head.count(" | ") + "---|"
    cells = dict(zip(head.strip("| ").split(" | "), row.strip("| ").split(" | "), strict=True))
    assert cells["to all bound (s)"] == "4"  # the same in both runs: one number
    assert cells["peak RSS (MiB)"] == "100"
    assert cells["API requests"] == "2010 / 2020 / 2030"
    assert cells["first bind (s)"] == "-"


def test_the_first_bind_counts_from_the_start_of_a_restart() -> None:
    spec = w.scenario("d", 1, 20)
    created = {w.pod_name(i): 0.0 for i in range(20)}
    bound = {w.pod_name(i): 10.0 + i for i in range(20)}
    line = f.run_line(spec, "volcano", 1, created, bound, since=8.0)
    assert line["seconds_to_first_bind"] == 2.0
    assert line["seconds_to_all_bound"] == 21.0
    assert f.run_line(spec, "volcano", 1, created, bound)["seconds_to_first_bind"] == 10.0


def test_gangs_of_different_sizes_are_measured_by_their_own_members() -> None:
    spec = w.Scenario("c", 1, 80, 10, 30)  # gangs of 20, 20, 30, 10
    assert spec.sizes == (20, 20, 30, 10)
    created = {w.pod_name(i): 0.0 for i in range(80)}
    # each gang bound at once, a second after the one before; the last gang but one pod
    last = spec.members(spec.gangs - 1)
    bound = {w.pod_name(i): 1.0 + spec.gang_of(i) for i in range(80) if i != last[-1]}
    line = f.run_line(spec, "kbatch", 1, created, bound)
    whole = [1.0 + g for g in range(spec.gangs - 1)]
    assert line["gang_p50_seconds"] == round(f.percentile(whole, 0.5) or 0, 3)
    assert f.partly_bound(spec, bound, grace=0.5) == len(last) - 1
    assert f.partly_bound(w.scenario("a", 1, 5), {"pod-0": 1.0}, 0.5) == 0


def test_read_lines_keeps_the_runs_and_names_a_bad_line(tmp_path: Path) -> None:
    run = {"scheduler": "kbatch", "scenario": "d", "seconds_to_all_bound": 6.0, "error": None}
    good = tmp_path / "d.jsonl"
    good.write_text(json.dumps(run) + "\n\n" + json.dumps({**run, "round": 2}) + "\n")
    assert [line.get("round") for line in f.read_lines([good, good])] == [None, 2, None, 2]
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(run) + "\n{not json\n")
    with pytest.raises(ValueError, match=r"broken.jsonl:2: not JSON"):
        f.read_lines([broken])
    other = tmp_path / "other.jsonl"
    other.write_text('{"nodes": 5}\n')
    with pytest.raises(ValueError, match=r"other.jsonl:1: not a live run's line \(no scheduler"):
        f.read_lines([other])


def test_the_brief_table_keeps_only_its_columns() -> None:
    lines = [
        {"scheduler": "volcano", "scenario": "c", "client": "qps=1000 burst=1000",
         "binds_per_second": b, "conf": "default", "error": None}
        for b in (100.0, 120.0, 110.0)
    ]  # fmt: skip
    head, _, row = f.table(f.summary(lines), brief=True).splitlines()
    heads = head.strip("| ").split(" | ")
    assert tuple(heads) == f.BRIEF_HEADS and "conf" not in heads and "API requests" not in heads
    assert set(f.BRIEF_HEADS) <= set(f.FULL_HEADS), "each brief column is one of the table's"
    cells = dict(zip(heads, row.strip("| ").split(" | "), strict=True))
    assert cells["binds/s"] == "100 / 110 / 120" and cells["client"] == "qps=1000 burst=1000"


def test_a_gangs_bind_spread_runs_from_its_first_bind_to_its_last() -> None:
    gangs = {"a": "x", "b": "x", "c": "x", "d": "y", "e": "z"}
    bound = {"a": 1.2, "b": 1.0, "c": 3.5, "d": 2.0}  # z: nothing bound, no spread
    assert f.bind_spreads(bound, gangs) == pytest.approx({"x": 2.5, "y": 0.0})
    spec = w.scenario("b", 1, 20)
    bound_at = {w.pod_name(i): float(i // 10) + (1.5 if i == 9 else 0.0) for i in range(20)}
    line = f.run_line(spec, "kbatch", 1, dict.fromkeys(bound_at, 0.0), bound_at)
    assert line["gang_bind_spread_max_seconds"] == 1.5
    assert line["gang_bind_spread_p99_seconds"] == pytest.approx(1.485)
    single = f.run_line(w.scenario("a", 1, 2), "kbatch", 1, {"pod-0": 0.0}, {"pod-0": 1.0})
    assert "gang_bind_spread_max_seconds" not in single
