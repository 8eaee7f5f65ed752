"""``kbatch bench --trace``: the day's workload is seeded and shaped as documented, and a
tiny one simulates (no timing asserted: numbers go in benchmarks)."""

import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kbatch.cli import main as cli
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.sim import manifests, output, runner, trace
from kbatch.visibility import runtimes


def test_the_same_seed_makes_the_same_day_another_seed_another() -> None:
    spec = trace.TraceSpec(nodes=20, seed=3)
    assert trace.trace_jobs(spec) == trace.trace_jobs(spec)
    assert trace.trace_jobs(spec) != trace.trace_jobs(trace.TraceSpec(nodes=20, seed=4))


def test_a_day_is_shaped_as_documented() -> None:
    jobs = trace.trace_jobs(trace.TraceSpec(nodes=100))
    assert len(jobs) == 100 * trace.JOBS_PER_NODE
    assert [j.submit_at for j in jobs] == sorted(j.submit_at for j in jobs)
    assert all(0 <= j.submit_at < trace.DAY for j in jobs)
    sizes = Counter(j.pods for j in jobs)
    assert set(sizes) == {1, 2, 4, 8, 16, 32, 64}
    assert sizes[1] > sizes[2] > sizes[4] > sizes[8] > sizes[64] > 0
    assert {j.cpu for j in jobs} == {1, 2, 4, 8}
    queues = Counter(j.queue for j in jobs)
    assert sorted(queues) == [f"q{i}" for i in range(8)] and queues["q0"] > queues["q7"]
    runtimes = np.array([j.runtime for j in jobs])
    assert runtimes.min() >= trace.MIN_RUNTIME
    mean_tail = runtimes.mean() - trace.MIN_RUNTIME
    assert 0.9 * trace.TAIL_MEAN < mean_tail < 1.1 * trace.TAIL_MEAN


