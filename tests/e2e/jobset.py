"""JobSet (``jobset.x-k8s.io``) for the e2e tests: its CRD installed and its controller
running against the test control plane, from the files ``scripts/provision-jobset.sh``
caches (``KBATCH_JOBSET_ASSETS`` names the folder; else the newest under
``~/.cache/kbatch/jobset``).

JobSet's controller normally serves its own admission webhooks with certificates
from its cert rotator (or cert-manager). Here it runs with internal cert
management off (its Configuration file), its webhook server on a free local port
with a throw-away self-signed certificate (it will not start without one), and
its webhooks never registered with the API server: JobSets reach it as the user
wrote them, so the tests write the fields its defaulting webhook would have set
(``filled``). Metrics and health probes are off.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e.controlplane import free_ports
from kbatch.kubeapi import ApiError, request

ASSETS_ENV = "KBATCH_JOBSET_ASSETS"
CONTROLLER = "jobset-controller"
CRD_FILE = "jobset.x-k8s.io_jobsets.yaml"
CRD_NAME = "jobsets.jobset.x-k8s.io"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets"
START_TIMEOUT = 60.0


class Unavailable(Exception):
    """JobSet's CRD or controller cannot be had here; the message says why (one line)."""


def assets() -> Path:
    """The folder with JobSet's controller and CRD, or Unavailable saying why."""
    named = os.environ.get(ASSETS_ENV)
    if named:
        folder = Path(named).expanduser()
    else:
        cache = Path(os.environ.get("KBATCH_CACHE", Path.home() / ".cache/kbatch")) / "jobset"
        found = sorted(cache.glob("v*/bin"), key=lambda p: _version_key(p.parent.name))
        if not found:
            raise Unavailable(
                f"no JobSet controller under {cache} (run scripts/provision-jobset.sh, "
                f"or set {ASSETS_ENV})"
            )
        folder = found[-1]
    for name in (CONTROLLER, CRD_FILE):
        if not (folder / name).is_file():
            raise Unavailable(f"{folder} has no {name} (run scripts/provision-jobset.sh)")
    return folder


def install_crd(api: Any, folder: Path) -> None:
    """JobSet's CRD, applied and Established."""
    crd = yaml.safe_load((folder / CRD_FILE).read_text())
    try:
        request(api, "POST", CRDS, crd)
    except ApiError as exc:
        if exc.status != 409:
            raise
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        status = request(api, "GET", f"{CRDS}/{CRD_NAME}").get("status") or {}
        if any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in status.get("conditions") or []
        ):
            return
        if time.monotonic() > deadline:
            raise Unavailable(
                f"JobSet's CRD {CRD_NAME} was not Established in {START_TIMEOUT:.0f}s"
            )
        time.sleep(0.2)


@dataclass
class Controller:
    popen: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


@contextlib.contextmanager
def controller(folder: Path, kubeconfig: Path, work: Path) -> Iterator[Controller]:
    """JobSet's controller running against the cluster of ``kubeconfig`` (see the
    module's docstring for how it runs without its webhooks)."""
    certs = work / "certs"
    certs.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-keyout", str(certs / "tls.key"),
         "-out", str(certs / "tls.crt")],
        check=True, capture_output=True,
    )  # fmt: skip
    (port,) = free_ports(1)
    config = work / "jobset-config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
                "kind": "Configuration",
                "internalCertManagement": {"enable": False},
                "leaderElection": {"leaderElect": False},
                "webhook": {"port": port, "host": "127.0.0.1", "certDir": str(certs)},
                "metrics": {"bindAddress": "0"},
                "health": {"healthProbeBindAddress": "0"},
            }
        )
    )
    log = work / "jobset-controller.log"
    argv = [str(folder / CONTROLLER), f"--config={config}", f"--kubeconfig={kubeconfig}"]
    with log.open("wb") as out:
        popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    running = Controller(popen, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while "Starting workers" not in running.output():
            if popen.poll() is not None:
                tail = running.output()[-2000:]
                raise Unavailable(f"JobSet's controller exited ({popen.returncode}): {tail}")
            if time.monotonic() > deadline:
                raise Unavailable(f"JobSet's controller did not start in {START_TIMEOUT:.0f}s")
            time.sleep(0.2)
        yield running
    finally:
        running.stop()


def filled(jobset: dict[str, Any]) -> dict[str, Any]:
    """``jobset`` with what JobSet's defaulting webhook (not running here) sets."""
    spec = jobset["spec"]
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    spec.setdefault("network", {"enableDNSHostnames": True, "publishNotReadyAddresses": True})
    for entry in spec["replicatedJobs"]:
        job_spec = entry["template"]["spec"]
        job_spec.setdefault("completionMode", "Indexed")
        job_spec["template"]["spec"].setdefault("restartPolicy", "OnFailure")
    return jobset


def _version_key(name: str) -> tuple[int, ...]:
    parts = name.lstrip("v").split(".")
    return tuple(int(p) if p.isdigit() else -1 for p in parts)
