"""``kbatch bench --armada-sim``'s reading of Armada's simulator output: the Parquet
reader on files written here (``parquet_writer``, not Armada's output), the decisions
read from a hand-made ``jobs.parquet``, kbatch's JSON read the same way, the table, and
the command line's errors."""

import argparse
import ast
import re
import sys
from pathlib import Path

import pytest
import yaml

from kbatch.bench import armada_decisions as decisions
from kbatch.bench import armada_sim, parquet
from kbatch.cli import bench as cli_bench
from tests.unit.bench import parquet_writer as pw

ROOT = Path(__file__).parents[3]

WORKLOAD = """\
name: fixture
queues:
  - name: "A"
    weight: 1
    jobTemplates:
      - number: 3
        requirements: {resourceRequirements: {requests: {cpu: 1, memory: 1Gi}}}
        runtimeDistribution: {minimum: 1m}
  - name: "B"
    weight: 1
    jobTemplates:
      - number: 1
        requirements: {resourceRequirements: {requests: {cpu: 4, memory: 1Gi}}}
        runtimeDistribution: {minimum: 1m}
"""
CLUSTER = """\
name: fixture
clusters:
  - name: c
    nodeTemplates:
      - number: 2
        totalResources: {resources: {cpu: "4", memory: 16Gi}}
"""
# (queue, job, cpu, state, submitted, started, finished): a-3 was preempted at 30 s
# and ran again from 40 s; the rows come in the order runs ended.
RUNS = [
    ("A", "a-3", 1.0, "PREEMPTED", 0, 0, 30),
    ("A", "a-2", 1.0, "SUCCEEDED", 0, 10, 50),
    ("A", "a-3", 1.0, "SUCCEEDED", 0, 40, 90),
    ("A", "a-1", 1.0, "SUCCEEDED", 0, 0, 100),
    ("B", "b-1", 4.0, "SUCCEEDED", 20, 60, 200),
]


def _jobs_parquet(path: Path, runs: list[tuple] = RUNS, **options: bool) -> Path:
    """A ``jobs.parquet`` with the columns and encodings Armada's writer gives them."""
    queue, job, cpu, state, submitted, started, finished = (
        list(c) for c in zip(*runs, strict=True)
    )
    pw.write(
        path,
        [
            pw.Column("queue", pw.BYTE_ARRAY, queue, dictionary=True),
            pw.Column("job_set", pw.BYTE_ARRAY, ["set"] * len(runs), dictionary=True),
            pw.Column("job_id", pw.BYTE_ARRAY, job),
            pw.Column("cpu", pw.DOUBLE, cpu),
            pw.Column("exit_code", pw.INT32, [0] * len(runs)),
            pw.Column("state", pw.BYTE_ARRAY, state, dictionary=True),
            pw.Column("submitted_time", pw.INT64, submitted),
            pw.Column("scheduled_time", pw.INT64, started),
            pw.Column("finished_time", pw.INT64, finished),
        ],
        **options,
    )
    return path


@pytest.fixture
def spec(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "w.yaml").write_text(WORKLOAD)
    (tmp_path / "c.yaml").write_text(CLUSTER)
    return tmp_path / "w.yaml", tmp_path / "c.yaml"


# --------------------------------------------------------------------------- Parquet
@pytest.mark.parametrize("compress", [True, False], ids=["snappy", "uncompressed"])
@pytest.mark.parametrize("v2", [False, True], ids=["page-v1", "page-v2"])
def test_parquet_columns_read_back(tmp_path: Path, compress: bool, v2: bool) -> None:
    text = [f"queue-{i % 3}" for i in range(40)]  # long enough for Snappy's copies
    columns = [
        pw.Column("name", pw.BYTE_ARRAY, text, dictionary=True),
        pw.Column("plain", pw.BYTE_ARRAY, text),
        pw.Column("n32", pw.INT32, [-5, 7, 0, 2**31 - 1] * 10),
        pw.Column("n64", pw.INT64, [2**40, -1, 3, 0] * 10),
        pw.Column("x", pw.DOUBLE, [0.5, -2.25, 1e9, 3.0] * 10),
        pw.Column("maybe", pw.INT64, [None, 1, None, 2] * 10, optional=True),
        pw.Column("tag", pw.BYTE_ARRAY, ["x", None] * 20, dictionary=True, optional=True),
    ]
    path = tmp_path / "t.parquet"
    pw.write(path, columns, compress=compress, v2=v2)
    assert parquet.read_columns(path) == {c.name: list(c.values) for c in columns}


def test_snappy_copies_that_overlap_what_they_write() -> None:
    # a literal 'a', then a copy of 9 bytes from 1 back (a 1-byte-offset copy)
    assert parquet.snappy_decompress(bytes([10, 0x00]) + b"a" + bytes([0x15, 0x01])) == b"a" * 10
    with pytest.raises(parquet.ParquetError, match="before the start"):
        parquet.snappy_decompress(bytes([10, 0x00]) + b"a" + bytes([0x15, 0x02]))
    with pytest.raises(parquet.ParquetError, match="not 11"):
        parquet.snappy_decompress(bytes([11, 0x00]) + b"a" + bytes([0x15, 0x01]))


