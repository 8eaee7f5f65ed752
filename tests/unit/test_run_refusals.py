"""``kbatch run`` refuses what it cannot start with in one line, before it starts
anything: no cluster to schedule (a kubeconfig that is not one), a recording directory
that holds a recording already, a checkpoint interval below a segment's header."""

from pathlib import Path

import pytest

from kbatch.cli.main import main

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:9"}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {}}]
current-context: c
"""


def test_no_cluster_to_schedule_is_one_line_naming_the_kubeconfig(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere"
    assert main(["run", "--kubeconfig", str(missing)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"kbatch: error: no cluster to schedule (--kubeconfig {missing}): ")
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_recording_that_cannot_be_made_is_refused_before_the_lists_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "segment-000001.jsonl.gz").write_bytes(b"")
    args = ["run", "--kubeconfig", str(kubeconfig), "--record"]
    assert main([*args, str(taken)]) == 2
    assert "holds a recording already; record into an empty directory" in capsys.readouterr().err
    small = [*args, str(tmp_path / "new"), "--record-checkpoint-every", "1K"]
    assert main(small) == 2
    assert "--record-checkpoint-every: 1024 is below 4096" in capsys.readouterr().err
