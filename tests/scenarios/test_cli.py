"""``kbatch simulate``: outputs, the HTML report, the progress bar, and exit codes."""

import hashlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kbatch.cli import main as cli
from kbatch.sim.progress import ProgressBar

EXAMPLES = Path(__file__).parents[2] / "examples"
CLUSTER = str(EXAMPLES / "sim-cluster.yaml")  # the examples' cluster: each example is a workload
GANG = str(EXAMPLES / "gang-job.yaml")


def kbatch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = kbatch(capsys, "simulate", CLUSTER, GANG)
    assert (code, err) == (0, "")
    assert re.search(r"^default\s+qj-1-0\s+node-\d\s+Running\s+qj-1\s+0$", out, re.M)
    assert re.search(r"^default\s+qj-1\s+default\s+Running\s+6\s+6\s+0$", out, re.M)
    assert "6 binds, 0 evictions" in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = kbatch(
        capsys, "simulate", CLUSTER, GANG, "--output", "json", "--until", "5m", "--period", "2s"
    )
    result = json.loads(out)
    assert code == 0
    assert result["summary"]["binds"] == 6
    assert len(result["pods"]) == 6


def test_examples_all_run(capsys: pytest.CaptureFixture[str]) -> None:
    """Each on the examples' cluster, then all together (as README.md runs them)."""
    workloads = [str(p) for p in sorted(EXAMPLES.glob("*.yaml")) if str(p) != CLUSTER]
    assert len(workloads) >= 4
    for example in [*([w] for w in workloads), workloads]:
        code, out, err = kbatch(capsys, "simulate", CLUSTER, *example, "--output", "json")
        assert code == 0, example
        result = json.loads(out)
        assert result["summary"]["binds"] > 0 and result["warnings"] == [], example
        assert "error" not in err and "refused" not in err, example


def test_report_is_one_self_contained_html_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "out.html"
    code, _, _ = kbatch(
        capsys, "simulate", CLUSTER, str(EXAMPLES / "two-queues.yaml"), "--report", str(report)
    )
    assert code == 0
    page = report.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count("<svg") == 3
    for title in ("Queues: allocated vs deserved cpu", "Cluster utilisation", "Job wait"):
        assert title in page
    for legend in ("research allocated", "research deserved", "batch allocated", "cpu", "memory"):
        assert f">{legend}</text>" in page
    assert "simulated time" in page and "cpu (cores)" in page
    for outside in ("<script", "<link", "src=", "url(", "@import"):
        assert outside not in page
    assert set(re.findall(r"https?://[^\"' ]+", page)) == {"http://www.w3.org/2000/svg"}


def test_progress_bar_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = kbatch(
        capsys,
        "simulate",
        CLUSTER,
        str(EXAMPLES / "job-stream.yaml"),
        "--progress",
        "--until",
        "10m",
    )
    assert code == 0
    assert "sessions=" in err and "%" in err and err.endswith("\n")


def test_progress_bar_is_quiet_for_short_runs() -> None:
    stream, now = io.StringIO(), [0.0]
    bar = ProgressBar(stream, until=100.0, monotonic=lambda: now[0])
    bar(1.0, 1)
    now[0] = 0.5
    bar(2.0, 2)
    bar.close()
    assert stream.getvalue() == ""
    now[0] = 1.5
    bar(50.0, 50)
    bar.close()
    assert stream.getvalue().endswith("[###############---------------]  50% t=50s sessions=50\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["simulate", "missing.yaml"], r"missing\.yaml: cannot read"),
        (["simulate", GANG, "--until", "soon"], r"--until: 'soon' is not a duration"),
        (["simulate", GANG, "--period", "0s"], r"--period: must be more than 0"),
        (["simulate", GANG, "--config", "missing-conf.yaml"], r"missing-conf\.yaml: cannot read"),
        (["simulate", GANG, "--output", "xml"], r"invalid choice: 'xml'"),
        (["simulate"], r"the following arguments are required: FILE"),
        ([], r"the following arguments are required: COMMAND"),
    ],
)
def test_errors_are_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    try:
        code = cli.main(args)
    except SystemExit as exit_:  # argparse's own errors (usage) exit from parse_args
        code = exit_.code  # type: ignore[assignment]
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.startswith("kbatch: error: ") and err.count("\n") == 1
    assert re.search(message, err)


