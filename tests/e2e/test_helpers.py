"""The e2e suite's own helpers, without a cluster: polling through a replica's 503s,
event times by session, the test kubelet retrying a refused write, the test
script finding envtest's binaries before building its own, the bind
benchmark's pairing of runs and summary of their ratios, and where Volcano's
controller-manager is looked for."""

import shutil
import subprocess
import threading
import urllib.error
from pathlib import Path
from typing import Any

import pytest

from e2e import bench_binds, volcano
from e2e import kubelet as kubelet_module
from e2e.cluster_backend import event_time, poll
from e2e.kubelet import Kubelet
from kbatch.kubeapi import ApiError
from kbatch.operators.scheduler.runtime.event_recorder import micro_time

REPO = Path(__file__).resolve().parents[2]


def test_poll_waits_through_errors_and_reports_the_last_one() -> None:
    answers: list[Any] = [
        urllib.error.HTTPError("http://x/healthz", 503, "Service Unavailable", None, None),  # type: ignore[arg-type]
        ConnectionRefusedError("refused"),
        "ready",
    ]

    def probe() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert poll("a probe", probe, 5, 0.01) == "ready"

    def refused() -> Any:
        raise ConnectionRefusedError("still refused")

    with pytest.raises(AssertionError, match=r"not after 0s.*still refused"):
        poll("a probe", refused, 0.05, 0.01)


def test_poll_does_not_hide_a_bug_in_the_probe() -> None:
    with pytest.raises(KeyError):
        poll("a probe", lambda: {}["leader"], 5, 0.01)


def test_an_event_counts_from_the_session_that_stamped_it_not_when_it_came() -> None:
    start = 1_000_000.0
    # a bind at 0.45 s after time 0 whose event came 0.3 s later: session 0, not 1
    late = {"eventTime": micro_time(start + 0.45)}
    assert event_time(late, received=0.75, start_wall=start, period=1.0) == 0.0
    assert event_time({"eventTime": micro_time(start + 2.1)}, 2.9, start, 1.0) == 2.0
    assert event_time({}, received=2.9, start_wall=start, period=1.0) == 3.0, "no eventTime"


class FlakyApi:
    """A pod status write refused ``failures`` times, then taken."""

    def __init__(self, failures: list[Exception]) -> None:
        self.failures = failures
        self.writes = 0
        self.done = threading.Event()

    def __call__(self, _api: Any, method: str, path: str, *_: Any) -> Any:
        self.writes += 1
        if self.failures:
            raise self.failures.pop(0)
        self.done.set()
        return {}


def pod() -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "u1"},
        "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
        "status": {"phase": "Pending"},
    }


def test_the_kubelet_retries_a_write_the_api_server_refused_for_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FlakyApi([ApiError(503, "unavailable"), ApiError(429, "slow down"), TimeoutError()])
    monkeypatch.setattr(kubelet_module, "request", api)
    monkeypatch.setattr(kubelet_module, "RETRY_DELAY", 0.01)
    kubelet = Kubelet(None)
    try:
        kubelet._on_pod("ADDED", pod())
        assert api.done.wait(5), "the pod was started in the end"
        assert api.writes == 4
    finally:
        kubelet._writes.shutdown(wait=True)


def test_the_kubelet_does_not_retry_a_pod_that_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    api = FlakyApi([ApiError(404, "not found")])
    monkeypatch.setattr(kubelet_module, "request", api)
    kubelet = Kubelet(None)
    kubelet._on_pod("ADDED", pod())
    kubelet._writes.shutdown(wait=True)
    assert api.writes == 1


def stub(path: Path, body: str = "exit 0") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/usr/bin/env bash\n{body}\n")
    path.chmod(0o755)


