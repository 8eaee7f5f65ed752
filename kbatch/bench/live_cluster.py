"""The live benchmark's cluster: etcd, kube-apiserver and kube-controller-manager from the
cache that builds them, on 127.0.0.1, with KWOK faking the nodes and the pods' lives.

    with LiveCluster(binaries, workdir) as cluster:
        cluster.kubeconfig, cluster.metrics()

The API server serves upstream's gang API (``scheduling.k8s.io/v1beta1``) where its
release knows the gate. The controller manager runs without node lifecycle (KWOK sends
no heartbeats; nothing may taint or evict the fake nodes). KWOK manages the nodes that
carry ``type=kwok``: its stages (written here) make a new node Ready with 32 cpu,
128Gi and 110 pods, a bound pod Running at once and Succeeded ``pod_seconds`` later,
and a deleted pod gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import yaml

from kbatch.bench import live_workload as workload

ADMIN = "kbatch-bench-admin"
MASTERS = "system:masters"
START_TIMEOUT = 120.0
STOP_TIMEOUT = 15.0
GANG_API_GATE = "--feature-gates=GenericWorkload=true"


def cache_root() -> Path:
    return Path(os.environ.get("KBATCH_CACHE") or Path.home() / ".cache" / "kbatch")


@dataclass(frozen=True)
class Binaries:
    """Where each program is; ``find`` says which are missing and how to get them."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kwok: Path
    volcano_scheduler: Path

    @classmethod
    def find(cls, plane: str = "v1.37") -> Binaries:
        root = cache_root()
        bin_dir = root / "control-plane" / plane / "bin"
        return cls(
            etcd=bin_dir / "etcd",
            kube_apiserver=bin_dir / "kube-apiserver",
            kube_controller_manager=bin_dir / "kube-controller-manager",
            kube_scheduler=bin_dir / "kube-scheduler",
            kwok=_newest(root / "kwok", "kwok"),
            volcano_scheduler=_newest(root / "volcano", "vc-scheduler"),
        )

    def missing(self, names: tuple[str, ...]) -> list[str]:
        return [n for n in names if not executable(getattr(self, n))]


def _newest(folder: Path, program: str) -> Path:
    """``folder/<version>/bin/program`` of the newest version cached (by version order)."""
    versions = sorted(
        (p for p in folder.glob("*/bin/" + program) if executable(p)),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in p.parts[-3].lstrip("v").split(".")],
    )
    return versions[-1] if versions else folder / "<none>" / "bin" / program


def executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def free_ports(n: int) -> list[int]:
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


@dataclass
class Process:
    """One program the benchmark started, its output in ``log``."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    handle: IO[bytes]

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self.handle.close()

    def tail(self, lines: int = 20) -> str:
        self.handle.flush()
        text = self.log.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join("    " + line for line in text)


def spawn(name: str, argv: list[str], workdir: Path) -> Process:
    log = workdir / f"{name}.log"
    handle = log.open("ab")
    handle.write(f"$ {' '.join(argv)}\n".encode())
    handle.flush()
    popen = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=handle,
        stderr=subprocess.STDOUT,
        cwd=workdir,
        preexec_fn=_die_with_parent if sys.platform == "linux" else None,
    )
    return Process(name, popen, log, handle)


def _die_with_parent() -> None:
    """In the child before it runs: Linux sends it SIGTERM when the benchmark dies, however
    it dies (a kill leaves no ``__exit__`` to stop it)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def wait_for(what: Process, ready: Callable[[], bool], timeout: float = START_TIMEOUT) -> None:
    """Poll ``ready`` until it holds; RuntimeError with the log's tail if ``what`` exits
    or the time runs out."""
    deadline = time.monotonic() + timeout
    while not ready():
        code = what.popen.poll()
        if code is not None or time.monotonic() > deadline:
            why = (
                f"exited with status {code}" if code is not None else f"not ready in {timeout:.0f}s"
            )
            raise RuntimeError(f"{what.name} {why}; the end of {what.log}:\n{what.tail()}")
        time.sleep(0.2)


