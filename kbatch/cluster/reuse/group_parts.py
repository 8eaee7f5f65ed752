"""What a PodGroup's job is made from (minResources as a vector, its lifetime and
topology, its creation time), kept per group object and dropped when the group is
written (but for its status alone) or the resource dimensions change; and the job
without tasks each snapshot keeps unchanged while those parts give it again.

A job is made anew for every snapshot (sessions change jobs), but for one without
tasks: most groups of a long backlog have no pods until they are admitted, and a
session changes nothing of such a job but its ``phase`` (enqueue admits it; publish
sets what its status says). So the last snapshot's job of a group is kept for the next
one while it is exactly the job that snapshot would make: the same group object (so the
same fields from it), no tasks (so no counts, no allocation, and the minResources and
priority its object says), the phase its object says and the same priority for its
class. A job that takes tasks in that snapshot is made anew in the one after.
"""

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kbatch.api.podgroup import PodGroup, PodGroupCondition, PodGroupPhase, PodGroupStatus
from kbatch.cluster.quantity import amounts
from kbatch.cluster.records import lifetime_of, timestamp, topology_of
from kbatch.cluster.reuse.kept_tasks import Priorities
from kbatch.operators.scheduler.core.framework.info import JobInfo, TopologyRequest
from kbatch.operators.scheduler.core.framework.resources import Dims


@dataclass(slots=True)
class GroupParts:
    """A PodGroup's job as far as its object says, worked out once while it is the same
    object (records are replaced, never changed, on every update): JobInfo's fields
    before ``priority`` (``head``) and after ``min_resources`` (``tail``), by position.
    Each snapshot makes a JobInfo of its own from them (sessions change jobs)."""

    group: PodGroup
    # uid, namespace, name, queue, min_member, created, dims_len
    head: tuple[str, str, str, str, int, float, int]
    min_resources: np.ndarray | None
    # lifetime, min_task_member, topology, phase, conditions, old_status
    tail: tuple[
        float | None,
        Mapping[str, int],
        TopologyRequest | None,
        PodGroupPhase,
        tuple[PodGroupCondition, ...],
        PodGroupStatus,
    ]
    # Does it name a PriorityClass? (If not, its job takes its pods' highest priority:
    # ``job_accounts.complete_groups``, which reads this rather than the group object.)
    names_class: bool
    # The job the last snapshot made of it (kept while it has no tasks)
    job: JobInfo | None = None


def status_parts(parts: GroupParts, group: PodGroup, keep: bool = True) -> GroupParts | None:
    """The parts of ``group``, a version of ``parts.group`` with only its status written
    (the records share the rest: ``records.parse_pod_group``), under the same dimensions:
    those ``parts`` has, but for its status'. None when more than the status differs, or
    not ``keep`` (``Shortcuts.group_parts_of_status_writes`` off: worked out anew)."""
    last = parts.group
    if group.spec is not last.spec or group.metadata is not last.metadata:
        return None
    if not keep:
        return None
    status = group.status
    lifetime, min_task_member, topology = parts.tail[:3]
    return GroupParts(
        group,
        parts.head,
        parts.min_resources,  # (never changed in place: each job takes a copy)
        (lifetime, min_task_member, topology, status.phase, status.conditions, status),
        parts.names_class,
    )


def group_parts(key: str, group: PodGroup, dims: Dims) -> GroupParts:
    """The parts of ``group`` (by namespace/name ``key``) under ``dims``."""
    spec, status = group.spec, group.status
    min_resources = None
    if spec.min_resources:
        min_resources = dims.vector(amounts(spec.min_resources, "spec.minResources"))
    created = timestamp(group.metadata.creation_timestamp)
    return GroupParts(
        group,
        (key, group.metadata.namespace or "default", group.metadata.name,
         spec.queue, spec.min_member, created, len(dims)),
        min_resources,
        (lifetime_of(group), spec.min_task_member or {}, topology_of(group),
         status.phase, status.conditions, status),
        bool(spec.priority_class_name),
    )  # fmt: skip


def gives_again(parts: GroupParts | None, group: PodGroup, bare: JobInfo, priority: int) -> bool:
    """Do ``parts`` (of ``group``, a group shown) give ``bare``, the last snapshot's job of
    theirs without tasks, again (``job_info``), at ``priority`` (its class's)?"""
    return (
        parts is not None
        and parts.group is group
        and parts.job is bare
        and not bare.tasks
        and bare.phase is parts.tail[3]
        and bare.priority == priority
    )


def job_info(
    group: PodGroup, parts: GroupParts, priorities: Priorities, keep: bool = True
) -> JobInfo:
    """The group's job: the last snapshot's while it has no tasks and says what the
    group does (see the module's docstring), else a new one, by position in JobInfo's
    field order (this runs for every group of every snapshot);
    tests/unit/cluster/test_snapshot_jobs.py holds each field to the group's. Not
    ``keep`` (``Shortcuts.jobs_without_tasks`` off): always a new one."""
    # Without a class name: the globalDefault class's value, as kube-batch; pods, once
    # known, may say otherwise (see SnapshotBuilder.build).
    priority = priorities.of_class(group.spec.priority_class_name)
    kept = parts.job
    if (
        kept is not None
        and not kept.tasks
        and kept.phase is parts.tail[3]
        and kept.priority == priority
        and keep
    ):
        return kept
    min_resources = parts.min_resources
    parts.job = JobInfo(
        *parts.head,
        priority,
        None if min_resources is None else min_resources.copy(),
        *parts.tail,
    )
    return parts.job
