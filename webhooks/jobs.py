"""What admission knows of batch/v1 Jobs (DESIGN §6-§7): the Job index (a kopf index of
kbatch's Jobs by PodGroup, which the PodGroup webhooks read too) and its entries, a view
of the scheduler's state with the index's pod templates, whether Jobs can be held at all
(Job ``spec.suspend``, learned from the schema the API server serves), and
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
from kbatch.webhooks.admission import job, jobgroup
from kbatch.webhooks.admission.view import StateView

log = logging.getLogger("kbatch.webhooks")

SCHEMA_TIMEOUT_SECONDS = 30.0  # the whole OpenAPI v2 document, where v3 is not served
RETRY_MAX_SECONDS = 60.0
JOB_SPEC = "io.k8s.api.batch.v1.JobSpec"  # the schema's name for batch/v1 JobSpec
BATCH_V1 = "apis/batch/v1"  # its document in the OpenAPI v3 index
Object = dict[str, Any]
JobIndex = Mapping[tuple[str, str], Sequence[Object]]
NO_JOBS: JobIndex = types.MappingProxyType({})


def job_suspend_support(api: kubeapi.ApiClient) -> tuple[bool | None, str]:
    """Whether the API server keeps Job ``spec.suspend``, and if not, why (one line);
    None when its schema could not be read (ask again later).

    Read from the OpenAPI schema the server serves: v3's batch/v1 document where v3 is
    served, else the whole v2 document. (A schema names its fields whatever the feature
    gates: Kubernetes 1.21 with its SuspendJob gate off lists the field and drops it, and
    its Jobs then run at once, as with delayed pod creation off.)"""
    try:
        spec = job_spec_schema(api)
    except (kubeapi.ApiError, ValueError, AttributeError) as exc:
        return None, f"the API server's OpenAPI schema could not be read ({exc})"
    if spec is None:
        return False, f"{_server_name(api)} serves no batch/v1 Job"
    if "suspend" in (spec.get("properties") or {}):
        return True, ""
    return False, f"{_server_name(api)} has no Job spec.suspend (Kubernetes 1.21 brought it)"


def job_spec_schema(api: kubeapi.ApiClient) -> Object | None:
    """The API server's schema of batch/v1 JobSpec; None when it serves no batch/v1."""
    try:
        index = kubeapi.request(api, "GET", "/openapi/v3", timeout=SCHEMA_TIMEOUT_SECONDS)
    except kubeapi.ApiError as exc:
        if exc.status != 404:
            raise
        # No OpenAPI v3 (before Kubernetes 1.24, unless its gate was on): the v2 document.
        whole = kubeapi.request(api, "GET", "/openapi/v2", timeout=SCHEMA_TIMEOUT_SECONDS)
        return (whole.get("definitions") or {}).get(JOB_SPEC)
    batch = (index.get("paths") or {}).get(BATCH_V1)
    if batch is None:
        return None
    path = batch.get("serverRelativeURL") or f"/openapi/v3/{BATCH_V1}"
    document = kubeapi.request(api, "GET", path, timeout=SCHEMA_TIMEOUT_SECONDS)
    return ((document.get("components") or {}).get("schemas") or {}).get(JOB_SPEC)


def _server_name(api: kubeapi.ApiClient) -> str:
    """The API server as people know it, for messages: its release, where it says."""
    try:
        version = kubeapi.request(api, "GET", "/version", timeout=5)
    except kubeapi.ApiError:
        return "the API server"
    release = version.get("gitVersion")
    return f"the API server (Kubernetes {release})" if release else "the API server"


class DelayedPodCreation:
    """Whether Jobs are held (None: not known yet), from the API server's schema. A
    schema that could not be read is asked again, backing off, until it is: a passing
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
                min(self._delay * 2, RETRY_MAX_SECONDS),
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
    hold it or its siblings, to release it, and to make its PodGroup (its uid and queue
    label)."""
    meta = body.get("metadata", {})
    annotations = meta.get("annotations") or {}
    held = {job.HELD_ANNOTATION: annotations[job.HELD_ANNOTATION]} if job.is_held(body) else {}
    queue = jobgroup.queue_of(body)
    labels = {} if queue is None else {jobgroup.QUEUE_LABEL: queue}  # its PodGroup is made
    spec = body.get("spec") or {}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": meta.get("uid"),
            "annotations": held,
            "labels": labels,
        },
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

    # kopf hands an index to handlers as the keyword its id names; without an id it would
    # be "register.<locals>.jobs_by_group", and every reader would get its empty default.
    @kopf.index("batch", "v1", "jobs", id="jobs_by_group", registry=registry)
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
        if job.group_of(body) is None and jobgroup.queue_of(body) is None:
            return
        hold = bool(delayed.supported) and runtime.synced()  # unsure of the group: never hold
        view = index_view(runtime.state, jobs_by_group)
        review.respond(job.mutate(dict(body), view, hold), warnings, patch)
