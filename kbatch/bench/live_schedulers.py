"""The schedulers the live benchmark runs, each as a program it starts and stops itself:
``kbatch run``, kube-scheduler and Volcano's vc-scheduler, all with the same kubeconfig.

Client limits: kbatch's client has none (it sends as fast as its connection pool of 32
takes). ``client_qps`` None gives each peer its own defaults (kube-scheduler: 50 QPS,
burst 100; Volcano: 2,000 QPS, burst 2,000); a number gives both peers that QPS and
burst, the closest they come to kbatch's unlimited client.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kbatch.bench import live_cluster
from kbatch.config import KUBE_BATCH_CONF

SETTLE_SECONDS = 2.0  # after ready: the informers' first lists done
READY_TIMEOUT = 120.0


@dataclass
class Started:
    """A scheduler running: its process, and what was asked of its client."""

    proc: live_cluster.Process
    client: str  # e.g. "qps=50 burst=100 (its defaults)"


def start(
    name: str,
    cluster: live_cluster.LiveCluster,
    client_qps: float | None,
    workdir: Path,
    kbatch_conf: Path | None = None,
    volcano_conf: str = "default",
) -> Started:
    """Start scheduler ``name`` against ``cluster`` and wait until it is ready; RuntimeError
    saying why when it cannot run. ``kbatch_conf``: kbatch's scheduler conf (default its
    own default conf); ``volcano_conf``: as ``volcano_conf_text`` takes it."""
    if name == "kbatch":
        started = _kbatch(cluster, workdir, kbatch_conf)
    elif name == "kube-scheduler":
        started = _kube_scheduler(cluster, client_qps, workdir)
    elif name == "volcano":
        started = _volcano(cluster, client_qps, workdir, volcano_conf)
    else:
        raise ValueError(f"--schedulers: unknown scheduler {name!r}")
    time.sleep(SETTLE_SECONDS)
    if started.proc.popen.poll() is not None:
        raise RuntimeError(
            f"{name} exited after starting; the end of its log:\n{started.proc.tail()}"
        )
    return started


def _kbatch(cluster: live_cluster.LiveCluster, workdir: Path, conf: Path | None) -> Started:
    port = live_cluster.free_ports(1)[0]
    exe = Path(sys.executable).with_name("kbatch")
    argv = [
        str(exe), "run", "--kubeconfig", str(cluster.kubeconfig), "--no-leader-elect",
        "--metrics-address", "", "--health-address", f"127.0.0.1:{port}",
        "--log-level", "warning",
    ]  # fmt: skip
    if conf is not None:
        argv += ["--scheduler-conf", str(conf)]
    proc = live_cluster.spawn("kbatch", argv, workdir)
    live_cluster.wait_for(
        proc, lambda: live_cluster.http_ok(f"http://127.0.0.1:{port}/healthz"), READY_TIMEOUT
    )
    return Started(proc, "no client-side limit (kbatch has none)")


KUBE_SCHEDULER_DEFAULTS = (50.0, 100)


def _kube_scheduler(
    cluster: live_cluster.LiveCluster, client_qps: float | None, workdir: Path
) -> Started:
    binary = cluster.binaries.kube_scheduler
    if not live_cluster.executable(binary):
        raise RuntimeError(f"kube-scheduler: no binary at {binary}")
    qps, burst = KUBE_SCHEDULER_DEFAULTS if client_qps is None else (client_qps, int(client_qps))
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(cluster.kubeconfig), "qps": qps, "burst": burst},
        "leaderElection": {"leaderElect": False},
    }
    path = workdir / "kube-scheduler.yaml"
    path.write_text(yaml.safe_dump(config))
    port = live_cluster.free_ports(1)[0]
    argv = [
        str(binary), f"--config={path}", f"--secure-port={port}", "--bind-address=127.0.0.1",
        f"--authentication-kubeconfig={cluster.kubeconfig}",
        f"--authorization-kubeconfig={cluster.kubeconfig}",
    ]  # fmt: skip
    if cluster.gang_api:
        argv.append(live_cluster.GANG_API_GATE)
    proc = live_cluster.spawn("kube-scheduler", argv, workdir)
    live_cluster.wait_for(
        proc, lambda: live_cluster.https_ok(f"https://127.0.0.1:{port}/healthz"), READY_TIMEOUT
    )
    own = " (its defaults)" if client_qps is None else ""
    return Started(proc, f"qps={qps:g} burst={burst}{own}")


VOLCANO_DEFAULTS = (2000.0, 2000)
VOLCANO_CONFS = ("default", "kbatch")  # besides a file's path


def volcano_conf_text(choice: str) -> str | None:
    """The conf ``choice`` names for vc-scheduler: None for ``default`` (its built-in
    one), kbatch's default conf for ``kbatch``, else the text of the file at that path
    (ValueError naming it when there is none)."""
    if choice == "default":
        return None
    if choice == "kbatch":
        return KUBE_BATCH_CONF
    path = Path(choice)
    if not path.is_file():
        raise ValueError(
            f"--volcano-conf {choice!r}: no such file (or say {' or '.join(VOLCANO_CONFS)})"
        )
    return path.read_text()


def volcano_crds(binary: Path) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions cached beside vc-scheduler ``binary`` (its
    ``../crd/*.yaml``), in name order; none when there are none."""
    folder = binary.parent.parent / "crd"
    out = []
    for path in sorted(folder.glob("*.yaml")):
        body = yaml.safe_load(path.read_text())
        if not isinstance(body, dict) or body.get("kind") != "CustomResourceDefinition":
            raise ValueError(f"{path}: not a CustomResourceDefinition")
        out.append(body)
    return out


