"""The live cluster as the simulator's input, for ``kbatch.visibility.eta``.

Times are shifted so that the simulator's 0 is now (a pod started 10 minutes ago started
at -600 s). The simulator stamps what it creates with its own creation time; the real
ones are kept here (``Plan.stamps``) to be put back, so that order ties fall as they do
on the cluster. Each pod gets ``kbatch.io/sim-duration``: a running pod what is left of
its runtime, a waiting pod its whole runtime (``runtimes``), neither past what its
Job's activeDeadlineSeconds leaves it; a pod with no known runtime gets none, and runs
for ever.

Left in: nodes; the pods on them, whatever their scheduler (they hold room); PodGroups
that hold or wait for room, their pods (finished ones too: they count for the group's
phase), their Jobs that kbatch holds until the group is admitted (their pods do not
exist yet; a JobSet's Jobs count as held while kbatch holds the JobSet:
``held_with_jobsets``); queues with their status (the flow plugin's memory); priority
classes; StorageClasses, CSINodes, PersistentVolumes and claims, bound or not (the simulated PV
controller binds and provisions them as the forward run goes: ``kbatch.sim.volume_controller``).
Left out: what is over, pods of other schedulers that are still pending, a pod naming a
PodGroup that does not exist. Not foreseen: a Job's later pods (completions beyond its
parallelism). A deleting pod holds its room until its grace period ends.
"""

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import FINISHED_STATUSES, JobInfo
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.sim import clock, manifests
from kbatch.visibility import runtimes, standing
from kbatch.visibility.runtimes import Runtime
from kbatch.webhooks.admission import job as held_jobs

Object = dict[str, Any]
FINISHED = ("Succeeded", "Failed")
SIM_ANNOTATIONS = (manifests.DURATION, manifests.SUBMIT_AT)


@dataclass
class Plan:
    """The simulator's input, and what the estimates are explained with."""

    objects: list[Object] = field(default_factory=list)
    stamps: dict[tuple[str, str, str], str] = field(default_factory=dict)  # creationTimestamp
    running: dict[str, list[Runtime]] = field(default_factory=dict)  # job -> its running pods'
    pending: dict[str, list[Runtime]] = field(default_factory=dict)  # job -> its waiting pods'
    unknown_running: int = 0  # running pods with no known runtime

    def stamp_of(self, obj: Mapping[str, Any]) -> str | None:
        """The creationTimestamp ``obj`` (one of ``objects``) keeps, if it keeps its own."""
        meta = obj["metadata"]
        kind = obj["kind"]
        namespace = "" if kind == "Queue" else meta.get("namespace") or "default"
        return self.stamps.get((kind, namespace, meta["name"]))

    def known_runtimes(self) -> list[float]:
        return [
            r.seconds
            for pods in (*self.running.values(), *self.pending.values())
            for r in pods
            if r.seconds is not None
        ]


def plan_of(session: Session, objects: standing.ClusterObjects) -> Plan:
    """The live ``objects`` as simulator input; ``session`` (opened on them) says which
    job each pod belongs to and what it waits for."""
    now = objects.now
    plan = Plan()
    raw_pods = {_key(pod): pod for pod in objects.pods}
    history = runtimes.History.of(session.jobs.values(), raw_pods)
    job_of = {task.key: job for job in session.jobs.values() for task in job.tasks.values()}
    live = {uid for uid, job in session.jobs.items() if _live(job)}
    plan.objects.extend(_stripped(pc) for pc in objects.priority_classes)
    for queue in objects.queues:
        plan.objects.append(_stripped(queue, status=_queue_status(queue, now)))
        plan.stamps[("Queue", "", queue["metadata"]["name"])] = _shifted_creation(queue, now)
    plan.objects.extend(_node(node) for node in objects.nodes)
    plan.objects.extend(_volume_objects(objects))
    plan.objects.extend(_held(objects.jobs, session, history, plan))
    cuts = runtimes.job_cuts(objects.jobs, now)
    for group in objects.pod_groups:
        if _key(group) in live:
            plan.objects.append(_stripped(group, status=group.get("status") or {}))
            namespace, name = _key(group).split("/", 1)
            plan.stamps[("PodGroup", namespace, name)] = _shifted_creation(group, now)
    for key, pod in raw_pods.items():
        job = job_of.get(key)
        if job is not None and job.uid not in live:
            continue  # a finished pod of a job that is over
        converted = _pod(pod, job, now, history, plan, runtimes.job_cut_of(pod, cuts))
        if converted is not None:
            plan.objects.append(converted)
            if job is not None and not job.has_pod_group:
                namespace, name = key.split("/", 1)
                plan.stamps[("Pod", namespace, name)] = _shifted_creation(pod, now)
    return plan


