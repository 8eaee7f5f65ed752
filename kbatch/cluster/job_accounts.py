"""What a snapshot's jobs take from their pods, gathered in the snapshot's one pass over
the pods (``JobAccounts``) and completed once it is over (``complete_groups``): the
sums of their requests, a group's highest priority, and the gang minimum of a group
that names no minResources.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from kbatch.cluster.reuse.group_parts import GroupParts
from kbatch.operators.scheduler.core.framework.info import (
    FINISHED_STATUSES,
    PLACED_STATUSES,
    READY_STATUSES,
    JobInfo,
    TaskRequests,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate

# Per status (by value): does a task in it count as ready, as placed, as unfinished?
ACCOUNTED = tuple(
    (status in READY_STATUSES, status in PLACED_STATUSES, status not in FINISHED_STATUSES)
    for status in TaskStatus
)


@dataclass(slots=True)
class JobAccounts:
    """What the one pass over the pods gathers for the jobs besides their tasks (each
    task is put in its job and counted in that pass, as ``JobInfo.add_task`` would):
    the jobs with tasks in order of their first (a job's row, ``rows`` by ``id``), the
    requests to add to their sums, and per row every (template,
    role, priority) its tasks come in, in order of first appearance (repeats allowed),
    which is all a gang minimum or a group's highest priority needs (a job's tasks
    mostly share one)."""

    owners: list[JobInfo] = field(default_factory=list)
    rows: dict[int, int] = field(default_factory=dict)
    requests: TaskRequests = field(default_factory=TaskRequests)
    kinds: list[list[tuple[PodTemplate, str, int]]] = field(default_factory=list)

    def add_run(
        self, job: JobInfo | None, status: TaskStatus | None, count: int, row: int, at: int
    ) -> None:
        """``count`` tasks in a row, already in ``job`` (in ``row``), all in ``status``
        and of the request ``at`` in ``requests``: counted, and their requests to add (as
        ``JobInfo.add_task`` of each would)."""
        assert job is not None and status is not None  # (a run has a job and a status)
        job.counts[status] += count
        ready, placed, unfinished = ACCOUNTED[status]
        if ready:
            job.ready_count += count
        self.requests.add(row, at, count, placed, unfinished)


def complete_groups(
    parts_of: Mapping[str, GroupParts], jobs: Mapping[str, JobInfo], accounts: JobAccounts
) -> None:
    """What a group's job takes from its pods: a PodGroup naming no PriorityClass, their
    highest priority; one without minResources, its gang minimum (those without
    minTaskMember, the most, all at once: ``gang_minimum``'s first case). The jobs whose
    tasks ``accounts`` holds (those a snapshot made, not those it kept unchanged), each on
    its own: the order they come in changes nothing. ``parts_of``: the parts of (at
    least) every group whose job ``jobs`` holds, by key; what they say of a group is read
    there, not off the PodGroup object (two model attribute reads per job, a tenth of a
    50,000-pod snapshot)."""
    gangs: list[JobInfo] = []
    smallest: list[np.ndarray] = []
    for job, kinds in zip(accounts.owners, accounts.kinds, strict=True):
        if not job.has_pod_group or jobs.get(job.uid) is not job:
            continue  # a pod's own group (or a job the snapshot does not show)
        if len(kinds) == 1:  # the common case: one template, role and priority
            template, _, highest = kinds[0]
            templates = [template]
        else:
            highest = max(kind[2] for kind in kinds)
            templates = _distinct([kind[0] for kind in kinds])
        if not parts_of[job.uid].names_class:
            job.priority = highest
        if job.min_resources is not None:
            continue
        if job.min_task_member:
            of_role = {
                role: _distinct([template for template, of, _ in kinds if of == role])
                for role in job.min_task_member
            }
            job.min_resources = gang_minimum(
                job.min_member, job.min_task_member, templates, of_role
            )
        else:
            gangs.append(job)
            smallest.append(_smallest(templates))
    if gangs:
        members = np.array([max(job.min_member, 0) for job in gangs])
        for job, minimum in zip(gangs, 0.0 + np.array(smallest) * members[:, None], strict=True):
            job.min_resources = minimum


def _distinct(templates: list[PodTemplate]) -> list[PodTemplate]:
    """``templates`` without repeats (by identity: one is made per pod spec), in order."""
    if len(templates) == 1:
        return templates
    return list({id(template): template for template in templates}.values())


def gang_minimum(
    min_member: int,
    min_task_member: Mapping[str, int],
    templates: list[PodTemplate],
    templates_of_role: Mapping[str, list[PodTemplate]],
) -> np.ndarray:
    """The minResources of a group that has none, as the PodGroup webhook fills them
    (each role's minimum × the smallest request of its pods, and the rest of minMember ×
    the smallest request of any pod, per resource), so that enqueue never admits a gang
    the cluster cannot hold, with the webhooks on or not. ``templates``: the distinct
    templates of its pods in order of first appearance (one at least), and of each
    role's pods."""
    if not min_task_member:
        # The general form below with nothing counted: zeros + x (0.0 + x: a -0.0 is 0.0).
        return 0.0 + _smallest(templates) * max(min_member, 0)
    total = np.zeros_like(templates[0].request)
    counted = 0
    for role, minimum in min_task_member.items():
        of_role = templates_of_role.get(role)
        if of_role and minimum:
            total += _smallest(of_role) * minimum
            counted += minimum
    return total + _smallest(templates) * max(min_member - counted, 0)


def _smallest(templates: list[PodTemplate]) -> np.ndarray:
    """The smallest request of distinct ``templates`` per resource. The pods of a gang
    mostly share one template, and its request is the answer (no reduction per job)."""
    if len(templates) == 1:
        return templates[0].request
    return np.min([template.request for template in templates], axis=0)