def volcano_argv(
    binary: Path, kubeconfig: Path, client_qps: float | None, port: int, conf: Path | None
) -> list[str]:
    """vc-scheduler's command line: no leader election, its health check on ``port`` (off
    unless asked for), its client at ``client_qps`` (None: its defaults), ``conf`` (None:
    its built-in conf)."""
    qps, burst = VOLCANO_DEFAULTS if client_qps is None else (client_qps, int(client_qps))
    argv = [
        str(binary), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
        f"--kube-api-qps={qps:g}", f"--kube-api-burst={burst}", "--enable-healthz=true",
        f"--healthz-address=127.0.0.1:{port}", "--enable-metrics=false",
    ]  # fmt: skip
    if conf is not None:
        argv.append(f"--scheduler-conf={conf}")
    return argv


def _volcano(
    cluster: live_cluster.LiveCluster, client_qps: float | None, workdir: Path, conf_choice: str
) -> Started:
    binary = cluster.binaries.volcano_scheduler
    if not live_cluster.executable(binary):
        raise RuntimeError(
            f"volcano: not built (no vc-scheduler under {binary.parents[2]}; "
            "scripts/provision-bench-peers.sh says why)"
        )
    conf: Path | None = None
    text = volcano_conf_text(conf_choice)
    if text is not None:
        conf = workdir / "volcano-scheduler.conf"
        conf.write_text(text)
    port = live_cluster.free_ports(1)[0]
    argv = volcano_argv(binary, cluster.kubeconfig, client_qps, port, conf)
    proc = live_cluster.spawn("volcano", argv, workdir)
    live_cluster.wait_for(
        proc, lambda: live_cluster.http_ok(f"http://127.0.0.1:{port}/healthz"), READY_TIMEOUT
    )
    qps, burst = VOLCANO_DEFAULTS if client_qps is None else (client_qps, int(client_qps))
    own = " (its defaults)" if client_qps is None else ""
    return Started(proc, f"qps={qps:g} burst={burst}{own}")


def usage(pid: int) -> tuple[int | None, float | None]:
    """Process ``pid``'s peak resident memory in bytes (VmHWM) and CPU seconds (user +
    system), from /proc; None where it cannot be read (gone, or not Linux)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None, None
    peak = next(
        (int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:")),
        None,
    )
    fields = stat.rpartition(")")[2].split()  # the name may hold spaces; fields from state on
    ticks = os.sysconf("SC_CLK_TCK")
    return peak, (int(fields[11]) + int(fields[12])) / ticks
