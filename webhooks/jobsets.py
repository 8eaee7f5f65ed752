"""What admission knows of JobSets (``jobset.x-k8s.io``, DESIGN §15): the JobSet index
(kopf's, of the JobSets kbatch makes a PodGroup for, by that group, which the release
side reads) and the JobSet webhook, ``mutate-jobset``, decided by
``admission.jobsetgroup``. ``register`` adds both; where JobSet's CRD is not installed
kopf serves neither (it notices the CRD when it comes) and the API server never calls
the webhook.

Releasing held JobSets is a controller's job: ``kbatch.operators.jobs.jobsets``.
"""

import types
from collections.abc import Mapping
from typing import Any

import kopf

from kbatch.webhooks import configuration, jobs, review
from kbatch.webhooks.admission import job, jobgroup, jobsetgroup
from kbatch.webhooks.admission.view import StateView

Object = dict[str, Any]
JobSetIndex = Mapping[tuple[str, str], Any]  # kopf's store: one JobSet per key, as a list
NO_JOBSETS: JobSetIndex = types.MappingProxyType({})


def slim_jobset(body: Mapping[str, Any], namespace: str, name: str) -> Object:
    """What the index keeps of a JobSet: enough to make its PodGroup and release it."""
    meta = body.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    held = {job.HELD_ANNOTATION: annotations[job.HELD_ANNOTATION]} if job.is_held(body) else {}
    spec = body.get("spec") or {}
    return {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": meta.get("uid"),
            "annotations": held,
            "labels": {jobgroup.QUEUE_LABEL: jobgroup.queue_of(body)},
        },
        "spec": {"suspend": spec.get("suspend"), "replicatedJobs": spec.get("replicatedJobs")},
        "status": {"conditions": (body.get("status") or {}).get("conditions") or []},
    }


def register(
    registry: kopf.OperatorRegistry, runtime: review.Runtime, delayed: jobs.DelayedPodCreation
) -> None:
    """The JobSet index and the JobSet webhook. ``delayed``: whether Jobs (so JobSets'
    Jobs) can be held."""

    @kopf.index(
        jobsetgroup.GROUP,
        jobsetgroup.VERSION,
        jobsetgroup.RESOURCE,
        id="jobsets_by_group",
        labels={jobgroup.QUEUE_LABEL: kopf.PRESENT},
        registry=registry,
    )
    def jobsets_by_group(
        body: kopf.Body, namespace: str | None, name: str, **_: Any
    ) -> dict[tuple[str, str], Object] | None:
        if not jobsetgroup.makes_group(body, runtime.state.scheduler_names):
            return None
        namespace = namespace or "default"
        return {(namespace, name): slim_jobset(body, namespace, name)}

    @kopf.on.mutate(
        jobsetgroup.GROUP,
        jobsetgroup.VERSION,
        jobsetgroup.RESOURCE,
        id=configuration.MUTATE_JOBSET,
        operations=["CREATE"],
        ignore_failures=True,
        registry=registry,
    )
    async def mutate_jobset(
        body: kopf.Body, patch: kopf.Patch, warnings: list[str], **_: Any
    ) -> None:
        if jobgroup.queue_of(body) is None:
            return
        hold = bool(delayed.supported) and runtime.synced()  # unsure of the group: never hold
        review.respond(
            jobsetgroup.mutate(dict(body), StateView(runtime.state), hold), warnings, patch
        )
