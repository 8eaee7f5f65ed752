"""What admission knows of batch/v1 Jobs (DESIGN §6-§7): the Job index (a kopf index of
kbatch's Jobs by PodGroup, which the PodGroup webhooks read too) and its entries, a view
of the scheduler's state with the index's pod templates, whether Jobs can be held at all
(Job ``spec.suspend`` needs Kubernetes 1.22; learned from the API server's version), and
the Job webhook, ``mutate-job`` (delayed pod creation, decided by ``admission.job``).
``register`` (called by the server) adds the index and the Job handler.

Releasing held Jobs is a controller's job: ``kbatch.operators.jobs``.
"""

import logging
import types
from collections.abc import Mapping, Sequence
from typing import Any

import kopf

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.webhooks import configuration, review
from kbatch.webhooks.admission import job
from kbatch.webhooks.admission.view import StateView

log = logging.getLogger("kbatch.webhooks")

VERSION_TIMEOUT_SECONDS = 5.0
VERSION_RETRY_MAX_SECONDS = 60.0
SUSPEND_SINCE = (1, 22)  # Job spec.suspend: alpha in 1.21 (feature gate off), beta on in 1.22
Object = dict[str, Any]
JobIndex = Mapping[tuple[str, str], Sequence[Object]]
NO_JOBS: JobIndex = types.MappingProxyType({})


def job_suspend_support(api: kubeapi.ApiClient) -> tuple[bool | None, str]:
    """Whether the API server keeps Job ``spec.suspend``, and if not, why (one line);
    None when its version could not be read (ask again later)."""
    try:
        version = kubeapi.request(api, "GET", "/version", timeout=VERSION_TIMEOUT_SECONDS)
        major = int(str(version.get("major", "0")).rstrip("+"))
        minor = int(str(version.get("minor", "0")).rstrip("+"))
    except (kubeapi.ApiError, ValueError) as exc:
        return None, f"the API server's version could not be read ({exc})"
    name = version.get("gitVersion") or f"{major}.{minor}"
    if (major, minor) >= SUSPEND_SINCE:
        return True, ""
    if (major, minor) == (1, 21):
        return False, f"Kubernetes {name} has Job spec.suspend only behind the SuspendJob gate"
    return False, f"Kubernetes {name} has no Job spec.suspend (it came in 1.21)"


class DelayedPodCreation:
    """Whether Jobs are held (None: not known yet), from the API server's version. A
    version that could not be read is asked again, backing off, until it is: a passing
    failure at start must not turn delayed pod creation off for the process's life."""

    def __init__(self) -> None:
        self.supported: bool | None = None
        self._next_try = 0.0
        self._delay = 1.0

    def learn(self, api: Any, now: float) -> None:
        if self.supported is not None or now < self._next_try:
            return
        self.supported, why = job_suspend_support(api)
        if self.supported is None:
            self._next_try, self._delay = (
                now + self._delay,
                min(self._delay * 2, VERSION_RETRY_MAX_SECONDS),
            )
            log.warning(
                "Jobs are not held until kbatch knows whether the API server has Job "
                "spec.suspend: %s; asking again",
                why,
            )
        elif not self.supported:
            log.warning(
                "delayed pod creation is unavailable: %s; Jobs are created as they are "
                "(their pods are still scheduled as gangs)",
                why,
            )


def slim_job(body: kopf.Body, namespace: str, name: str) -> Object:
    """What the index keeps of a Job: enough to fill minResources, to decide whether to
    hold it or its siblings, and to release it."""
    annotations = body.get("metadata", {}).get("annotations") or {}
    held = {job.HELD_ANNOTATION: annotations[job.HELD_ANNOTATION]} if job.is_held(body) else {}
    spec = body.get("spec") or {}
    return {
        "metadata": {"name": name, "namespace": namespace, "annotations": held},
        "spec": {
            "suspend": spec.get("suspend"),
            "parallelism": spec.get("parallelism"),
            "completions": spec.get("completions"),
            "template": spec.get("template") or {},
        },
    }


def index_view(state: ClusterState, index: JobIndex) -> StateView:
    """The scheduler's state, with the pod templates of the index's Jobs."""
    return StateView(state, lambda namespace, group: list(index.get((namespace, group), ())))


def register(
    registry: kopf.OperatorRegistry, runtime: review.Runtime, delayed: DelayedPodCreation
) -> None:
    """The Job index and the Job handler. ``delayed``: whether Jobs are held."""

    @kopf.index("batch", "v1", "jobs", registry=registry)
    def jobs_by_group(
        body: kopf.Body, namespace: str | None, name: str, **_: Any
    ) -> dict[tuple[str, str], Object] | None:
        group = job.kbatch_group_of(body, runtime.state.scheduler_names)
        namespace = namespace or "default"
        return None if group is None else {(namespace, group): slim_job(body, namespace, name)}

    @kopf.on.mutate(
        "batch",
        "v1",
        "jobs",
        id=configuration.MUTATE_JOB,
        operations=["CREATE"],
        ignore_failures=True,
        registry=registry,
    )
    async def mutate_job(
        body: kopf.Body,
        patch: kopf.Patch,
        warnings: list[str],
        jobs_by_group: JobIndex = NO_JOBS,
        **_: Any,
    ) -> None:
        if job.group_of(body) is None:
            return
        hold = bool(delayed.supported) and runtime.synced()  # unsure of the group: never hold
        view = index_view(runtime.state, jobs_by_group)
        review.respond(job.mutate(dict(body), view, hold), warnings, patch)