def test_what_is_not_parquet_is_named(tmp_path: Path) -> None:
    path = tmp_path / "jobs.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(parquet.ParquetError, match=rf"{re.escape(str(path))}: not a Parquet"):
        parquet.read_columns(path)
    good = _jobs_parquet(tmp_path / "good.parquet").read_bytes()
    path.write_bytes(good[:40] + good[-30:])  # pages gone, footer cut
    with pytest.raises(parquet.ParquetError, match=re.escape(str(path))):
        parquet.read_columns(path)
    with pytest.raises(parquet.ParquetError, match="cannot read"):
        parquet.read_columns(tmp_path / "missing.parquet")


# --------------------------------------------------------------------------- decisions
def test_armada_output_as_decisions(tmp_path: Path, spec: tuple[Path, Path]) -> None:
    workload, cluster = spec
    runs = decisions.armada_runs(_jobs_parquet(tmp_path / "jobs.parquet"))
    assert [(r.job, r.queue, r.started) for r in runs][:2] == [
        ("a-3", "a", 0.0),
        ("a-2", "a", 10.0),
    ]
    big = decisions.big_job(workload)
    assert big == decisions.BigJob("b", "B-0", 4.0, 2**30)
    assert decisions.cluster_cpu(cluster) == 8.0
    found = decisions.armada_decisions(runs, big, decisions.cluster_cpu(cluster))
    # waits: a 0, 10, 0 (a-3's first run counts); b 40
    assert found["queues"] == {
        "a": {"started": 3, "p50": 0.0, "p99": 10.0},
        "b": {"started": 1, "p50": 40.0, "p99": 40.0},
    }
    assert found["first_big_job_wait"] == 40.0
    # someone waits in [0,10) 2 cores busy, [20,30) 3, [30,40) 2 (a-3 waits again),
    # [40,50) 3, [50,60) 2: 120 core-seconds over 50 s, of 8 cores
    assert found["cpu_while_waiting"] == pytest.approx(120 / 50 / 8)
    assert found["end"] == 200.0


def test_a_jobs_parquet_without_a_column_is_named(tmp_path: Path) -> None:
    path = tmp_path / "jobs.parquet"
    pw.write(path, [pw.Column("queue", pw.BYTE_ARRAY, ["A"])])
    with pytest.raises(parquet.ParquetError, match="no column job_id, cpu, state"):
        decisions.armada_runs(path)


def test_kbatch_output_as_decisions(spec: tuple[Path, Path]) -> None:
    result = {
        "time": 300.0,
        "podGroups": [
            {"name": "b-0-0", "queue": "b"},
            {"name": "b-0-1", "queue": "b"},
            {"name": "a-0-0", "queue": "a"},
        ],
        "pods": [
            {"name": "b-0-0-0", "podGroup": "b-0-0"},
            {"name": "b-0-1-0", "podGroup": "b-0-1"},
            {"name": "a-0-0-0", "podGroup": "a-0-0"},
        ],
        "events": [
            {"time": 0.0, "kind": "Job", "name": "a-0-0", "reason": "Held"},
            {"time": 10.0, "kind": "Job", "name": "b-0-0", "reason": "Held"},
            {"time": 15.0, "kind": "Job", "name": "b-0-1", "reason": "Held"},
            {"time": 20.0, "kind": "Pod", "name": "a-0-0-0", "reason": "Scheduled"},
            {"time": 40.0, "kind": "Pod", "name": "b-0-1-0", "reason": "Scheduled"},
            {"time": 90.0, "kind": "Pod", "name": "b-0-0-0", "reason": "Scheduled"},
        ],
        "metrics": {
            "latency": {
                "a": {"jobs": 1, "started": 1, "p50": 20.0, "p99": 20.0, "max": 20.0},
                "idle": {"jobs": 1, "started": 0, "p50": None, "p99": None, "max": None},
            },
            "utilisation": {"cpu": {"mean": 0.5, "whileWaiting": 0.25}, "waitingSeconds": 80},
        },
    }
    big = decisions.big_job(spec[0])
    found = decisions.kbatch_decisions(result, big)
    # b-0-1 started first (at 40 s, submitted at 15 s)
    assert found == {
        "first_big_job_wait": 25.0,
        "queues": {"a": {"started": 1, "p50": 20.0, "p99": 20.0}},
        "cpu_while_waiting": 0.25,
        "end": 300.0,
    }
    with pytest.raises(ValueError, match="no 'metrics'"):
        decisions.kbatch_decisions({"time": 1.0}, big)


