"""The PodGroup operator.

A new PodGroup shows ``phase: Pending`` at once (kube-batch's groups had an
empty status until the scheduler first saw them). From then on, running,
succeeded and failed counts and the phase rules of DESIGN §2 are kept by the
scheduler's session close (``framework.job_status``), which sees every pod of
every group each period and writes only what changed.

Delayed pod creation: Jobs that the admission webhook created suspended for a
PodGroup not yet admitted are resumed here once they are no longer to be held
(``release_held_jobs``; which ones: ``kbatch.webhooks.admission.job.to_release``),
called by ``kbatch run`` on PodGroup and Job events and by its periodic sweep.
"""

import logging
from collections.abc import Iterable, Mapping
from typing import Any

import urllib3
from kubernetes import client

from kbatch.api import GROUP, VERSION
from kbatch.api.podgroup import PodGroupStatus
from kbatch.operators.scheduler.kube import ApiError, request
from kbatch.webhooks.admission import job as admission

log = logging.getLogger("kbatch.podgroup")

INITIAL_STATUS = PodGroupStatus().model_dump(mode="json", by_alias=True, exclude_none=True)


def needs_initial_status(body: dict[str, Any]) -> bool:
    return not (body.get("status") or {}).get("phase")


def initialise_status(api: client.ApiClient, namespace: str, name: str) -> None:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups/{name}/status"
    try:
        request(api, "PATCH", path, {"status": INITIAL_STATUS}, "application/merge-patch+json")
    except ApiError as exc:
        if exc.status != 404:
            raise


# --------------------------------------------------------------------------- delayed pod creation
# A batch/v1 Job of a PodGroup not admitted yet is created suspended (the webhook,
# ``kbatch.webhooks.admission.job``); once the group is Inqueue it is released here.
JOBS = "/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
VERSION_TIMEOUT_SECONDS = 5.0
SUSPEND_SINCE = (1, 22)  # Job spec.suspend: alpha in 1.21 (feature gate off), beta on in 1.22


def job_suspend_support(api: client.ApiClient) -> tuple[bool | None, str]:
    """Whether the API server keeps Job ``spec.suspend``, and if not, why (one line);
    None when its version could not be read (ask again later)."""
    try:
        version = request(api, "GET", "/version", timeout=VERSION_TIMEOUT_SECONDS)
        major = int(str(version.get("major", "0")).rstrip("+"))
        minor = int(str(version.get("minor", "0")).rstrip("+"))
    except (ApiError, ValueError, OSError, urllib3.exceptions.HTTPError) as exc:
        return None, f"the API server's version could not be read ({exc})"
    name = version.get("gitVersion") or f"{major}.{minor}"
    if (major, minor) >= SUSPEND_SINCE:
        return True, ""
    if (major, minor) == (1, 21):
        return False, f"Kubernetes {name} has Job spec.suspend only behind the SuspendJob gate"
    return False, f"Kubernetes {name} has no Job spec.suspend (it came in 1.21)"


def release_held_jobs(api: client.ApiClient, jobs: Iterable[Mapping[str, Any]]) -> list[str]:
    """Resume Jobs kbatch holds (``admission.to_release`` says which); ``namespace/name``
    of those released. Each patch first tests that the Job is still held as the caller
    saw it, so a Job its owner has changed since is left alone."""
    released = []
    for job in jobs:
        if not admission.is_held(job):
            continue
        meta = job["metadata"]
        namespace = meta.get("namespace") or "default"
        held = meta["annotations"][admission.HELD_ANNOTATION]
        held_path = "/metadata/annotations/" + admission.HELD_ANNOTATION.replace("/", "~1")
        patch = [
            {"op": "test", "path": held_path, "value": held},
            {"op": "remove", "path": held_path},
            {"op": "replace", "path": "/spec/suspend", "value": False},
        ]
        path = JOBS.format(namespace=namespace, name=meta["name"])
        try:
            request(api, "PATCH", path, patch, "application/json-patch+json")
        except ApiError as exc:
            if exc.status not in (404, 409, 422):  # else: gone, or no longer held as seen
                log.warning("could not release held Job %s/%s: %s", namespace, meta["name"], exc)
            continue
        except (OSError, urllib3.exceptions.HTTPError) as exc:  # the next sweep tries again
            log.warning("could not release held Job %s/%s: %s", namespace, meta["name"], exc)
            continue
        released.append(f"{namespace}/{meta['name']}")
    return released