def https_ok(url: str, ca_file: Path | None = None, token: str | None = None) -> bool:
    """GET ``url``: True on 200. Without ``ca_file`` the certificate is not checked."""
    if ca_file is not None and not ca_file.is_file():
        return False  # the API server has not written its certificate yet
    if ca_file is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cafile=str(ca_file))
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=3, context=ctx) as resp:
            resp.read()
            return bool(resp.status == 200)
    except (OSError, ssl.SSLError, urllib.error.HTTPError):
        return False


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=3) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.HTTPError):
        return False


@dataclass
class LiveCluster:
    """The control plane and KWOK, started by ``__enter__`` and stopped by ``__exit__``."""

    binaries: Binaries
    workdir: Path
    pod_seconds: float = 600.0
    procs: list[Process] = field(default_factory=list, init=False)
    kubeconfig: Path = field(init=False)
    server: str = field(init=False)
    token: str = field(init=False)
    ca_file: Path = field(init=False)
    gang_api: bool = field(default=False, init=False)
    _etcd_data: Path | None = field(default=None, init=False)

    def __enter__(self) -> LiveCluster:
        try:
            self._start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.stop()
        self.procs.clear()
        if self._etcd_data is not None:
            shutil.rmtree(self._etcd_data, ignore_errors=True)

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.token = secrets.token_hex(16)
        tokens = self.workdir / "tokens.csv"
        tokens.write_text(f'{self.token},{ADMIN},{ADMIN},"{MASTERS}"\n')
        sa_key = self.workdir / "sa.key"
        subprocess.run(
            ["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True
        )
        shm = Path("/dev/shm")  # etcd on memory: its fsyncs would be the benchmark otherwise
        on_shm = shm.is_dir() and os.access(shm, os.W_OK)
        self._etcd_data = Path(
            tempfile.mkdtemp(prefix="kbatch-bench-etcd-", dir=shm if on_shm else None)
        )
        etcd_port, peer_port, api_port = free_ports(3)
        etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
        etcd = self._spawn("etcd", [
            str(self.binaries.etcd), "--name=bench", f"--data-dir={self._etcd_data}",
            f"--listen-client-urls={etcd_url}", f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}", f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=bench={peer_url}", "--quota-backend-bytes=8589934592",
        ])  # fmt: skip
        wait_for(etcd, lambda: http_ok(f"{etcd_url}/health"))
        self.server = f"https://127.0.0.1:{api_port}"
        certs = self.workdir / "apiserver"
        self.ca_file = certs / "apiserver.crt"
        self.gang_api = _knows_gate(self.binaries.kube_apiserver)
        gang = [GANG_API_GATE, "--runtime-config=scheduling.k8s.io/v1beta1=true"]
        apiserver = self._spawn("kube-apiserver", [
            str(self.binaries.kube_apiserver), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}", f"--cert-dir={certs}", f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC", "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={sa_key}", f"--service-account-signing-key-file={sa_key}",
            "--service-cluster-ip-range=10.0.0.0/24", "--endpoint-reconciler-type=none",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            *(gang if self.gang_api else []),
        ])  # fmt: skip
        wait_for(apiserver, lambda: https_ok(f"{self.server}/readyz", self.ca_file, self.token))
        self.kubeconfig = self.workdir / "kubeconfig"
        write_kubeconfig(self.kubeconfig, self.server, self.ca_file, self.token)
        # Without the TTL controller: it re-annotates every node each time the node count
        # passes one of its sizes (at 20 requests/s, minutes of PATCH nodes on 5,000 nodes,
        # which fell into the first scheduler's run); its annotation only tells real
        # kubelets how long to cache secrets.
        self._spawn("kube-controller-manager", [
            str(self.binaries.kube_controller_manager), f"--kubeconfig={self.kubeconfig}",
            "--secure-port=0", "--controllers=*,-nodelifecycle,-ttl", "--leader-elect=false",
            f"--service-account-private-key-file={sa_key}", f"--root-ca-file={self.ca_file}",
        ])  # fmt: skip
        stages = self.workdir / "kwok-stages.yaml"
        stages.write_text(yaml.safe_dump_all(kwok_stages(self.pod_seconds)))
        kwok_port = free_ports(1)[0]
        kwok = self._spawn("kwok", [
            str(self.binaries.kwok), f"--kubeconfig={self.kubeconfig}", f"--config={stages}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-label-selector={workload.NODE_LABEL}={workload.NODE_LABEL_VALUE}",
            f"--server-address=127.0.0.1:{kwok_port}",
        ])  # fmt: skip
        wait_for(kwok, lambda: http_ok(f"http://127.0.0.1:{kwok_port}/healthz"))

    def _spawn(self, name: str, argv: list[str]) -> Process:
        proc = spawn(name, argv, self.workdir)
        self.procs.append(proc)
        return proc

    def alive(self) -> list[str]:
        """The names of the cluster's programs that have exited."""
        return [p.name for p in self.procs if p.popen.poll() is not None]


