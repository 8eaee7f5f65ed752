"""``kbatch simulate``: outputs, the HTML report, the progress bar, and exit codes."""

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kbatch import cli
from kbatch.sim.progress import ProgressBar

EXAMPLES = Path(__file__).parents[2] / "examples"
GANG = str(EXAMPLES / "gang-job.yaml")


def kbatch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = kbatch(capsys, "simulate", GANG)
    assert (code, err) == (0, "")
    assert re.search(r"^default\s+qj-1-0\s+node-\d\s+Running\s+qj-1\s+0$", out, re.M)
    assert re.search(r"^default\s+qj-1\s+default\s+Running\s+6\s+6\s+0$", out, re.M)
    assert "6 binds, 0 evictions" in out


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = kbatch(
        capsys, "simulate", GANG, "--output", "json", "--until", "5m", "--period", "2s"
    )
    result = json.loads(out)
    assert code == 0
    assert result["summary"]["binds"] == 6
    assert len(result["pods"]) == 6


def test_examples_all_run(capsys: pytest.CaptureFixture[str]) -> None:
    for example in sorted(EXAMPLES.glob("*.yaml")):
        code, out, _ = kbatch(capsys, "simulate", str(example), "--output", "json")
        assert code == 0, example
        assert json.loads(out)["summary"]["binds"] > 0, example


def test_report_is_one_self_contained_html_page(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "out.html"
    code, _, _ = kbatch(
        capsys, "simulate", str(EXAMPLES / "two-queues.yaml"), "--report", str(report)
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
        capsys, "simulate", str(EXAMPLES / "job-stream.yaml"), "--progress", "--until", "10m"
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


def test_a_bad_manifest_and_a_bad_config_exit_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: x}}}]}\n"
    )
    conf = tmp_path / "conf.yaml"
    conf.write_text('actions: "allocate, teleport"\ntiers:\n- plugins:\n  - name: gang\n')
    for args, expected in (
        (
            [str(bad)],
            "bad.yaml, document 1: Pod default/p: spec.containers[0].resources.requests.cpu",
        ),
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
