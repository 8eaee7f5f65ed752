"""A throwaway Kubernetes control plane for the e2e tests (DESIGN.md §9).

envtest's convention: the binaries come from ``KUBEBUILDER_ASSETS`` (default
/usr/local/kubebuilder/bin), falling back to the folders that
scripts/provision-control-plane.sh fills
(``${KBATCH_CACHE:-~/.cache/kbatch}/control-plane/v1.NN/bin``), the newest
first. If ``KBATCH_E2E_KUBECONFIG`` names a kubeconfig, that cluster is used
and nothing is started.

    source = discover()          # a Cluster, a ControlPlane, or raises Unavailable
    with ControlPlane(find_binaries()) as cluster:
        with cluster.api_client() as api:
            ...

The control plane is etcd + kube-apiserver (+ kube-controller-manager when the
binary is there, with the node-lifecycle controller off: nodes are plain Node
objects whose status the tests write). Everything listens on 127.0.0.1 on free
ports and lives in one temp dir: data, certificates, a static token file, the
kubeconfig the tests use, and one log file per process.

The API server aggregates APIs as a real cluster's does: it proxies an APIService's
requests with a front-proxy client certificate (CN ``front-proxy-client``), whose CA
it publishes in ``kube-system/extension-apiserver-authentication``; with no
kube-proxy here, it dials the Service's endpoint IPs itself
(``--enable-aggregator-routing``). An endpoint IP may not be loopback, so a process
on this machine serves an APIService (or a webhook) at ``host_ipv4()``.

The same flags start every supported Kubernetes (1.20 to 1.37): a flag that
only some releases know (the insecure ports, gone in 1.24) is passed when the
binary accepts it, which the binary itself is asked (``accepts``).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

ASSETS_ENV = "KUBEBUILDER_ASSETS"
DEFAULT_ASSETS = Path("/usr/local/kubebuilder/bin")
KUBECONFIG_ENV = "KBATCH_E2E_KUBECONFIG"
KEEP_ENV = "KBATCH_E2E_KEEP"  # keep the temp dir (logs, data) after stopping
PROVISION_SCRIPT = "scripts/provision-control-plane.sh"

REQUIRED = ("etcd", "kube-apiserver")
CONTROLLER_MANAGER = "kube-controller-manager"

SERVICE_CIDR = "10.0.0.0/24"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
ADMIN_USER = "kbatch-e2e-admin"
CM_USER = "system:kube-controller-manager"
MASTERS = "system:masters"
FRONT_PROXY_CLIENT = "front-proxy-client"

START_TIMEOUT = 90.0  # seconds, per component
STOP_TIMEOUT = 15.0
LOG_TAIL_LINES = 40


class Unavailable(Exception):
    """No control plane can be had here; the message is one line saying why."""


class StartError(RuntimeError):
    """A component was found but did not come up; the message carries log tails."""


# The Kubernetes lines scripts/provision-control-plane.sh caches, newest first.
CACHED_LINES = ("v1.37", "v1.20")


def cache_bin_dirs() -> list[Path]:
    """Where scripts/provision-control-plane.sh puts the binaries, newest first."""
    base = os.environ.get("KBATCH_CACHE") or str(Path.home() / ".cache" / "kbatch")
    return [Path(base) / "control-plane" / line / "bin" for line in CACHED_LINES]


def asset_dirs() -> list[Path]:
    """The folders searched for binaries, in order."""
    assets = os.environ.get(ASSETS_ENV) or str(DEFAULT_ASSETS)
    dirs = [Path(assets), *cache_bin_dirs()]
    return list(dict.fromkeys(dirs))


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@dataclass(frozen=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path | None


def find_binaries(dirs: list[Path] | None = None) -> Binaries:
    """The first folder holding etcd and kube-apiserver wins; the controller
    manager comes from the same folder, else from any other, else is left out."""
    dirs = asset_dirs() if dirs is None else dirs
    for d in dirs:
        if all(_executable(d / name) for name in REQUIRED):
            cm = next(
                (
                    p
                    for p in [d / CONTROLLER_MANAGER, *(o / CONTROLLER_MANAGER for o in dirs)]
                    if _executable(p)
                ),
                None,
            )
            return Binaries(d / "etcd", d / "kube-apiserver", cm)
    looked = ", ".join(str(d) for d in dirs)
    raise Unavailable(
        f"set {ASSETS_ENV} or {KUBECONFIG_ENV}, or run {PROVISION_SCRIPT} "
        f"(looked for {' and '.join(REQUIRED)} in {looked})"
    )


@dataclass(frozen=True)
class Cluster:
    """How tests reach a cluster: a kubeconfig file and a client factory."""

    kubeconfig: Path
    # False when we started a control plane without kube-controller-manager
    # (no garbage collector, no namespace cleanup, no default service accounts).
    controllers: bool = True
    # The CA of the API server's front-proxy client certificate (what an aggregated
    # API server trusts); None for a cluster we did not start.
    front_proxy_ca: Path | None = None

    def api_client(self) -> Any:
        """A fresh kubernetes.client.ApiClient; use it as a context manager."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]


