"""The PodGroup webhooks (DESIGN §7): ``mutate-podgroup`` fills ``spec.minResources``
from the group's Job and checks the namespace's ResourceQuotas; ``validate-podgroup``
checks minMember and the Queue. The decisions are ``admission.podgroup``'s; this module
gathers what they read — the group's Jobs from the Job index, else listed from the API
server — and registers the handlers (``register``, called by the server).
"""

import asyncio
import logging
import urllib.parse
from collections.abc import Sequence
from typing import Any

import kopf

from kbatch import kubeapi
from kbatch.api import GROUP, VERSION
from kbatch.webhooks import configuration, jobs, review
from kbatch.webhooks.admission import job, podgroup
from kbatch.webhooks.review import Budget, Object, Runtime

log = logging.getLogger("kbatch.webhooks")


def register(registry: kopf.OperatorRegistry, runtime: Runtime) -> None:
    """The PodGroup handlers; they read the Job index ``jobs.register`` adds."""

    @kopf.on.mutate(
        GROUP,
        VERSION,
        "podgroups",
        id=configuration.MUTATE_POD_GROUP,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )
    async def mutate_pod_group(
        body: kopf.Body,
        patch: kopf.Patch,
        warnings: list[str],
        old: kopf.Body | None = None,
        jobs_by_group: jobs.JobIndex = jobs.NO_JOBS,
        **_: Any,
    ) -> None:
        budget = Budget(review.REVIEW_SECONDS)
        await review.wait_synced(runtime, budget)
        obj = dict(body)
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        group_jobs: Sequence[Object] = ()
        malformed = not isinstance(meta, dict) or not isinstance(spec, dict)  # mutate says so
        if not malformed and spec.get("minResources") is None:
            namespace = str(meta.get("namespace") or "default")
            name = str(meta.get("name"))
            group_jobs = await _group_jobs(runtime, jobs_by_group, namespace, name, budget)
        view = await review.view(runtime, budget, group_jobs=group_jobs)
        review.respond(podgroup.mutate(obj, review.as_dict(old), view), warnings, patch)

    @kopf.on.validate(
        GROUP,
        VERSION,
        "podgroups",
        id=configuration.VALIDATE_POD_GROUP,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )
    async def validate_pod_group(
        body: kopf.Body, warnings: list[str], old: kopf.Body | None = None, **_: Any
    ) -> None:
        budget = Budget(review.REVIEW_SECONDS)
        await review.wait_synced(runtime, budget)
        obj = dict(body)
        spec, meta = obj.get("spec"), obj.get("metadata")
        queue_name = spec.get("queue") if isinstance(spec, dict) else None  # validate says so
        namespace = meta.get("namespace") if isinstance(meta, dict) else None
        view = await review.view(
            runtime, budget, queue_name=queue_name, namespace=str(namespace or "default")
        )
        review.respond(podgroup.validate(obj, review.as_dict(old), view), warnings)


async def _group_jobs(
    runtime: Runtime, index: jobs.JobIndex, namespace: str, group: str, budget: Budget
) -> Sequence[Object]:
    """The group's Jobs: from the index, else (a Job the watch has not brought yet) listed
    by the label the Job webhook gives them, when the review has time for it."""
    found = list(index.get((namespace, group), ()))
    if found:
        return found
    timeout = budget.lookup_timeout()
    if not timeout:
        log.warning("no time left to list the Jobs of PodGroup %s/%s", namespace, group)
        return ()
    try:
        return await asyncio.to_thread(_listed_jobs, runtime, namespace, group, timeout)
    except Exception as exc:  # minResources stays unset; admission goes on
        log.warning("could not list the Jobs of PodGroup %s/%s: %s", namespace, group, exc)
        return ()


def _listed_jobs(runtime: Runtime, namespace: str, group: str, timeout: float) -> list[Object]:
    query = urllib.parse.urlencode({"labelSelector": f"{job.GROUP_LABEL}={group}"})
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs?{query}"
    listed = kubeapi.request(runtime.api, "GET", path, timeout=timeout)
    names = runtime.state.scheduler_names
    return [item for item in listed.get("items") or [] if job.kbatch_group_of(item, names) == group]
