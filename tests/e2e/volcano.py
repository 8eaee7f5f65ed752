"""Volcano's controller-manager for the e2e tests: its CRDs installed and its Job
controller running against the test control plane, from the files
``scripts/provision-bench-peers.sh`` caches (``KBATCH_VOLCANO_ASSETS`` names the
release's folder, the one holding ``bin/``; else ``~/.cache/kbatch/volcano/v1.15.1``).

Only the Job controller runs (``--controllers=job-controller``), with leader election
off: it turns a ``batch.volcano.sh/v1alpha1`` Job into a Volcano PodGroup, makes the
pods once the scheduler has set the group Inqueue, and keeps the Job's status from its
pods. Volcano's admission webhooks do not run, so a test writes the fields their
defaulting would have set (``schedulerName``, ``minAvailable``, ``queue``).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from e2e import jobset
from e2e.cluster_backend import delete, exists
from kbatch.kubeapi import ApiError, request

ASSETS_ENV = "KBATCH_VOLCANO_ASSETS"
VERSION = "v1.15.1"  # VOLCANO_VERSION of scripts/provision-bench-peers.sh
CONTROLLER = "bin/vc-controller-manager"
CONF = "conf/volcano-scheduler.conf"  # the scheduler conf Volcano's chart installs
# What the Job controller watches: its Jobs and Commands, the PodGroups and Queues.
CRD_FILES = (
    "controller-crd/batch.volcano.sh_jobs.yaml",
    "controller-crd/bus.volcano.sh_commands.yaml",
    "crd/scheduling.volcano.sh_podgroups.yaml",
    "crd/scheduling.volcano.sh_queues.yaml",
)
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
JOBS = "/apis/batch.volcano.sh/v1alpha1/namespaces/{namespace}/jobs"
POD_GROUPS = "/apis/scheduling.volcano.sh/v1beta1/namespaces/{namespace}/podgroups"
QUEUES = "/apis/scheduling.volcano.sh/v1beta1/queues"
TIMEOUT = 60.0


class Unavailable(Exception):
    """Volcano's controller-manager or CRDs cannot be had here; the message says why."""


def assets() -> Path:
    """The release's folder (``bin/``, ``crd/``, ``controller-crd/``, ``conf/``), or
    Unavailable."""
    named = os.environ.get(ASSETS_ENV)
    cache = Path(os.environ.get("KBATCH_CACHE", Path.home() / ".cache/kbatch"))
    folder = Path(named).expanduser() if named else cache / "volcano" / VERSION
    for name in (CONTROLLER, CONF, *CRD_FILES):
        if not (folder / name).is_file():
            raise Unavailable(
                f"no Volcano {VERSION} {name} under {folder} (scripts/provision-bench-peers.sh "
                f"builds it from a git repository of volcano-sh/volcano, KBATCH_VOLCANO_GIT_DIR)"
            )
    return folder


@contextlib.contextmanager
def installed_crds(api: Any, folder: Path) -> Iterator[None]:
    """Volcano's CRDs, created (or replaced) and Established; deleted after, and waited
    for until gone, so that a later test can install its own."""
    names = []
    for file in CRD_FILES:
        crd = yaml.safe_load((folder / file).read_text())
        name = crd["metadata"]["name"]
        names.append(name)
        try:
            request(api, "POST", CRDS, crd)
        except ApiError as exc:
            if exc.status != 409:
                raise
            current = request(api, "GET", f"{CRDS}/{name}")
            crd["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            request(api, "PUT", f"{CRDS}/{name}", crd)
    try:
        _wait("Volcano's CRDs Established", lambda: all(_established(api, n) for n in names))
        yield
    finally:
        for name in names:
            delete(api, f"{CRDS}/{name}")
        _wait("Volcano's CRDs gone", lambda: not any(exists(api, f"{CRDS}/{n}") for n in names))


def _established(api: Any, name: str) -> bool:
    conditions = (request(api, "GET", f"{CRDS}/{name}").get("status") or {}).get("conditions")
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions or [])


def _wait(what: str, done: Any) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"e2e: {what}: not after {TIMEOUT:.0f}s")
        time.sleep(0.2)


class Controller(jobset.Controller):
    """Volcano's controller-manager running (its process and its log)."""

    def check_alive(self) -> None:
        """AssertionError with the end of its log if the controller has exited."""
        if self.popen.poll() is not None:
            tail = self.output()[-3000:]
            raise AssertionError(f"vc-controller-manager exited ({self.popen.returncode}):\n{tail}")


def argv(folder: Path, kubeconfig: Path, scheduler_name: str) -> list[str]:
    """The controller-manager's command line: the Job controller alone, no leader
    election, the pods it handles those of ``scheduler_name``."""
    return [
        str(folder / CONTROLLER),
        f"--kubeconfig={kubeconfig}",
        "--controllers=job-controller",
        "--leader-elect=false",
        f"--scheduler-name={scheduler_name}",
        "-v=2",
    ]


@contextlib.contextmanager
def controller(
    folder: Path, kubeconfig: Path, scheduler_name: str, work: Path
) -> Iterator[Controller]:
    """Volcano's Job controller running against the cluster of ``kubeconfig``."""
    log = work / "vc-controller-manager.log"
    with log.open("wb") as out:
        popen = subprocess.Popen(
            argv(folder, kubeconfig, scheduler_name), stdout=out, stderr=subprocess.STDOUT
        )
    running = Controller(popen, log)
    try:
        time.sleep(0.5)
        running.check_alive()
        yield running
    finally:
        running.stop()