def discover() -> Cluster | ControlPlane:
    """An external cluster, a control plane ready to start, or Unavailable."""
    external = os.environ.get(KUBECONFIG_ENV)
    if external:
        path = Path(external).expanduser()
        if not path.is_file():
            raise Unavailable(f"{KUBECONFIG_ENV}={external} is not a file")
        return Cluster(path.resolve())
    return ControlPlane(find_binaries())


@functools.cache
def accepts(binary: Path, flag: str) -> bool:
    """Whether ``binary`` takes ``flag`` (``--name=value``): asked with ``--version``,
    which the Kubernetes commands answer only after parsing every flag, refusing an
    unknown one. (``--help`` is no guide: it hides deprecated flags that still work.)"""
    try:
        done = subprocess.run(
            [str(binary), flag, "--version"], capture_output=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def when_accepted(binary: Path, *flags: str) -> list[str]:
    """Those of ``flags`` that ``binary`` takes."""
    return [flag for flag in flags if accepts(binary, flag)]


# ---- upstream's gang API (KEP-4671) ------------------------------------------------
GANG_API_GATE = "--feature-gates=GenericWorkload=true"
GANG_API_ARGS = (GANG_API_GATE, "--runtime-config=scheduling.k8s.io/v1alpha3=true")


def gang_api_args(kube_apiserver: Path) -> list[str]:
    """The flags that switch on upstream's gang API (scheduling.k8s.io/v1alpha3 Workload
    and PodGroup, a pod's spec.schedulingGroup), where ``kube_apiserver`` knows its
    feature gate; none where it does not (1.20)."""
    return list(GANG_API_ARGS) if accepts(kube_apiserver, GANG_API_GATE) else []


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 right now (held together while picked)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


def _die_with_parent() -> None:
    """preexec_fn: ask Linux to SIGTERM the child when the test process dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError as exc:
        return f"    (cannot read {path}: {exc})"
    return "\n".join("    " + line for line in text[-lines:]) or "    (empty)"


@dataclass
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    handle: IO[bytes]


@dataclass
class ControlPlane:
    binaries: Binaries
    start_timeout: float = START_TIMEOUT
    extra_apiserver_args: list[str] = field(default_factory=list)
    workdir: Path | None = None
    _procs: list[_Proc] = field(default_factory=list, init=False, repr=False)
    _own_workdir: bool = field(default=False, init=False, repr=False)
    _etcd_data: Path | None = field(default=None, init=False, repr=False)

    # ---- lifecycle ---------------------------------------------------------

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> Cluster:
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="kbatch-e2e-"))
            self._own_workdir = True
        try:
            return self._start(self.workdir)
        except BaseException:
            self.stop(keep=True)
            raise

    def stop(self, keep: bool = False) -> None:
        """Stop the processes (controller manager, apiserver, etcd) and clean up."""
        for proc in reversed(self._procs):
            if proc.popen.poll() is None:
                proc.popen.send_signal(signal.SIGTERM)
                try:
                    proc.popen.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.popen.kill()
                    proc.popen.wait()
            proc.handle.close()
        self._procs.clear()
        keep_all = bool(os.environ.get(KEEP_ENV))
        if self._etcd_data is not None and not keep_all:  # memory, not disk: always freed
            shutil.rmtree(self._etcd_data, ignore_errors=True)
        if self._own_workdir and self.workdir is not None and not (keep or keep_all):
            shutil.rmtree(self.workdir, ignore_errors=True)

    # ---- start-up ------------------------------------------------------------

    def _start(self, work: Path) -> Cluster:
        pki = work / "pki"
        pki.mkdir(mode=0o700, parents=True, exist_ok=True)
        sa_key = pki / "sa.key"
        _openssl("genrsa", "-out", str(sa_key), "2048")
        # A client CA: client certificates it signs authenticate (besides the
        # tokens), and the controller manager signs CSRs with it.
        client_ca, client_ca_key = pki / "client-ca.crt", pki / "client-ca.key"
        _openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "7",
            "-subj", "/CN=kbatch-e2e-client-ca",
            "-keyout", str(client_ca_key), "-out", str(client_ca),
        )  # fmt: skip

        front_proxy = _front_proxy_certs(pki / "front-proxy")

        admin_token = secrets.token_hex(16)
        cm_token = secrets.token_hex(16)
        tokens = work / "tokens.csv"
        tokens.write_text(
            f'{admin_token},{ADMIN_USER},{ADMIN_USER},"{MASTERS}"\n'
            f'{cm_token},{CM_USER},{CM_USER},"{MASTERS}"\n'
        )
        tokens.chmod(0o600)

        # etcd: its data on tmpfs when there is one (fsyncs are most of its cost).
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK):
            self._etcd_data = Path(tempfile.mkdtemp(prefix="kbatch-e2e-etcd-", dir=shm))
            etcd_data = self._etcd_data
        else:
            etcd_data = work / "etcd"
        etcd_port, peer_port, api_port = free_ports(3)
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        etcd = self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=default",
                f"--data-dir={etcd_data}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--initial-cluster-state=new",
            ],
        )
        self._wait(etcd, lambda: _etcd_healthy(etcd_url))

        server = f"https://127.0.0.1:{api_port}"
        api_certs = pki / "apiserver"
        ca_file = api_certs / "apiserver.crt"  # self-signed: serving cert + its CA
        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                # No plain-HTTP port (1.20 opens 127.0.0.1:8080 unless told; 1.24
                # removed the flag with the port).
                *when_accepted(self.binaries.kube_apiserver, "--insecure-port=0"),
                f"--cert-dir={api_certs}",
                f"--token-auth-file={tokens}",
                f"--client-ca-file={client_ca}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-issuer={SA_ISSUER}",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                # No kubelet: pods need no service-account token secret, and new
                # Nodes get no not-ready taint that only node-lifecycle would lift.
                "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
                *aggregation_args(front_proxy),
                *gang_api_args(self.binaries.kube_apiserver),
                *self.extra_apiserver_args,
            ],
        )
        self._wait(apiserver, lambda: _https_ok(f"{server}/readyz", ca_file, admin_token))

        kubeconfig = work / "kubeconfig"
        _write_kubeconfig(kubeconfig, server, ca_file, ADMIN_USER, admin_token)

        cm_bin = self.binaries.kube_controller_manager
        if cm_bin is not None:
            cm_kubeconfig = work / "controller-manager.kubeconfig"
            _write_kubeconfig(cm_kubeconfig, server, ca_file, CM_USER, cm_token)
            cm = self._spawn(
                "kube-controller-manager",
                [
                    str(cm_bin),
                    f"--kubeconfig={cm_kubeconfig}",
                    # No serving at all (no health port to collide on, no delegated
                    # authentication to configure): readiness is seen through the API.
                    "--secure-port=0",
                    *when_accepted(cm_bin, "--port=0"),  # the insecure port, before 1.24
                    "--controllers=*,-nodelifecycle",
                    "--leader-elect=false",
                    f"--service-account-private-key-file={sa_key}",
                    f"--root-ca-file={ca_file}",
                    f"--cluster-signing-cert-file={client_ca}",
                    f"--cluster-signing-key-file={client_ca_key}",
                ],
            )
            # The controllers run once the service-account controller has made
            # the default namespace's "default" account.
            default_sa = f"{server}/api/v1/namespaces/default/serviceaccounts/default"
            self._wait(cm, lambda: _https_ok(default_sa, ca_file, admin_token))

        return Cluster(kubeconfig, cm_bin is not None, front_proxy.ca)

    def _spawn(self, name: str, argv: list[str]) -> _Proc:
        assert self.workdir is not None
        log = self.workdir / f"{name}.log"
        handle = log.open("ab")
        handle.write(f"$ {' '.join(argv)}\n".encode())
        handle.flush()
        try:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=handle,
                stderr=subprocess.STDOUT,
                cwd=self.workdir,
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,
            )
        except OSError:
            handle.close()
            raise
        proc = _Proc(name, popen, log, handle)
        self._procs.append(proc)
        return proc

    def _wait(self, proc: _Proc, ready: Callable[[], bool]) -> None:
        """Poll ``ready`` until it holds, the process exits, or the deadline passes."""
        deadline = time.monotonic() + self.start_timeout
        delay = 0.05
        while True:
            code = proc.popen.poll()
            if code is not None:
                raise StartError(self._report(f"{proc.name} exited with status {code}"))
            if ready():
                return
            if time.monotonic() > deadline:
                raise StartError(
                    self._report(f"{proc.name} not ready after {self.start_timeout:.0f}s")
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    def _report(self, what: str) -> str:
        parts = [f"e2e control plane: {what} (logs kept in {self.workdir})"]
        for proc in self._procs:
            proc.handle.flush()
            parts.append(f"--- last lines of {proc.log} ---\n{tail(proc.log)}")
        return "\n".join(parts)

    def logs(self) -> Iterator[Path]:
        return (p.log for p in self._procs)


def _openssl(*args: str) -> None:
    exe = shutil.which("openssl")
    if exe is None:
        raise StartError("e2e control plane: openssl is needed to make the service-account key")
    subprocess.run([exe, *args], check=True, capture_output=True)


@dataclass(frozen=True)
class FrontProxyCerts:
    ca: Path
    client_cert: Path
    client_key: Path


def _front_proxy_certs(folder: Path) -> FrontProxyCerts:
    """A front-proxy CA and the client certificate it signs for the API server."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca, ca_key = folder / "ca.crt", folder / "ca.key"
    cert, key, csr = folder / "client.crt", folder / "client.key", folder / "client.csr"
    extensions = folder / "client.ext"
    extensions.write_text(
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"
    )
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "7",
        "-subj", "/CN=kbatch-e2e-front-proxy-ca", "-keyout", str(ca_key), "-out", str(ca),
    )  # fmt: skip
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={FRONT_PROXY_CLIENT}",
        "-keyout", str(key), "-out", str(csr),
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key),
        "-CAcreateserial", "-days", "7", "-extfile", str(extensions), "-out", str(cert),
    )  # fmt: skip
    return FrontProxyCerts(ca, cert, key)


