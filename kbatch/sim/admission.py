"""The admission webhooks in a simulation: every object the input creates goes through
the same admission functions as on a cluster (``kbatch.webhooks.admission``).

First the API server's own checks: an object of the wrong shape or out of range
(``kbatch.sim.validation``) is refused before any webhook sees it. A rejected object
is not created; a ``Warning`` event ``AdmissionRejected`` on it carries the message
naming the field (on a cluster, ``kubectl apply`` would print it).
A Job held for its PodGroup gets a ``Held`` event, and ``Released`` when it is no
longer to be held (the PodGroup operator's side of delayed pod creation); a Job of
a group that is not held although its group waits gets ``NotHeld``, saying why.
A Job labelled ``kbatch.io/queue`` without a group of its own gets its PodGroup
made once it exists, as the held-Job controller makes it (``PodGroupCreated``); a
group its admission refuses is reported on the Job (``PodGroupRefused``, naming the
field: the label for a queue that does not exist) and made when a Queue comes; a
group whose label names a queue with child queues is not made, reported the same way,
until the label names a leaf queue or the children go.

What ``kbatch run`` does on events, the simulation does at once: when a PodGroup is
created, its held Jobs that are no longer to be held are released; when a Job names
a PodGroup created before it without minResources, the PodGroup is filled from it
(an update that goes through the PodGroup's admission, quota included).
"""

import functools
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from kbatch.api.podgroup import PodGroup
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.sim import jobs, validation
from kbatch.sim.backend import REJECTED, SimBackend
from kbatch.sim.jobsets import JobSetController
from kbatch.sim.vcjobs import VcJobController
from kbatch.webhooks.admission import chain, job, jobgroup, podgroup, result
from kbatch.webhooks.admission.view import StateView

Object = dict[str, Any]
JobKey = tuple[str, str]  # namespace, name


