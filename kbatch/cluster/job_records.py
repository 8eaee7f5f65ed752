"""The batch/v1 Jobs the scheduler reads, for their own deadline alone.

A Job's ``spec.activeDeadlineSeconds`` ends its pods that long after the Job started (the
job controller deletes them and fails the Job), whatever the pods' own specs say: so a
Job's pods are as sure to be gone by then as a pod with that deadline of its own
(``kbatch.operators.scheduler.core.framework.lending`` reads both). A pod names its Job
in its controller ``ownerReferences`` (``owner_job``).
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kbatch.cluster import fields
from kbatch.cluster.record_parsing import naming, object_name, ref_of, timestamp
from kbatch.operators.scheduler.core.framework.info import JobDeadline


@dataclass(frozen=True, slots=True)
class JobRecord:
    uid: str
    deadline: JobDeadline | None  # None: the Job has no deadline of its own


def parse_job(obj: Mapping[str, Any]) -> JobRecord:
    """A Job's record; ObjectError naming the field when its deadline, suspension or
    start time are not what the API server would hold."""
    with naming(ref_of(obj)):
        object_name(obj, namespaced=True)
        uid = fields.string(obj, "metadata.uid") or ""
        seconds = fields.value(obj, "spec.activeDeadlineSeconds")
        if seconds is None:
            return JobRecord(uid, None)
        if type(seconds) is not int or seconds <= 0:
            raise fields.FieldError(
                "spec.activeDeadlineSeconds", f"expected a positive integer, not {seconds!r}"
            )
        suspended = fields.value(obj, "spec.suspend")
        if suspended is not None and type(suspended) is not bool:
            raise fields.FieldError("spec.suspend", f"expected true or false, not {suspended!r}")
        start = fields.value(obj, "status.startTime")
        started = timestamp(start, "status.startTime") if start and not suspended else None
        return JobRecord(uid, JobDeadline(float(seconds), started))


def parse_jobset(obj: Mapping[str, Any]) -> str:
    """A JobSet's uid. The scheduler holds JobSets for one thing: whether kbatch holds
    one, which makes the Jobs JobSet's controller made suspended with it held too (its
    group's estimate reads them: ``kbatch.visibility.eta_input.held_with_jobsets``)."""
    with naming(ref_of(obj)):
        object_name(obj, namespaced=True)
        return fields.string(obj, "metadata.uid") or ""


def owner_job(obj: Mapping[str, Any]) -> str:
    """The uid of the batch/v1 Job that controls the pod ``obj`` ('' for none, or for an
    owner reference too misshapen to read: it only ever adds a deadline)."""
    owners = (obj.get("metadata") or {}).get("ownerReferences")
    if not isinstance(owners, list):
        return ""
    for owner in owners:
        if (
            isinstance(owner, Mapping)
            and owner.get("kind") == "Job"
            and owner.get("controller") is True
            and str(owner.get("apiVersion", "")).startswith("batch/")
        ):
            uid = owner.get("uid")
            return uid if isinstance(uid, str) else ""
    return ""