def aggregation_args(front_proxy: FrontProxyCerts) -> list[str]:
    """kube-apiserver's flags for API aggregation (every supported release knows them)."""
    return [
        f"--requestheader-client-ca-file={front_proxy.ca}",
        f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
        "--requestheader-username-headers=X-Remote-User",
        "--requestheader-group-headers=X-Remote-Group",
        "--requestheader-extra-headers-prefix=X-Remote-Extra-",
        f"--proxy-client-cert-file={front_proxy.client_cert}",
        f"--proxy-client-key-file={front_proxy.client_key}",
        # No kube-proxy: the API server calls an APIService's (and a webhook's)
        # Service at its endpoints.
        "--enable-aggregator-routing=true",
    ]


def host_ipv4() -> str | None:
    """This machine's first IPv4 address that is not loopback (the one on its default
    route, else one its host name resolves to), or None: the address at which the API
    server reaches a process here through a Service's endpoints."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: a route is chosen
            candidates = [str(probe.getsockname()[0])]
        except OSError:
            candidates = []
    with contextlib.suppress(OSError):
        candidates += socket.gethostbyname_ex(socket.gethostname())[2]
    return next((a for a in candidates if not a.startswith(("127.", "0."))), None)


def _etcd_healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
            body = json.loads(resp.read() or b"{}")
    except (OSError, ValueError):
        return False
    return str(body.get("health")) == "true"


def _https_ok(url: str, ca_file: Path | None, token: str | None) -> bool:
    """GET ``url``; True on HTTP 200. ``ca_file=None`` skips verification
    (the controller manager's own self-signed serving cert)."""
    if ca_file is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif not ca_file.is_file():
        return False  # the apiserver has not written its certificate yet
    else:
        ctx = ssl.create_default_context(cafile=str(ca_file))
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=3, context=ctx) as resp:
            resp.read()
            return bool(resp.status == 200)
    except (OSError, ssl.SSLError, urllib.error.HTTPError):
        return False


def _write_kubeconfig(path: Path, server: str, ca_file: Path, user: str, token: str) -> None:
    """JSON is YAML: kubectl and the Python client both read it."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "kbatch-e2e",
                "cluster": {"server": server, "certificate-authority": str(ca_file)},
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "kbatch-e2e", "context": {"cluster": "kbatch-e2e", "user": user}}],
        "current-context": "kbatch-e2e",
    }
    path.write_text(json.dumps(config, indent=2) + "\n")
    path.chmod(0o600)
