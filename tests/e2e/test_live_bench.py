"""The live benchmark's short version: one round of scenario (b) at 200 nodes (2,000
pods in gangs of 10) for kbatch, kube-scheduler and Volcano's scheduler, through the one
command a user runs, on its own control plane and KWOK.

It needs the newest control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler) and KWOK in the cache that scripts/provision-control-plane.sh and
scripts/provision-bench-peers.sh fill, and skips naming what is missing otherwise.
Volcano's scheduler is built only where a copy of its repository is at hand: without it
its run must be an ``error`` line saying it is not built, and the others still run.
A test of the benchmark's working, not of anyone's speed: the limits are generous.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kbatch.bench import live_cluster, live_figures

pytestmark = pytest.mark.e2e

KBATCH = Path(sys.executable).with_name("kbatch")
NODES, PODS = 200, 2000
RUN_TIMEOUT = 90  # each scheduler's run
COMMAND_TIMEOUT = 480  # the whole command, cluster start and wipes included


def test_one_round_of_scenario_b_at_200_nodes(tmp_path: Path) -> None:
    binaries = live_cluster.Binaries.find()
    needed = ("etcd", "kube_apiserver", "kube_controller_manager", "kube_scheduler", "kwok")
    missing = binaries.missing(needed)
    if missing:
        pytest.skip(
            f"e2e: live benchmark: no {', '.join(missing)} in {live_cluster.cache_root()} "
            "(scripts/provision-control-plane.sh, scripts/provision-bench-peers.sh)"
        )
    argv = [
        str(KBATCH), "bench", "--live", "--scenario", "b", "--nodes", str(NODES),
        "--rounds", "1", "--client-qps", "1000", "--timeout", str(RUN_TIMEOUT),
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT)
    why = f"$ {' '.join(argv)}\nstderr:\n{done.stderr[-4000:]}"
    lines = {line["scheduler"]: line for line in map(json.loads, done.stdout.splitlines())}
    assert set(lines) == {"kbatch", "kube-scheduler", "volcano"}, why
    for name in ("kbatch", "kube-scheduler"):
        line = lines[name]
        assert line["error"] is None, why
        assert list(line)[: len(live_figures.LINE_KEYS)] == list(live_figures.LINE_KEYS)
        assert (line["pods"], line["bound"], line["nodes"]) == (PODS, PODS, NODES), why
        assert line["seconds_to_all_bound"] > 0 and line["binds_per_second"] > 0
        assert line["api_requests"]["POST"] >= PODS  # the benchmark's creates at least
    assert lines["kbatch"]["max_partly_bound_pods"] == 0
    volcano = lines["volcano"]
    if live_cluster.executable(binaries.volcano_scheduler):
        assert volcano["error"] is None and volcano["bound"] == PODS, why
        assert done.returncode == 0, why
    else:
        assert volcano["error"].startswith("volcano: not built"), why
        assert done.returncode == 1, why  # a run that could not be made says so
    assert "| scheduler | scenario | nodes | pods |" in done.stderr, why