def test_an_unreadable_manifest_and_a_bad_config_exit_2_without_traceback(
    tmp_path: Path,
) -> None:
    unreadable = tmp_path / "bad.yaml"
    unreadable.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n---\n- not\n- an object\n"
    )
    conf = tmp_path / "conf.yaml"
    conf.write_text('actions: "allocate, teleport"\ntiers:\n- plugins:\n  - name: gang\n')
    for args, expected in (
        ([str(unreadable)], "bad.yaml, document 2: not a Kubernetes object (a list"),
        ([GANG, "--config", str(conf)], "conf.yaml line 1: unknown action 'teleport'"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "kbatch.cli", "simulate", *args],
            capture_output=True,
            text=True,
            check=False,
            cwd=tmp_path,  # not the checkout, whose ./kbatch would shadow the installed layout
        )
        assert done.returncode == 2
        assert done.stdout == ""
        assert done.stderr.startswith("kbatch: error: ") and expected in done.stderr
        assert "Traceback" not in done.stderr


def test_a_refused_object_is_not_an_error(tmp_path: Path) -> None:
    """What the API server would refuse is refused alone: named on stderr, exit 0."""
    manifest = tmp_path / "in.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: {cpu: '4'}}\n"
        "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec: {schedulerName: kbatch, containers: [{name: c, resources: {requests: {cpu: x}}}]}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "kbatch.cli", "simulate", str(manifest), "--output", "json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0
    assert done.stderr == (
        "kbatch: Pod default/p refused: spec.containers[0].resources.requests.cpu: "
        "'x' is not a Kubernetes quantity (e.g. '500m', '2', '4Gi')\n"
    )
    (warning,) = json.loads(done.stdout)["warnings"]
    assert warning["kind"] == "Pod" and warning["message"].startswith("spec.containers[0]")


# --------------------------------------------------------------------------- warnings
def test_refusals_go_to_stderr_and_warnings_into_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "in.yaml"
    manifest.write_text(
        "apiVersion: scheduling.incubator.k8s.io/v1alpha1\nkind: PodGroup\n"
        "metadata: {name: pg}\nspec: {minMember: 1, queue: nope}\n"
    )
    code, out, err = kbatch(capsys, "simulate", str(manifest))
    assert code == 0
    assert re.fullmatch(r"kbatch: PodGroup default/pg refused: spec\.queue: .*nope.*\n", err)
    assert re.search(r"^WARNINGS .*\nTIME\s+KIND\s+NAMESPACE\s+NAME\s+REASON\s+MESSAGE$", out, re.M)
    assert re.search(
        r"^0s\s+PodGroup\s+default\s+pg\s+AdmissionRejected\s+spec\.queue: ", out, re.M
    )


def test_an_empty_input_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("---\n# nothing\n")
    code, _, err = kbatch(capsys, "simulate", str(empty))
    assert code == 0
    assert err == "kbatch: the input holds no objects to simulate (the cluster stays empty)\n"


# --------------------------------------------------------------------------- bench
@pytest.mark.parametrize(
    ("size", "message"),
    [
        ("lots", r"expected NODESxPODS"),
        ("0x10", r"nodes and pods must be positive"),
        ("10x-10", r"nodes and pods must be positive"),
        ("10x15", r"pods must be a multiple of 10"),
    ],
)
def test_bench_sizes_are_checked(
    capsys: pytest.CaptureFixture[str], size: str, message: str
) -> None:
    code, out, err = kbatch(capsys, "bench", "--size", size)
    assert (code, out) == (2, "")
    assert re.fullmatch(rf"kbatch: error: --size '{re.escape(size)}': {message}.*\n", err)