class SimAdmission:
    def __init__(
        self,
        cluster: SimBackend,
        controller: jobs.JobController,
        jobsets: JobSetController,
        vcjobs: VcJobController | None = None,
    ) -> None:
        self.cluster = cluster
        self.controller = controller
        self.jobsets = jobsets
        # (vcjobs pass the API server's checks only: no kbatch webhook serves them)
        self.vcjobs = vcjobs if vcjobs is not None else VcJobController(cluster)
        self.held: set[JobKey] = set()
        self.to_group: set[JobKey] = set()  # labelled Jobs whose PodGroup is to be made
        self._refused_why: dict[JobKey, str] = {}  # why a Job's PodGroup was last refused
        self._jobs_of_group: dict[tuple[str, str], set[JobKey]] = {}
        # (a function of the Jobs, not of this admission: no cycle through the view)
        group_jobs = functools.partial(_group_jobs, self._jobs_of_group, controller.jobs)
        self.view = StateView(cluster.state, group_jobs)
        self._group_of_job: dict[JobKey, tuple[str, str]] = {}  # (the other way round)

    def forget_jobs(self, keys: Iterable[JobKey]) -> None:
        """These Jobs are gone (``jobs.JobController.let_go``): nothing of them
        is kept here either."""
        for key in keys:
            self.held.discard(key)
            self.to_group.discard(key)
            self._refused_why.pop(key, None)
            group = self._group_of_job.pop(key, None)
            members = self._jobs_of_group.get(group) if group is not None else None
            if group is not None and members is not None:
                members.discard(key)
                if not members:
                    del self._jobs_of_group[group]

    def admit(self, obj: Object) -> Object | None:
        """``obj`` as the webhooks leave it, or None (and an event saying why) if they
        reject it. ``obj`` has passed ``invalid`` (the API server checks it first)."""
        kind, meta = obj["kind"], obj["metadata"]
        namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
        ref = ObjectRef(kind, namespace, name)
        if kind == "Job":
            existing = self.controller.jobs.get((namespace, name))
            old = existing.obj if existing is not None else None
        elif kind == "JobSet":
            old = self.jobsets.get(namespace, name)
        else:
            old = self.cluster.state.get(kind, namespace, name)
        answer = chain.admit(obj, old, self.view)
        if not answer.allowed:
            self.cluster.record(ref, "Warning", REJECTED, answer.message)
            return None
        admitted = answer.applied_to(obj) if answer.patch else obj
        if kind == "Job" and old is None:
            self._job_created(ref, admitted, answer.warnings)
        elif kind == "PodGroup" and old is None:
            self._group_created(admitted)
        elif kind == "Queue" and old is None and self.to_group:
            self.cluster.touched.holding.update(self.to_group)  # their groups may be made now
        return admitted

    def invalid(self, obj: Object) -> str | None:
        """Why the API server's schema and validation refuse ``obj`` (a Warning event
        ``AdmissionRejected`` on it says so too), or None."""
        why = validation.refusal(obj)
        if why is not None:
            meta = obj["metadata"]
            ref = ObjectRef(obj["kind"], str(meta.get("namespace") or ""), str(meta["name"]))
            self.cluster.record(ref, "Warning", REJECTED, why)
        return why

    def _job_created(self, ref: ObjectRef, admitted: Object, warnings: tuple[str, ...]) -> None:
        group = job.kbatch_group_of(admitted, self.view.scheduler_names())
        if group is None:
            return
        key = (ref.namespace, ref.name)
        if jobgroup.makes_group(admitted, self.view.scheduler_names()):
            self.to_group.add(key)
        self._fill_min_resources(admitted)
        self._jobs_of_group.setdefault((ref.namespace, group), set()).add(key)
        self._group_of_job[key] = (ref.namespace, group)
        if job.is_held(admitted):
            self.held.add(key)
            why = admitted["metadata"]["annotations"][job.HELD_ANNOTATION]
            self.cluster.record(ref, "Normal", "Held", f"Job suspended: {why}")
        for warning in warnings:
            if warning.startswith("Job not held: "):
                self.cluster.record(ref, "Normal", "NotHeld", warning)

    def _fill_min_resources(self, created: Object) -> None:
        """PodGroupMinResources for a PodGroup created before this Job."""
        fill = podgroup.fill_from_job(created, self.view)
        if fill is None:
            return
        namespace, name, patch = fill
        old = self.cluster.state.get("PodGroup", namespace, name)
        if old is None:
            return
        updated = result.merge(old, patch)
        answer = chain.admit(updated, old, self.view)
        ref = ObjectRef("PodGroup", namespace, name)
        if not answer.allowed:
            self.cluster.record(ref, "Warning", REJECTED, answer.message)
            return
        self.cluster.create(answer.applied_to(updated))

    def _group_created(self, group_obj: Object) -> None:
        """Its held Jobs that are no longer to be held go at once (the event's release)."""
        meta = group_obj["metadata"]
        namespace, name = str(meta.get("namespace") or "default"), str(meta["name"])
        group = job.Group.of(PodGroup.model_validate(group_obj), None)
        held = [
            r
            for r in _group_jobs(self._jobs_of_group, self.controller.jobs, namespace, name)
            if job.is_held(r)
        ]
        self._release(job.to_release(held, self.view, group))

    def release(self, groups: Collection[tuple[str, str]] | None = None) -> None:
        """Resume the held Jobs that are no longer to be held (their group is admitted).
        ``groups`` (namespace, name): look at the Jobs of these only (for the others,
        neither their group nor their Jobs changed since the last call)."""
        self._make_groups()
        keys = self.held if groups is None else self._held_of(groups)
        held = []
        for key in sorted(keys):
            record = self.controller.jobs.get(key)
            if record is None or not job.is_held(record.obj):
                self.held.discard(key)
            else:
                held.append(record.obj)
        self._release(job.to_release(held, self.view))

    def _make_groups(self) -> None:
        """The PodGroups of labelled Jobs, made once the Job exists (its uid is the
        group's owner), through the PodGroup's admission; one that is refused is reported
        on the Job and tried again later. A group of that name that exists is joined."""
        for key in sorted(self.to_group):
            record = self.controller.jobs.get(key)
            if record is None:
                self.to_group.discard(key)
                continue
            made = jobgroup.pod_group_for(record.obj, job.pods_made(record.obj))
            ref = ObjectRef("Job", *key)
            not_leaf = jobgroup.queue_not_leaf(record.obj, self.view)
            if not_leaf is not None:
                self._report_refused(key, not_leaf)
                continue
            answer = chain.admit(made, None, self.view)
            if not answer.allowed:
                self._report_refused(key, jobgroup.refusal_message(record.obj, answer.message))
                continue
            self.to_group.discard(key)
            self._refused_why.pop(key, None)
            if self.cluster.state.get("PodGroup", *key) is not None:
                continue
            group = answer.applied_to(made)
            self.cluster.create(group)
            self.cluster.record(
                ref, "Normal", jobgroup.MADE, f"made PodGroup {key[0]}/{key[1]} for the Job's pods"
            )
            self._group_created(group)

    def _report_refused(self, key: JobKey, message: str) -> None:
        """A Warning on the Job that its PodGroup is not made, once per reason."""
        if self._refused_why.get(key) != message:
            self._refused_why[key] = message
            self.cluster.record(ObjectRef("Job", *key), "Warning", jobgroup.REFUSED, message)

    def _held_of(self, groups: Collection[tuple[str, str]]) -> set[JobKey]:
        return {key for g in groups for key in self._jobs_of_group.get(g, ()) if key in self.held}

    def _release(self, decided: list[tuple[Mapping[str, Any], str]]) -> None:
        for held, why in decided:
            meta = held["metadata"]
            self.controller.apply(result.merge(held, job.release_patch()))
            self.held.discard((meta["namespace"], meta["name"]))
            ref = ObjectRef("Job", meta["namespace"], meta["name"])
            self.cluster.record(ref, "Normal", "Released", f"Job resumed: {why}")


def _group_jobs(
    jobs_of_group: dict[tuple[str, str], set[JobKey]],
    records: dict[JobKey, jobs.JobRecord],
    namespace: str,
    group: str,
) -> list[Object]:
    """The Jobs of the PodGroup ``namespace/group``, in name order."""
    found: list[Object] = []
    for key in sorted(jobs_of_group.get((namespace, group), ())):
        record = records.get(key)
        if record is not None and job.group_of(record.obj) == group:
            found.append(record.obj)
    return found
