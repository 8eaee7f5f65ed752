"""The simulator commands of README.md and of every page under docs/ run as written, and
their claims about the simulator hold.

Every ``kbatch simulate ...`` command of those Markdown files' fenced code blocks, and
every ``./scripts/run.sh ...`` command there or in an inline code span (inline, ``kbatch
simulate FILE...`` is the usage, not a command), is run from the repository's
root through the ``kbatch`` console script of this venv, its globs expanded as the
shell would. ``./scripts/run.sh ARGS`` runs ``kbatch ARGS`` once the venv is set up
(see run.sh), so it is run as that; with no ARGS, with run.sh's own default. Only
``--report``'s output path is rewritten, into a temporary folder.
"""

import glob
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from kbatch.sim import simulate

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# README first, then the site's pages (mkdocs.yml's docs_dir), each by its path from the root.
DOCS = [README, *sorted((ROOT / "docs").rglob("*.md"))]
RUN_SH = ROOT / "scripts" / "run.sh"
KBATCH = Path(sys.executable).with_name("kbatch")  # this venv's console script


def code_in(markdown: str) -> list[tuple[str, bool]]:
    """Every line of the fenced code blocks, and every inline code span outside them,
    each with whether it is fenced."""
    found: list[tuple[str, bool]] = []
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            found.append((line.strip(), True))
        else:
            found.extend((span, False) for span in re.findall(r"`([^`]+)`", line))
    return found


def commands(markdown: str) -> list[str]:
    """The simulator commands among them (a trailing ``# comment`` dropped)."""
    return [
        re.sub(r"\s+#.*$", "", code)
        for code, fenced in code_in(markdown)
        if re.match(r"\./scripts/run\.sh(\s|$)", code)
        or (fenced and re.match(r"kbatch simulate\s", code))
    ]


def run_sh_default() -> list[str]:
    """What ``./scripts/run.sh`` runs with no arguments (its ``set -- ...`` line)."""
    (line,) = [ln for ln in RUN_SH.read_text().splitlines() if ln.strip().startswith("set -- ")]
    words = shlex.split(line.replace('"$root', f'"{ROOT}'))
    return words[2:]


def as_kbatch(command: str, out: Path) -> list[str]:
    """The command as arguments of the ``kbatch`` console script: globs expanded from
    the root as bash would (sorted; kept as written when nothing matches), the
    ``--report`` file put in ``out``."""
    words = shlex.split(command)
    args = words[1:]
    if words[0] == "./scripts/run.sh" and not args:
        args = run_sh_default()
    expanded: list[str] = []
    for word in args:
        magic = any(c in word for c in "*?[")
        matches = sorted(glob.glob(word, root_dir=ROOT)) if magic else []
        expanded.extend(matches or [word])
    for i, word in enumerate(expanded[:-1]):
        if word == "--report":
            expanded[i + 1] = str(out / Path(expanded[i + 1]).name)
    return expanded


def doc_commands() -> list[tuple[str, str]]:
    """(the file from the root, the command) for every command of README and docs/, each
    once per file."""
    return [
        (str(doc.relative_to(ROOT)), command)
        for doc in DOCS
        for command in dict.fromkeys(commands(doc.read_text(encoding="utf-8")))
    ]


SIMULATE = doc_commands()


def test_the_docs_show_simulator_commands() -> None:
    readme = [c for doc, c in SIMULATE if doc == "README.md"]
    assert len(readme) >= 4, readme
    assert "./scripts/run.sh" in readme, "the no-argument run.sh of 'Two commands'"
    assert any("--report" in c for c in readme)
    pages = {doc for doc, _ in SIMULATE if doc.startswith("docs/")}
    # The pages that show the simulator keep their commands (a move that dropped them
    # would otherwise pass unnoticed).
    for page in (
        "docs/simulator/simulate.md",
        "docs/simulator/armada.md",
        "docs/using/queues-and-gangs.md",
    ):
        assert page in pages, (page, sorted(pages))


