"""Delayed pod creation (DESIGN §6, §7): a batch/v1 Job whose pod template names a
PodGroup is created suspended while that group is not admitted yet, and released
(``spec.suspend: false``) once the group is Inqueue — so a backlog waits as Jobs,
not as thousands of pending pods.

A Job kbatch holds carries the annotation ``kbatch.io/held`` (saying why); only
such Jobs are ever released, never a Job its owner suspended. Every Job naming a
group also gets the label ``kbatch.io/pod-group`` (when the name fits a label), so
its template can be found when the PodGroup is created (PodGroupMinResources).
"""

from collections.abc import Mapping
from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.api.podgroup import PodGroupPhase
from kbatch.webhooks.admission import result
from kbatch.webhooks.admission.result import Admission, Object
from kbatch.webhooks.admission.view import ClusterView

HELD_ANNOTATION = "kbatch.io/held"
GROUP_LABEL = "kbatch.io/pod-group"
# A group in any of these phases has been admitted (or is past it): its Jobs may run.
ADMITTED = frozenset(
    {PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING, PodGroupPhase.UNKNOWN, PodGroupPhase.COMPLETED}
)
_LABEL_VALUE_MAX = 63


def group_of(job: Mapping[str, Any]) -> str | None:
    """The PodGroup the Job's pods join, from its pod template's annotation."""
    template = (job.get("spec") or {}).get("template") or {}
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    group = annotations.get(GROUP_NAME_ANNOTATION)
    return str(group) if group else None


def is_held(job: Mapping[str, Any]) -> bool:
    """Suspended by kbatch (not by its owner) and not released yet."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    return HELD_ANNOTATION in annotations and (job.get("spec") or {}).get("suspend") is True


def mutate(job: Mapping[str, Any], view: ClusterView, suspend_supported: bool = True) -> Admission:
    """A Job created: labelled with its group, and held while the group is not admitted.

    ``suspend_supported`` False (an API server before Job suspend): labelled only.
    """
    group = group_of(job)
    if group is None:
        return result.allow()
    meta = job.get("metadata") or {}
    patch: Object = {}
    if len(group) <= _LABEL_VALUE_MAX and (meta.get("labels") or {}).get(GROUP_LABEL) != group:
        patch["metadata"] = {"labels": {GROUP_LABEL: group}}
    if not suspend_supported or (job.get("spec") or {}).get("suspend") is True:
        return result.allow(patch)
    namespace = str(meta.get("namespace") or "default")
    phase = view.pod_group_phase(namespace, group)
    if phase in ADMITTED:
        return result.allow(patch)
    why = (
        f"PodGroup {namespace}/{group} does not exist yet"
        if phase is None
        else f"PodGroup {namespace}/{group} is {phase.value}"
    )
    held = f"{why}; kbatch creates the pods once it is Inqueue"
    patch.setdefault("metadata", {})["annotations"] = {HELD_ANNOTATION: held}
    patch["spec"] = {"suspend": True}
    return result.allow(patch, (f"Job suspended: {held}",))


def release_patch(job: Mapping[str, Any], phase: PodGroupPhase | None) -> Object | None:
    """The merge patch that releases a held Job once its group is admitted, else None."""
    if not is_held(job) or phase not in ADMITTED:
        return None
    return {"metadata": {"annotations": {HELD_ANNOTATION: None}}, "spec": {"suspend": False}}