def _live(job: JobInfo) -> bool:
    """Does the job still hold or wait for room (a PodGroup not started counts, pods or not)?"""
    finished = sum(job.counts[status] for status in FINISHED_STATUSES)
    return len(job.tasks) > finished or (job.has_pod_group and standing.is_waiting(job))


def _pod(
    pod: Object,
    job: JobInfo | None,
    now: float,
    history: runtimes.History,
    plan: Plan,
    cut: float | None,
) -> Object | None:
    """The pod as simulator input with its runtime (None: left out); ``cut``: the seconds
    by which its Job's activeDeadlineSeconds ends it, if it has one."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    bound = bool((pod.get("spec") or {}).get("nodeName"))
    if phase in FINISHED:
        # it counts for its live group's succeeded/failed; nothing else of it matters
        return None if job is None else _stripped(pod, status={"phase": phase})
    if not bound:
        if job is None:
            return None  # another scheduler's, or naming a PodGroup that does not exist
        runtime = runtimes.capped(runtimes.pending_runtime(pod, job, history), cut)
        plan.pending.setdefault(job.uid, []).append(runtime)
        sim_status = {k: v for k, v in status.items() if k == "nominatedNodeName"}
        sim_status["phase"] = "Pending"
    else:
        runtime = runtimes.capped(_running_runtime(pod, job, now, history), cut)
        owner = job.uid if job is not None else f"other:{_key(pod)}"
        plan.running.setdefault(owner, []).append(runtime)
        plan.unknown_running += runtime.seconds is None
        started = _started(pod, now)
        # (rounded up to the whole second a timestamp holds: the simulator's kubelet stops
        # a pod at startTime + activeDeadlineSeconds, never before its runtime above ends)
        shifted = math.ceil(started - now)
        sim_status = {"phase": "Running", "startTime": clock.timestamp(shifted)}
    converted = _stripped(pod, status=sim_status)
    if runtime.seconds is not None:
        converted["metadata"]["annotations"][manifests.DURATION] = f"{runtime.seconds:.3f}s"
    return converted


def _running_runtime(
    pod: Object, job: JobInfo | None, now: float, history: runtimes.History
) -> Runtime:
    deleting = runtimes.time_of(pod["metadata"].get("deletionTimestamp"))
    if deleting is not None:  # the kubelet has until then to stop it
        return Runtime(max(deleting - now, 0.0), runtimes.DELETING)
    return runtimes.remaining_runtime(pod, job, _started(pod, now), now, history)


def _started(pod: Object, now: float) -> float:
    """When a bound pod started: its startTime; a pod bound but not started yet starts now."""
    started = runtimes.time_of((pod.get("status") or {}).get("startTime"))
    return now if started is None else started


JOBSET_KIND = "JobSet"
# What a forecast reads of a ClusterState, in ``standing.ClusterObjects``' order
KINDS = ("Node", "Pod", "PodGroup", "Queue", "PriorityClass", "ResourceQuota", "Job")
VOLUME_KINDS = ("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode")


def listed(state: ClusterState, now: float) -> standing.ClusterObjects:
    """What ``state`` holds, as the commands list it at ``now``: the Jobs of the JobSets
    kbatch holds count as held (``held_with_jobsets``)."""
    nodes, pods, groups, queues, classes, quotas, jobs = (state.list(kind) for kind in KINDS)
    jobs = held_with_jobsets(jobs, state.list(JOBSET_KIND))
    claims, volumes, storage_classes, csi_nodes = (state.list(kind) for kind in VOLUME_KINDS)
    return standing.ClusterObjects(
        now, nodes, pods, groups, queues, classes, quotas, jobs,
        claims=claims, volumes=volumes, storage_classes=storage_classes, csi_nodes=csi_nodes,
    )  # fmt: skip


def held_with_jobsets(jobs: Iterable[Object], jobsets: Iterable[Object]) -> list[Object]:
    """``jobs``, those made by a JobSet kbatch holds (JobSet's controller makes them
    suspended while the JobSet is) marked as held by kbatch: kbatch releases them with
    the JobSet once their group is admitted, as the forecast then releases them."""
    held = {
        str((jobset.get("metadata") or {}).get("uid"))
        for jobset in jobsets
        if held_jobs.is_held(jobset)
    }
    marked = []
    for job in jobs:
        meta = job.get("metadata") or {}
        owners = [
            owner
            for owner in meta.get("ownerReferences") or ()
            if owner.get("controller") and owner.get("kind") == JOBSET_KIND
        ]
        if owners and owners[0].get("uid") in held and (job.get("spec") or {}).get("suspend"):
            why = f"held with its JobSet {owners[0].get('name')}"
            annotations = {**(meta.get("annotations") or {}), held_jobs.HELD_ANNOTATION: why}
            job = {**job, "metadata": {**meta, "annotations": annotations}}
        marked.append(job)
    return marked


def held_groups(jobs: Iterable[Object]) -> set[str]:
    """The PodGroups (namespace/name) that a Job held by kbatch waits for: though they
    have no pods yet, what they will run is known (``_held``)."""
    held = set()
    for job in jobs:
        group = held_jobs.group_of(job)
        if group is not None and held_jobs.is_held(job):
            held.add(f"{(job.get('metadata') or {}).get('namespace') or 'default'}/{group}")
    return held


def _held(
    jobs: Iterable[Object],
    session: Session,
    history: runtimes.History,
    plan: Plan,
) -> list[Object]:
    """The batch/v1 Jobs kbatch holds for a waiting PodGroup (their pods do not exist
    yet), with the runtime their pods will have."""
    held = []
    for job in jobs:
        group = held_jobs.group_of(job)
        meta = job.get("metadata") or {}
        waiting = session.jobs.get(f"{meta.get('namespace', 'default')}/{group}")
        if group is None or waiting is None or not held_jobs.is_held(job):
            continue
        template = ((job.get("spec") or {}).get("template")) or {}
        runtime = runtimes.pending_runtime(template, waiting, history)
        # (it starts when released: its whole deadline is ahead of its pods)
        runtime = runtimes.capped(runtime, runtimes.deadline_of(job))
        plan.pending.setdefault(waiting.uid, []).extend([runtime] * held_jobs.pods_made(job))
        spec = dict(job.get("spec") or {})
        template_meta = dict(template.get("metadata") or {})
        template_meta["annotations"] = _without_sim(template_meta.get("annotations"))
        spec["template"] = {**template, "metadata": template_meta}
        converted = _stripped(job)
        converted["spec"] = spec
        if runtime.seconds is not None:
            converted["metadata"]["annotations"][manifests.DURATION] = f"{runtime.seconds:.3f}s"
        held.append(converted)
    return held


def _stripped(obj: Mapping[str, Any], status: Mapping[str, Any] | None = None) -> Object:
    """``obj`` with the metadata the simulator reads (no simulation hints of its own)."""
    meta = obj.get("metadata") or {}
    kept: Object = {"name": meta["name"], "annotations": _without_sim(meta.get("annotations"))}
    for name in ("namespace", "labels"):
        if meta.get(name):
            kept[name] = meta[name]
    converted = {key: value for key, value in obj.items() if key not in ("metadata", "status")}
    converted["metadata"] = kept
    if status is not None:
        converted["status"] = dict(status)
    return converted


def _without_sim(annotations: Mapping[str, str] | None) -> dict[str, str]:
    return {k: v for k, v in (annotations or {}).items() if k not in SIM_ANNOTATIONS}


def _volume_objects(objects: standing.ClusterObjects) -> Iterable[Object]:
    """The StorageClasses, CSINodes, PVs and claims as they are, but for the claims' uids
    a PV's claimRef names (the simulator gives the claims its own)."""
    yield from (_stripped(c) for c in objects.storage_classes)
    yield from (_stripped(c) for c in objects.csi_nodes)
    for volume in objects.volumes:
        spec = volume.get("spec") or {}
        ref = spec.get("claimRef")
        if isinstance(ref, Mapping) and ref.get("uid"):
            spec = {**spec, "claimRef": {k: v for k, v in ref.items() if k != "uid"}}
        yield _stripped({**volume, "spec": spec}, status=volume.get("status") or {})
    yield from (_stripped(c, status=c.get("status") or {}) for c in objects.claims)


def _node(node: Mapping[str, Any]) -> Object:
    status = node.get("status") or {}
    kept = {k: status[k] for k in ("allocatable", "capacity", "conditions") if k in status}
    return _stripped(node, status=kept)


def _queue_status(queue: Mapping[str, Any], now: float) -> Object:
    """Its status, the flow's time shifted (the flow plugin decays it from then)."""
    status = dict(queue.get("status") or {})
    updated = runtimes.time_of(status.get("flowUpdated"))
    if updated is not None:
        status["flowUpdated"] = clock.timestamp(updated - now)
    return status


def _shifted_creation(obj: Mapping[str, Any], now: float) -> str:
    created = runtimes.time_of((obj.get("metadata") or {}).get("creationTimestamp"))
    return clock.timestamp((created if created is not None else now) - now)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"