@pytest.mark.parametrize(("doc", "command"), SIMULATE, ids=[f"{d}: {c}" for d, c in SIMULATE])
def test_each_doc_command_runs_as_written(doc: str, command: str, tmp_path: Path) -> None:
    args = as_kbatch(command, tmp_path)
    if args[0] != "simulate":
        pytest.skip(f"not a simulation: {command}")
    done = subprocess.run(
        [str(KBATCH), *args], capture_output=True, text=True, check=False, cwd=ROOT, timeout=600
    )
    assert done.returncode == 0, f"{doc}: {command}\n{done.stderr}"
    assert done.stdout.strip(), f"{doc}: {command}"
    assert "Traceback" not in done.stderr and "refused" not in done.stderr, done.stderr
    if "--report" in args:
        report = Path(args[args.index("--report") + 1])
        assert report.parent == tmp_path
        assert report.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_the_readme_command_parser_sees_a_command_that_fails(tmp_path: Path) -> None:
    """A README command that does not run would fail: here, a file that is not there."""
    (command,) = commands("```sh\nkbatch simulate examples/no-such.yaml  # broken\n```\n")
    done = subprocess.run(
        [str(KBATCH), *as_kbatch(command, tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 2 and "no-such.yaml: cannot read" in done.stderr


# docs/using/waiting.md: "Why is a job waiting? Its PodGroup's Unschedulable condition says so, in words — e.g.
# `3/6 tasks in gang unschedulable: 0/4 nodes are available: 2 Insufficient cpu, ...`
# — and so do the FailedScheduling events on its pods." (kube-scheduler's words); and a
# gang whose pods never fit on the nodes, even empty, says that.
NEVER = r"\d+ pods of [^;]+ never fit on the nodes, even empty: they hold \d+ of them"
WHY = (
    r"\d+/\d+ tasks in gang unschedulable: (0/\d+ nodes are available: \d+ [^,;]+"
    rf"(, \d+ [^,;]+)*(; {NEVER})?|not admitted: {NEVER})"
)


def test_why_a_job_waits_is_said_as_the_docs_say() -> None:
    texts = (" ".join(doc.read_text(encoding="utf-8").split()) for doc in DOCS)
    examples = [
        example
        for text in texts
        for example in re.findall(r"e\.g\. `([^`]*tasks in gang unschedulable[^`]*)`", text)
    ]
    assert examples, "no doc gives an example of why a job waits"
    for example in examples:
        assert re.fullmatch(WHY, example), example
    # node-1 runs a 4-cpu pod for ever: 12 cpu free, but one 5-cpu pod per node
    busy = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "busy"},
        "spec": {
            "nodeName": "node-1",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}],
        },
    }
    wide = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "wide"},
        "spec": {
            "parallelism": 2,
            "template": {
                "metadata": {"annotations": {"scheduling.k8s.io/group-name": "wide"}},
                "spec": {
                    "schedulerName": "kbatch",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "5"}}}],
                },
            },
        },
    }
    group = {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "wide"},
        "spec": {"minMember": 2},
    }
    documents = [busy, wide, group]
    result = simulate([ROOT / "examples" / "sim-cluster.yaml"], documents=documents)
    (row,) = result["podGroups"]
    (condition,) = [c for c in row["conditions"] if c["type"] == "Unschedulable"]
    assert condition["status"] == "True"
    assert re.fullmatch(WHY, condition["message"]), condition["message"]
    assert "Insufficient cpu" in condition["message"]
    assert "never fit" not in condition["message"]
    failed = [e for e in result["events"] if e["reason"] == "FailedScheduling"]
    assert {e["name"] for e in failed} == {"wide-0", "wide-1"}
    assert all("Insufficient cpu" in e["message"] for e in failed)
    # three such pods never fit the two empty nodes (15 cpu of the 16, but one pod each)
    wide["spec"]["parallelism"] = group["spec"]["minMember"] = 3
    result = simulate([ROOT / "examples" / "sim-cluster.yaml"], documents=[wide, group])
    (row,) = result["podGroups"]
    (condition,) = [c for c in row["conditions"] if c["type"] == "Unschedulable"]
    assert row["phase"] == "Pending"
    assert re.fullmatch(WHY, condition["message"]), condition["message"]
    assert condition["message"] == (
        "3/3 tasks in gang unschedulable: not admitted: 3 pods of cpu 5 never fit on the "
        "nodes, even empty: they hold 2 of them"
    )
