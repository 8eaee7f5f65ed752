"""The admission webhooks in a simulation: every object the input creates goes through
the same admission functions as on a cluster (``kbatch.webhooks.admission``).

A rejected object is not created; a ``Warning`` event ``AdmissionRejected`` on it
carries the webhook's message (on a cluster, ``kubectl apply`` would print it).
A Job held for its PodGroup gets a ``Held`` event, and ``Released`` when the
group is admitted (the PodGroup operator's side of delayed pod creation).
"""

from typing import Any

from kbatch.operators.scheduler.framework.interface import ObjectRef
from kbatch.sim import jobs
from kbatch.sim.cluster import SimCluster
from kbatch.webhooks.admission import chain, job, result
from kbatch.webhooks.admission.view import StateView

Object = dict[str, Any]
JobKey = tuple[str, str]  # namespace, name


class SimAdmission:
    def __init__(self, cluster: SimCluster, controller: jobs.JobController) -> None:
        self.cluster = cluster
        self.controller = controller
        self.view = StateView(cluster.state, self._pod_specs)
        self.held: set[JobKey] = set()
        self._jobs_of_group: dict[tuple[str, str], set[JobKey]] = {}

    def _pod_specs(self, namespace: str, group: str) -> list[Object]:
        specs = []
        for key in sorted(self._jobs_of_group.get((namespace, group), ())):
            record = self.controller.jobs.get(key)
            if record is not None and job.group_of(record.obj) == group:
                specs.append(record.obj["spec"]["template"]["spec"])
        return specs

    def admit(self, obj: Object) -> Object | None:
        """``obj`` as admission leaves it, or None (and an event saying why) if rejected."""
        kind, meta = obj["kind"], obj["metadata"]
        namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
        if kind == "Job":
            existing = self.controller.jobs.get((namespace, name))
            old = existing.obj if existing is not None else None
        else:
            old = self.cluster.state.get(kind, namespace, name)
        answer = chain.admit(obj, old, self.view)
        ref = ObjectRef(kind, namespace, name)
        if not answer.allowed:
            self.cluster.record(ref, "Warning", "AdmissionRejected", answer.message)
            return None
        admitted = answer.applied_to(obj) if answer.patch else obj
        if kind == "Job":
            group = job.group_of(admitted)
            if group is not None:
                self._jobs_of_group.setdefault((namespace, group), set()).add((namespace, name))
            if job.is_held(admitted):
                self.held.add((namespace, name))
                why = admitted["metadata"]["annotations"][job.HELD_ANNOTATION]
                self.cluster.record(ref, "Normal", "Held", f"Job suspended: {why}")
        return admitted

    def release(self) -> None:
        """Resume the held Jobs whose PodGroup has been admitted."""
        for namespace, name in sorted(self.held):
            record = self.controller.jobs.get((namespace, name))
            if record is None or not job.is_held(record.obj):
                self.held.discard((namespace, name))
                continue
            group = job.group_of(record.obj) or ""
            phase = self.view.pod_group_phase(namespace, group)
            patch = job.release_patch(record.obj, phase)
            if patch is None or phase is None:
                continue
            self.controller.apply(result.merge(record.obj, patch))
            self.held.discard((namespace, name))
            message = (
                f"PodGroup {namespace}/{group} is {phase.value}: the Job's pods may be created"
            )
            self.cluster.record(ObjectRef("Job", namespace, name), "Normal", "Released", message)
