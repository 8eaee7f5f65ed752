"""``kbatch bench --live``'s flags, and the pins of scripts/provision-bench-peers.sh."""

import argparse
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from kbatch.cli import bench

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "provision-bench-peers.sh"


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_command(parser.add_subparsers())
    return parser.parse_args(["bench", "--live", *argv])


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--schedulers", "kbatch,slurm"], "distinct names among kbatch, kube-scheduler, volcano"),
        (["--schedulers", "kbatch,kbatch"], "distinct names"),
        (["--rounds", "0"], "--rounds 0: must be at least 1"),
        (["--scenario", "b", "--pods", "15"], "multiple of the gang size 10"),
        (["--size", "10x100"], "--live goes with none of"),
        (["--volcano-conf", "/nowhere.conf"], "--volcano-conf '/nowhere.conf': no such file"),
    ],
)
def test_bad_live_flags_are_refused_naming_the_flag(argv: list[str], says: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=says):
        bench.bench(parse(*argv))


def test_live_flags_default_to_three_rounds_of_everyone_at_each_peers_limits() -> None:
    args = parse()
    assert (args.scenario, args.rounds, args.client_qps) == ("a", 3, None)
    assert args.schedulers == "kbatch,kube-scheduler,volcano"


def test_the_peer_pins_parse() -> None:
    text = SCRIPT.read_text()
    block = re.search(r"readonly PEERS=\(\n(.*?)\n\)", text, re.S)
    assert block, "PEERS=( ... ) not found"
    peers = [line.strip().strip('"').split("|") for line in block.group(1).splitlines()]
    assert {p[0] for p in peers} == {"kwok"}  # Volcano is built from git: below
    for name, module, package, version, binary in peers:
        assert re.fullmatch(r"v\d+\.\d+\.\d+", version), (name, version)
        assert "." in module.split("/")[0] and package.startswith("cmd/") and binary, name
    assert re.search(r"^readonly VOLCANO_VERSION=v\d+\.\d+\.\d+$", text, re.M)
    assert "KBATCH_VOLCANO_GIT_DIR" in text and "GOTOOLCHAIN=local" in text
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


def test_without_a_volcano_repository_the_script_says_so_and_exits_3(tmp_path: Path) -> None:
    # KWOK cached (a stand-in), no git repository of Volcano: nothing is built.
    kwok = tmp_path / "kwok" / "v0.8.0" / "bin" / "kwok"
    kwok.parent.mkdir(parents=True)
    kwok.write_text("#!/bin/sh\n")
    kwok.chmod(0o755)
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "KBATCH_CACHE": str(tmp_path),
        "KBATCH_VOLCANO_GIT_DIR": str(tmp_path / "no-volcano"),
    }
    if shutil.which("go") is None:
        pytest.skip("no go command: the script stops before it looks for Volcano")
    done = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True)
    assert done.returncode == 3, done.stderr
    assert "volcano v1.15.1: not built: no tag v1.15.1 in KBATCH_VOLCANO_GIT_DIR=" in done.stderr
    assert done.stdout.strip() == str(tmp_path)
    assert not (tmp_path / "volcano" / "v1.15.1" / "bin").exists()


def test_a_missing_kbatch_conf_is_refused_naming_it(tmp_path: Path) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=r"--kbatch-conf .*: no such file"):
        bench.bench(parse("--kbatch-conf", str(tmp_path / "nowhere.yaml")))


def test_usage_reads_peak_memory_and_cpu_from_proc() -> None:
    import os

    from kbatch.bench import live_schedulers

    peak, cpu = live_schedulers.usage(os.getpid())
    assert peak is not None and peak > 10 * 2**20  # this interpreter, kbatch imported
    assert cpu is not None and cpu > 0
    with subprocess.Popen(["true"]) as gone:
        gone.wait()
    assert live_schedulers.usage(gone.pid) == (None, None)


def test_table_prints_the_runs_kept_in_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs.jsonl"
    line = {"scheduler": "kbatch", "scenario": "b", "binds_per_second": 240.0, "error": None}
    runs.write_text(json.dumps(line) + "\n" + json.dumps({**line, "error": "timeout"}) + "\n")
    assert bench.bench(parse_table(str(runs), "--brief")) == 0
    out = capsys.readouterr().out
    assert "| kbatch | b |" in out and "| 240 |" in out and "- kbatch (b): timeout" in out


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["nowhere.jsonl"], "--table nowhere.jsonl: no such file"),
        (["runs.jsonl", "--live"], "--table goes with none of --live"),
    ],
)
def test_bad_table_flags_are_refused_naming_the_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str], says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs.jsonl").write_text("")
    with pytest.raises(argparse.ArgumentTypeError, match=says):
        bench.bench(parse_table(*argv))


def test_brief_goes_with_table_only() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="--brief goes with --table only"):
        bench.bench(parse("--brief"))


def parse_table(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench.add_command(parser.add_subparsers())
    return parser.parse_args(["bench", "--table", *argv])