def run_test_script(
    tmp_path: Path, envtest_default: Path, *args: str, peers_status: int = 3, ci: bool = False
) -> tuple[list[str], list[str]]:
    """scripts/test.sh in a copy of the layout whose every tool is a stub: each pytest
    run as ``ARGS assets=KUBEBUILDER_ASSETS``, and the control planes provisioned. The
    live benchmark's peers' script ends with ``peers_status`` (3: all but Volcano built,
    as on a clean clone); ``ci``: as CI runs it."""
    root = tmp_path / "repo"
    (root / "scripts").mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / "scripts" / "test.sh", root / "scripts" / "test.sh")
    built = tmp_path / "provisioned"
    built.unlink(missing_ok=True)
    stub(
        root / "scripts" / "provision-control-plane.sh",
        f'echo "$2" >> {built}; echo {tmp_path}/cache-"$2"',
    )
    stub(root / "scripts" / "provision-jobset.sh", f"echo {tmp_path}/jobset")
    stub(root / "scripts" / "provision-bench-peers.sh", f"exit {peers_status}")
    for tool in ("python", "ruff", "mypy", "lint-imports"):
        stub(root / ".venv" / "bin" / tool)
    stub(
        root / ".venv" / "bin" / "pytest",
        'echo "jobset=$KBATCH_JOBSET_ASSETS"; echo "$* assets=$KUBEBUILDER_ASSETS"',
    )
    stub(tmp_path / "path" / "python3")
    env = {
        "PATH": f"{tmp_path / 'path'}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "KBATCH_ENVTEST_DEFAULT": str(envtest_default),
        "KBATCH_HELM": "stub",
        **({"CI": "true"} if ci else {}),
    }
    done = subprocess.run(
        ["bash", str(root / "scripts" / "test.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    jobsets = {line.strip() for line in lines if line.startswith("jobset=")}
    assert jobsets == {f"jobset={tmp_path}/jobset"}, "JobSet's controller is provisioned beside"
    runs = [line.strip() for line in lines if "assets=" in line]
    return runs, built.read_text().split() if built.exists() else []


def test_the_test_script_uses_envtests_default_folder_before_building(tmp_path: Path) -> None:
    default = tmp_path / "kubebuilder" / "bin"
    assert run_test_script(tmp_path, default) == (
        [
            f"assets={tmp_path}/cache-newest",
            f"-m smoke tests/e2e tests/chart assets={tmp_path}/cache-1.20",
        ],
        ["newest", "1.20"],
    )
    for binary in ("etcd", "kube-apiserver"):
        stub(default / binary)
    assert run_test_script(tmp_path, default) == ([f"assets={default}"], [])


def test_the_test_script_with_arguments_runs_only_them_on_the_newest(tmp_path: Path) -> None:
    default = tmp_path / "kubebuilder" / "bin"
    assert run_test_script(tmp_path, default, "tests/unit") == (
        [f"tests/unit assets={tmp_path}/cache-newest"],
        ["newest"],
    )


def test_the_test_script_goes_on_without_volcano_but_not_without_kwok_in_ci(
    tmp_path: Path,
) -> None:
    default = tmp_path / "kubebuilder" / "bin"
    runs, _ = run_test_script(tmp_path, default, "tests/e2e", ci=True)
    assert runs == [f"tests/e2e assets={tmp_path}/cache-newest"]
    with pytest.raises(subprocess.CalledProcessError) as failed:
        run_test_script(tmp_path, default, "tests/e2e", ci=True, peers_status=1)
    assert "CI: could not build the live benchmark's peers" in failed.value.stderr
    assert run_test_script(tmp_path, default, "tests/e2e", peers_status=1)[0] == runs


def test_the_bind_benchmark_alternates_who_goes_first_and_clears_after_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    done: list[str] = []
    monkeypatch.setattr(bench_binds, "clear_pods", lambda api: done.append("clear"))

    def bare() -> str:
        done.append("bare")
        return "bare's"

    def ours() -> str:
        done.append("kbatch")
        return "kbatch's"

    for round_ in range(4):
        assert bench_binds.back_to_back(None, round_, bare, ours) == ("bare's", "kbatch's")
    assert done == 2 * ["bare", "clear", "kbatch", "clear", "kbatch", "clear", "bare", "clear"]


@pytest.mark.parametrize(
    ("ratios", "summary"),
    [
        ([1.0], [1.0, 1.0, 1.0]),
        ([1.85, 1.49, 1.6], [1.49, 1.6, 1.85]),
        ([0.81, 1.02, 0.77, 0.9], [0.77, 0.855, 1.02]),
        ([1 / 3, 2 / 3], [0.333, 0.5, 0.667]),
    ],
)
def test_the_bind_benchmark_summarises_its_ratios(
    ratios: list[float], summary: list[float]
) -> None:
    assert bench_binds.min_median_max(ratios) == summary


def test_without_volcanos_controller_manager_the_reason_is_one_line_naming_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KBATCH_CACHE", str(tmp_path))
    monkeypatch.delenv(volcano.ASSETS_ENV, raising=False)
    with pytest.raises(volcano.Unavailable) as missing:
        volcano.assets()
    why = str(missing.value)
    assert "\n" not in why and "scripts/provision-bench-peers.sh" in why
    assert f"{tmp_path}/volcano/v1.15.1" in why and "vc-controller-manager" in why
    folder = tmp_path / "volcano" / "v1.15.1"
    for name in (volcano.CONTROLLER, volcano.CONF, *volcano.CRD_FILES):
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("")
    assert volcano.assets() == folder
    (folder / volcano.CRD_FILES[0]).unlink()
    with pytest.raises(volcano.Unavailable, match=r"batch\.volcano\.sh_jobs\.yaml"):
        volcano.assets()