def test_the_table_gives_each_figure_as_armada_slash_kbatch() -> None:
    line = {
        "workload": "w.yaml",
        "cluster": "c.yaml",
        "armada": {
            "wall_seconds": 2.5,
            "cpu_seconds": 0.5,
            "first_big_job_wait": 40.0,
            "queues": {"a": {"started": 3, "p50": 0.0, "p99": 10.0}},
            "cpu_while_waiting": 0.3,
        },
        "kbatch": {"wall_seconds": 1.25, "cpu_seconds": 1.0, "error": "exit status 1: boom"},
    }
    table = armada_sim.table([line]).splitlines()
    assert table[0].startswith("| workload | cluster | wall s (Armada / kbatch)")
    assert table[2] == (
        "| w.yaml | c.yaml | 2.50 / 1.25 | 0.50 / 1.00 | 40 / – | a: 0, 10 / – | 30% / – |"
    )


def test_the_workload_armada_decodes_has_its_durations_as_seconds_and_nanos(
    tmp_path: Path,
) -> None:
    workload = tmp_path / "w.yaml"
    workload.write_text(
        "queues:\n- name: A\n  jobTemplates:\n  - number: 1\n"
        "    earliestSubmitTime: 30m\n    repeat: {numTimes: 2, period: 1.5s}\n"
        "    runtimeDistribution: {minimum: 6m, TailMean: {seconds: 36}}\n"
    )
    out = yaml.safe_load(armada_sim.armada_workload(workload, tmp_path / "out.yaml").read_text())
    template = out["queues"][0]["jobTemplates"][0]
    assert template["earliestSubmitTime"] == {"seconds": 1800, "nanos": 0}
    assert template["repeat"] == {"numTimes": 2, "period": {"seconds": 1, "nanos": 500_000_000}}
    assert template["runtimeDistribution"] == {
        "minimum": {"seconds": 360, "nanos": 0},
        "TailMean": {"seconds": 36},  # already a map: as given
    }
    assert template["number"] == 1


# --------------------------------------------------------------------------- the command
def test_the_pinned_version_is_the_provisioning_script_s() -> None:
    script = (ROOT / "scripts" / "provision-armada-sim.sh").read_text()
    assert f"readonly ARMADA_VERSION={armada_sim.ARMADA_VERSION} " in script


def _args(**given: object) -> argparse.Namespace:
    defaults: dict[str, object] = {
        "live": False,
        "eta": False,
        "armada_sim": True,
        "trace": False,
        "topology": False,
        "size": None,
        "backlog": False,
        "queues": "flat:10",
        "versus_flat": False,
        "armada_testdata": None,
        "armada_pair": None,
        "armada_bin": None,
        "armada_rounds": 1,
        "armada_period": 10,
        "timeout": 60.0,
        "kbatch_conf": None,
        "table": None,
        "brief": False,
    }
    return argparse.Namespace(**{**defaults, **given})


def test_a_missing_simulator_says_how_to_build_it(
    tmp_path: Path, spec: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = _args(armada_testdata=tmp_path, armada_bin=tmp_path / "no-simulator")
    assert cli_bench.bench(args) == 2
    assert "run scripts/provision-armada-sim.sh" in capsys.readouterr().err


def test_a_bad_pair_is_refused(tmp_path: Path, spec: tuple[Path, Path]) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected WORKLOAD:CLUSTER"):
        cli_bench.bench(_args(armada_testdata=tmp_path, armada_pair=["w.yaml"]))
    with pytest.raises(argparse.ArgumentTypeError, match="expected WORKLOAD:CLUSTER"):
        cli_bench.bench(_args(armada_testdata=tmp_path, armada_pair=["w.yaml:nope.yaml"]))
    with pytest.raises(argparse.ArgumentTypeError, match="--armada-testdata"):
        cli_bench.bench(_args(armada_testdata=tmp_path / "nowhere"))


# --------------------------------------------------------------------------- warming up
def test_warm_up_runs_kbatch_free_to_write_bytecode(
    tmp_path: Path, spec: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The untimed run before the pairs is kbatch's command on the first pair, with
    ``PYTHONDONTWRITEBYTECODE`` out of its environment (else every timed run compiles
    kbatch's modules from source); a failure comes back as its message."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    seen = tmp_path / "seen"
    script = (
        "import os, sys; open(sys.argv[1], 'w').write("
        "repr((os.environ.get('PYTHONDONTWRITEBYTECODE'), sys.argv[2:])))"
    )
    options = armada_sim.Options(
        testdata=tmp_path,
        armada_bin=tmp_path / "none",
        python=(sys.executable, "-c", script, str(seen)),
    )
    assert armada_sim.warm_up(options, *spec, tmp_path) is None
    bytecode, argv = ast.literal_eval(seen.read_text())
    assert bytecode is None
    assert argv[:3] == ["-m", "kbatch.cli.main", "simulate"]
    assert str(spec[0]) in argv and str(spec[1]) in argv
    failing = armada_sim.Options(
        testdata=tmp_path,
        armada_bin=tmp_path / "none",
        python=(sys.executable, "-c", "import sys; sys.exit('no kbatch here')"),
    )
    assert armada_sim.warm_up(failing, *spec, tmp_path) == "no kbatch here"
