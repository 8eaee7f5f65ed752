"""Admission of one object as the API server orders it: mutating, then validating on the
mutated object. For callers that play the API server themselves (the simulator)."""

from collections.abc import Mapping
from typing import Any

from kbatch.api import API_VERSION
from kbatch.webhooks.admission import job, jobsetgroup, podgroup, queue, result
from kbatch.webhooks.admission.result import Admission
from kbatch.webhooks.admission.view import ClusterView


def admit(
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    view: ClusterView,
    suspend_supported: bool = True,
) -> Admission:
    """A create (``old`` None) or update of ``obj``; objects kbatch does not check pass."""
    kind, api_version = obj.get("kind"), obj.get("apiVersion")
    if kind == "PodGroup" and api_version == API_VERSION:
        mutated = podgroup.mutate(obj, old, view)
        if not mutated.allowed:
            return mutated
        return mutated.then(podgroup.validate(mutated.applied_to(obj), old, view))
    if kind == "Queue" and api_version == API_VERSION:
        return queue.validate(obj, view)
    if kind == "Job" and api_version == "batch/v1" and old is None:
        return job.mutate(obj, view, suspend_supported)
    if kind == jobsetgroup.KIND and api_version == jobsetgroup.API_VERSION and old is None:
        return jobsetgroup.mutate(obj, view, suspend_supported)
    return result.allow()