def test_submissions_follow_the_daily_curve() -> None:
    jobs = trace.trace_jobs(trace.TraceSpec(nodes=100))
    hours = Counter(int(j.submit_at // 3600) for j in jobs)
    night, afternoon = hours[2] + hours[3], hours[14] + hours[15]
    # 1 − 0.6·cos: 0.4× the mean rate at 03:00, 1.6× at 15:00
    assert 3.0 < afternoon / night < 5.0, (night, afternoon)


def test_the_first_hours_are_the_days_first_jobs() -> None:
    day = trace.trace_jobs(trace.TraceSpec(nodes=20))
    morning = trace.trace_jobs(trace.TraceSpec(nodes=20, hours=6))
    assert morning == [j for j in day if j.submit_at < 6 * 3600]


def test_objects_are_a_held_job_and_a_gang_per_job() -> None:
    spec = trace.TraceSpec(nodes=3, hours=4)
    objects = trace.trace_objects(spec)
    kinds = Counter(obj["kind"] for obj in objects)
    assert kinds["Node"] == 3 and kinds["Queue"] == 8
    assert kinds["Job"] == kinds["PodGroup"] == len(trace.trace_jobs(spec))
    groups = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PodGroup"}
    for job in (o for o in objects if o["kind"] == "Job"):
        group = groups[job["metadata"]["name"]]
        assert job["spec"]["parallelism"] == group["spec"]["minMember"]


def test_a_tiny_trace_runs() -> None:
    result = trace.run(trace.TraceSpec(nodes=2, hours=2))
    assert result["simulated_seconds"] == 7200.0
    assert 0 < result["binds"] <= result["pods"]
    assert result["sessions"] > 0 and result["wall_seconds"] > 0


def test_bench_trace_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["bench", "--trace", "--trace-nodes", "2", "--trace-hours", "1"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    result = json.loads(line)
    assert result["trace"] == {"nodes": 2, "hours": 1.0, "seed": 0}
    assert {"simulated_per_wall_second", "sessions", "binds", "peak_rss_mib"} <= set(result)
    tiny = ["bench", "--trace", "--trace-nodes", "2", "--trace-hours", "1"]
    assert cli.main([*tiny, "--trace-declared-runtimes", "0.5"]) == 0
    named = json.loads(capsys.readouterr().out)["trace"]
    assert named == {"nodes": 2, "hours": 1.0, "seed": 0, "declared_runtimes": 0.5}


def test_bench_trace_runs_the_conf_it_is_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default conf unless ``--kbatch-conf`` names another, and the line says which:
    a conf that only admits binds nothing."""
    tiny = ["bench", "--trace", "--trace-nodes", "2", "--trace-hours", "1"]
    assert cli.main(tiny) == 0
    default = json.loads(capsys.readouterr().out)
    assert default["conf"] == "default" and default["binds"] > 0
    conf = tmp_path / "admit-only.yaml"
    conf.write_text('actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n')
    assert cli.main([*tiny, "--kbatch-conf", str(conf)]) == 0
    admitted = json.loads(capsys.readouterr().out)
    assert admitted["conf"] == str(conf) and admitted["binds"] == 0
    assert admitted["sessions"] > 0


def test_bench_kbatch_conf_goes_with_the_trace_not_the_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conf = tmp_path / "conf.yaml"
    conf.write_text('actions: "allocate"\ntiers: []\n')
    assert cli.main(["bench", "--size", "10x100", "--kbatch-conf", str(conf)]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.startswith("kbatch: error: --kbatch-conf goes with --trace")


def _deadlines(spec: trace.TraceSpec) -> dict[str, int | None]:
    """Each held Job's pods' activeDeadlineSeconds, as the manifests carry it."""
    return {
        obj["metadata"]["name"]: obj["spec"]["template"]["spec"].get(runtimes.DEADLINE)
        for obj in trace.trace_objects(spec)
        if obj["kind"] == "Job"
    }


def test_by_default_no_job_declares_its_runtime() -> None:
    assert set(_deadlines(trace.TraceSpec(nodes=5, hours=6))) != set()
    assert set(_deadlines(trace.TraceSpec(nodes=5, hours=6)).values()) == {None}


def test_the_declared_share_of_jobs_carries_its_walltime_as_a_deadline() -> None:
    """That share of the jobs (seeded) declare activeDeadlineSeconds: the runtime rounded
    up to the next minute; the jobs are the same day's whatever the share."""
    spec = trace.TraceSpec(nodes=20, declared_runtimes=0.3, seed=1)
    deadlines = _deadlines(spec)
    assert deadlines == _deadlines(spec)  # seeded
    declared = [name for name, deadline in deadlines.items() if deadline is not None]
    assert 0.27 < len(declared) / len(deadlines) < 0.33, len(declared)
    runtime = {job.name: job.runtime for job in trace.trace_jobs(spec)}
    for name in declared:
        deadline = deadlines[name]
        assert deadline is not None and deadline % 60 == 0
        assert runtime[name] <= deadline < runtime[name] + 60
    plain = trace.trace_jobs(trace.TraceSpec(nodes=20, seed=1))
    assert [(j.name, j.runtime, j.submit_at) for j in plain] == [
        (j.name, j.runtime, j.submit_at) for j in trace.trace_jobs(spec)
    ]
    more = _deadlines(trace.TraceSpec(nodes=20, declared_runtimes=0.6, seed=1))
    assert {n for n, d in more.items() if d is not None} > set(declared)
    every = _deadlines(trace.TraceSpec(nodes=20, declared_runtimes=1.0, seed=1))
    assert None not in every.values()


def test_the_forecast_reads_the_declared_deadline() -> None:
    (job,) = (
        obj
        for obj in trace.trace_objects(trace.TraceSpec(nodes=1, hours=1, declared_runtimes=1))
        if obj["kind"] == "Job" and obj["metadata"]["name"] == "job-000000"
    )
    (first, *_) = trace.trace_jobs(trace.TraceSpec(nodes=1, hours=1))
    assert runtimes.deadline_of(job["spec"]["template"]) == trace.walltime(first.runtime)


def test_a_declared_pod_still_ends_at_its_runtime() -> None:
    """The simulator does not end a pod at its deadline: the day declaring every runtime
    runs as the day declaring none, to the second."""

    def day(declared: float) -> dict[str, Any]:
        spec = trace.TraceSpec(nodes=2, hours=2, declared_runtimes=declared)
        loaded = manifests.load_documents(trace.trace_objects(spec), trace.SOURCE)
        options = runner.Options(until=spec.seconds)
        return output.to_json(runner.Simulation(loaded, default_conf(), options).run())

    plain, declared = day(0.0), day(1.0)
    assert declared == plain
    completed = [e for e in plain["events"] if e["reason"] == "Completed"]
    assert completed


@pytest.mark.parametrize(
    "flag",
    [
        ["--trace-hours", "25"],
        ["--trace-nodes", "0"],
        ["--trace-declared-runtimes", "1.5"],
        ["--trace-declared-runtimes", "-0.1"],
        ["--trace-declared-runtimes", "nan"],
    ],
)
def test_bench_trace_refuses_a_bad_size(
    flag: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["bench", "--trace", *flag]) == cli.EXIT_USAGE
    assert capsys.readouterr().err.startswith(f"kbatch: error: {flag[0]}:")