def _knows_gate(kube_apiserver: Path) -> bool:
    """Whether ``kube_apiserver`` knows upstream's gang API gate (``--version`` answers
    only once every flag parsed)."""
    done = subprocess.run(
        [str(kube_apiserver), GANG_API_GATE, "--version"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return done.returncode == 0


def write_kubeconfig(path: Path, server: str, ca_file: Path, token: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "bench", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": ADMIN, "user": {"token": token}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": ADMIN}}],
        "current-context": "bench",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)


# ---- KWOK's stages ---------------------------------------------------------------------

NODE_READY = """\
{{{{ $now := Now }}}}
conditions:
- type: Ready
  status: "True"
  reason: KubeletReady
  message: faked by KWOK
  lastHeartbeatTime: {{{{ $now | Quote }}}}
  lastTransitionTime: {{{{ $now | Quote }}}}
addresses:
- type: InternalIP
  address: {{{{ NodeIP | Quote }}}}
allocatable: {{cpu: "{cpu}", memory: "{memory}", pods: "{pods}"}}
capacity: {{cpu: "{cpu}", memory: "{memory}", pods: "{pods}"}}
phase: Running
"""

POD_RUNNING = """\
{{ $now := Now }}
conditions:
- {type: Initialized, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: Ready, status: "True", lastTransitionTime: {{ $now | Quote }}}
- {type: ContainersReady, status: "True", lastTransitionTime: {{ $now | Quote }}}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
  state: {running: {startedAt: {{ $now | Quote }}}}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
"""

POD_SUCCEEDED = """\
{{ $now := Now }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: false
  restartCount: 0
  state: {terminated: {exitCode: 0, reason: Completed, finishedAt: {{ $now | Quote }}}}
{{ end }}
phase: Succeeded
"""


def _stage(
    name: str, kind: str, match: list[dict[str, Any]], nxt: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {
            "resourceRef": {"apiGroup": "v1", "kind": kind},
            "selector": {"matchExpressions": match},
            "next": nxt,
        },
    }


def kwok_stages(pod_seconds: float) -> list[dict[str, Any]]:
    """A node made Ready with the benchmark's capacity; a pod bound to one Running at
    once and Succeeded ``pod_seconds`` later; a deleted pod removed."""
    alive = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
    ready_template = NODE_READY.format(
        cpu=workload.NODE_CPU, memory=workload.NODE_MEMORY, pods=workload.NODE_PODS
    )
    complete = _stage(
        "pod-complete", "Pod",
        [alive, {"key": ".status.phase", "operator": "In", "values": ["Running"]}],
        {"statusTemplate": POD_SUCCEEDED},
    )  # fmt: skip
    complete["spec"]["delay"] = {"durationMilliseconds": int(pod_seconds * 1000)}
    return [
        _stage(
            "node-initialize", "Node",
            [{"key": '.status.conditions.[] | select( .type == "Ready" ) | .status',
              "operator": "NotIn", "values": ["True"]}],
            {"statusTemplate": ready_template},
        ),
        _stage(
            "pod-ready", "Pod",
            [alive, {"key": ".spec.nodeName", "operator": "Exists"},
             {"key": ".status.phase", "operator": "In", "values": ["Pending"]}],
            {"statusTemplate": POD_RUNNING},
        ),
        complete,
        _stage("pod-delete", "Pod", [{"key": ".metadata.deletionTimestamp", "operator": "Exists"}],
               {"delete": True}),
    ]  # fmt: skip