def test_bench_measures_each_size_in_its_own_process(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = kbatch(capsys, "bench", "--size", "300x3000", "--size", "2x20")
    big, small = (json.loads(line) for line in out.splitlines())
    assert code == 0 and (big["binds"], small["binds"]) == (3000, 20)
    # In one process the small size would report the big one's peak.
    assert small["peak_rss_mib"] < big["peak_rss_mib"]


# --------------------------------------------------------------------------- run.sh
def fake_root(tmp_path: Path, stamp: str | None) -> tuple[Path, Path]:
    """A checkout holding scripts/run.sh, and a venv whose kbatch prints its cwd and args."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True)
    (root / "scripts" / "run.sh").write_text(RUN_SH.read_text())
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    bin_dir = root / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "kbatch").write_text('#!/bin/sh\necho "$PWD" "$@"\n')
    (bin_dir / "kbatch").chmod(0o755)
    if stamp is not None:
        (root / ".venv" / ".kbatch-install-stamp").write_text(stamp + "\n")
    log = tmp_path / "python3.log"
    fakes = tmp_path / "fakes"
    fakes.mkdir()
    (fakes / "python3").write_text(f'#!/bin/sh\necho "$@" >>{log}\nexit 1\n')
    (fakes / "python3").chmod(0o755)
    return root, fakes


RUN_SH = Path(__file__).parents[2] / "scripts" / "run.sh"


def run_sh(root: Path, fakes: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{fakes}:/usr/bin:/bin"}
    return subprocess.run(
        ["bash", str(root / "scripts" / "run.sh"), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
        env=env,
    )


def test_run_sh_keeps_the_callers_directory_and_a_current_venv(tmp_path: Path) -> None:
    digest = hashlib.sha256(b"[project]\nname = 'x'\n").hexdigest()
    root, fakes = fake_root(tmp_path, stamp=digest)
    done = run_sh(root, fakes, tmp_path, "simulate", "mine.yaml")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{tmp_path} simulate mine.yaml\n"
    assert not (tmp_path / "python3.log").exists(), "a current venv is not reinstalled"


def test_run_sh_reinstalls_when_the_project_changed(tmp_path: Path) -> None:
    root, fakes = fake_root(tmp_path, stamp="stale")
    done = run_sh(root, fakes, tmp_path, "simulate", "mine.yaml")
    assert done.returncode != 0  # the fake python3 fails
    assert (tmp_path / "python3.log").read_text().startswith("-m venv ")


def test_run_sh_without_arguments_simulates_the_gang_job_on_the_examples_cluster(
    tmp_path: Path,
) -> None:
    digest = hashlib.sha256(b"[project]\nname = 'x'\n").hexdigest()
    root, fakes = fake_root(tmp_path, stamp=digest)
    (root / "examples").symlink_to(EXAMPLES)
    real = root / ".venv" / "bin" / "kbatch"
    real.write_text(f'#!/bin/sh\nexec {sys.executable} -m kbatch.cli "$@"\n')
    done = run_sh(root, fakes, tmp_path)
    assert done.returncode == 0, done.stderr
    assert re.search(r"^default\s+qj-1\s+default\s+Running\s+6\s+6\s+0$", done.stdout, re.M)


def test_compare_config_runs_both_confs_and_compares(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without proportion the research queue's gang waits for the batch jobs to end."""
    conf = tmp_path / "no-proportion.yaml"
    conf.write_text(
        'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n'
    )
    report = tmp_path / "both.html"
    two_queues = str(EXAMPLES / "two-queues.yaml")
    args = ["simulate", CLUSTER, two_queues, "--compare-config", str(conf)]
    code, out, _ = kbatch(capsys, *args, "--output", "json", "--report", str(report))
    assert code == 0
    compared = json.loads(out)
    assert compared["runs"] == ["default", "no-proportion.yaml"]
    later = compared["jobs"]["later"]
    assert [(r["job"], r["difference"]) for r in later] == [("PodGroup default/train", 240.0)]
    assert compared["queues"]["research"]["waitP50"] == [1.0, 241.0]
    page = report.read_text(encoding="utf-8")
    assert page.count("<section>") == 2 and "Queues compared" in page
    assert set(re.findall(r"https?://[^\"' ]+", page)) == {"http://www.w3.org/2000/svg"}
    code, out, _ = kbatch(capsys, *args)
    assert code == 0 and re.search(
        r"^PodGroup default/train\s+research\s+1s\s+4m1s\s+\+4m$", out, re.M
    )


def test_the_team_tree_example_reclaims_for_the_idle_team_as_its_comment_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tree = str(EXAMPLES / "team-tree.yaml")
    code, out, _ = kbatch(capsys, "simulate", CLUSTER, tree, "--until", "2m", "--output", "json")
    assert code == 0
    result = json.loads(out)
    cpu = {q["name"]: q["allocated"].get("cpu") for q in result["queues"] if q.get("allocated")}
    assert {k: cpu.get(k) for k in ("a-train", "a-dev", "b-etl")} == {
        "a-train": "6",
        "a-dev": "2",
        "b-etl": "8",
    }
    evicted = {p["name"].rsplit("-", 1)[0] for p in result["pods"] if p.get("evictions")}
    assert evicted == {"model", "notebooks"}  # team-a gives back; b-etl starts whole


def test_the_spread_example_spreads_its_gang_over_the_zones_as_its_comment_says(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = kbatch(capsys, "simulate", str(EXAMPLES / "spread.yaml"), "--output", "json")
    assert code == 0
    nodes = {p["name"]: p["node"] for p in json.loads(out)["pods"]}
    zones = sorted(nodes[f"spread-{i}"].rsplit("-", 1)[0] for i in range(4))
    assert zones == ["zone-a", "zone-a", "zone-b", "zone-b"]
    packed = sorted(nodes[f"packed-{i}"].rsplit("-", 1)[0] for i in range(4))
    assert packed == ["zone-a", "zone-a", "zone-a", "zone-b"]
