"""The last snapshot's jobs, for the next snapshot to keep unchanged; dropped when the
resource dimensions, the nodes' names, the PriorityClasses or the scheduler names
change (``JobContext``), and a job alone when its unit is written or a session
touches it.

A session's cost should follow what changed, and on a busy cluster most running gangs
change nothing between two sessions. A snapshot's job of a unit (a PodGroup and its
pods, or a pod without a group) is the last snapshot's object again when that is
exactly the job the new snapshot would make:

- nothing of the unit was written since (its group and its pods: the state says which
  units were, ``changed``, counting pods whose bind or eviction it assumes);
- no session changed it: a session changes a job's tasks only through
  ``JobInfo.set_status`` and ``Session.keep``/``unkeep``, which mark it ``touched``
  (tests/unit/cluster/test_kept_jobs.py holds every action to that), and besides
  them only its ``phase``, which is set back to what its object says;
- what its tasks and sums were made under is the same: the resource dimensions (the
  templates), the nodes' names in order (a task's node is an index), the priority
  classes' values and the scheduler's names.

The builder then skips the job's making, its pods' accounting and its sums; its pods
are still walked, in order, to put their tasks on the nodes (``PodPass.tasks``). Which
jobs those are is mostly worked out from what changed alone (``kbatch.cluster.reuse.next_jobs``,
by the log ``KeptJobs`` keeps of what sessions changed); ``reusable`` finds them by a
pass over every job when it cannot be.
"""

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from kbatch.api.podgroup import PodGroupPhase
from kbatch.cluster.reuse.kept_tasks import Priorities
from kbatch.cluster.reuse.next_jobs import LastJobs, NextJobs
from kbatch.cluster.reuse.pod_units import ShownPods
from kbatch.operators.scheduler.core.framework.info import JobInfo
from kbatch.operators.scheduler.core.framework.resources import Dims
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

INQUEUE, COMPLETED = PodGroupPhase.INQUEUE, PodGroupPhase.COMPLETED


@dataclass(frozen=True, slots=True)
class JobContext:
    """What a snapshot's tasks and job sums are made under, beyond the unit's records."""

    dims: Dims
    node_names: list[str]
    priorities: dict[str, int]
    default_priority: int
    scheduler_names: frozenset[str]

    @classmethod
    def of(
        cls, dims: Dims, node_names: list[str], resolver: Priorities, ours: frozenset[str]
    ) -> "JobContext":
        return cls(dims, node_names, resolver.values, resolver.default, ours)


class KeptJobs:
    """The last snapshot's jobs and what they were made under. ``shortcuts``:
    ``unchanged_jobs`` off, every job with tasks made anew by every snapshot;
    ``unchanged_jobs_without_tasks`` off, a snapshot's ``Delta.unchanged_jobs`` holds jobs with
    tasks only (the sums that take what it keeps as unchanged then compare every job
    without tasks); ``jobs_from_last_snapshot`` (or any of those) off, every group
    walked."""

    def __init__(self, shortcuts: Shortcuts = ALL) -> None:
        self._keep = shortcuts.unchanged_jobs
        self._keep_without_tasks = shortcuts.unchanged_jobs_without_tasks
        self._from_last = (
            shortcuts.jobs_from_last_snapshot
            and shortcuts.unchanged_jobs
            and shortcuts.unchanged_jobs_without_tasks
            and shortcuts.jobs_without_tasks
        )
        self._jobs: Mapping[str, JobInfo] = {}
        self._context: JobContext | None = None
        # The units of the last snapshot's jobs with tasks that ``reusable`` did not keep.
        self.not_kept: set[str] = set()
        # The last snapshot's jobs without tasks that nothing wrote or touched since, by
        # unit: the next one hands them on too when their group's parts give the same
        # object again (``group_parts.job_info``), as they do while the group stays the
        # same and no session moved their phase.
        self.without_tasks: dict[str, JobInfo] = {}
        # For the next snapshot's jobs from the last one's (kbatch.cluster.reuse.next_jobs):
        # the log its jobs tell of sessions' changes (``JobInfo.change_log``), the units
        # of its jobs without tasks, and how many of its jobs are of pods without a group.
        self._log: list[str] = []
        self._taskless: set[str] = set()
        self._completed: set[str] = set()
        self._own = -1  # (-1: no snapshot made yet)

    def reusable(self, context: JobContext, changed: AbstractSet[str] | None) -> dict[str, JobInfo]:
        """The last snapshot's jobs with tasks that the next one, made under ``context``,
        may take as they are, by unit (see the module's docstring). ``changed``: the
        units written since the last snapshot; None, unknown (nothing is kept)."""
        last, self._context = self._context, context
        if changed is None or not self._keep or last != context:
            self.not_kept = {unit for unit, job in self._jobs.items() if job.tasks}
            self.without_tasks = {}
            return {}
        kept: dict[str, JobInfo] = {}
        not_kept: set[str] = set()
        without_tasks: dict[str, JobInfo] = {}
        for unit, job in self._jobs.items():  # one pass (every job, every snapshot)
            if job.touched or unit in changed:
                if job.tasks:
                    not_kept.add(unit)
            elif job.tasks:
                kept[unit] = job
            elif self._keep_without_tasks:
                without_tasks[unit] = job
        self.not_kept, self.without_tasks = not_kept, without_tasks
        return kept

    def last(self, context: JobContext, changed: AbstractSet[str] | None) -> LastJobs | None:
        """The last snapshot's jobs and what changed them since, for the next snapshot,
        made under ``context``, to make its jobs from (``next_jobs``); None when it must
        walk every group: its context differs (then nothing is kept), the units written
        are not known, it had jobs of pods without a group, or a shortcut it rests on is
        switched off."""
        if changed is None or self._own != 0 or context != self._context or not self._from_last:
            return None
        self.without_tasks = {}
        return LastJobs(self._jobs, self._taskless, self._completed, self._log)

    def made(self, jobs: Mapping[str, JobInfo], groups: int, walk: NextJobs | None) -> None:
        """``jobs``: the snapshot just made (kept until the next one is made), the first
        ``groups`` of them groups' jobs; ``walk``: how they were made from the last
        snapshot's (None: every group walked). Its jobs tell the log from now on, which
        the next snapshot reads."""
        self._jobs = jobs
        self._own = len(jobs) - groups
        self._log.clear()
        log = self._log
        if walk is None:
            for job in jobs.values():
                job.change_log = log
            self._taskless = {unit for unit, job in jobs.items() if not job.tasks}
            self._completed = {unit for unit, job in jobs.items() if job.phase is COMPLETED}
            return
        taskless = set(walk.quiet)  # (every other job without tasks was looked at)
        completed = self._completed
        completed -= walk.gone
        for unit in walk.looked_at:
            job = jobs[unit]
            job.change_log = log
            if not job.tasks:
                taskless.add(unit)
            if job.phase is COMPLETED:
                completed.add(unit)
            else:
                completed.discard(unit)
        self._taskless = taskless

    @property
    def log(self) -> list[str]:
        """What the last snapshot's jobs tell (``made``), until the next is made."""
        return self._log

    def forget(self) -> None:
        self._jobs = {}
        self._context = None
        self._own = -1


def own_groups_in_order(
    jobs: dict[str, JobInfo], kept_jobs: Mapping[str, JobInfo], pods: ShownPods
) -> None:
    """Add the kept jobs of pods without a PodGroup (whose pods the pass did not
    walk) that this snapshot shows, Inqueue, where a pass over every pod would have put
    them: with the others of their kind, after the groups' jobs, in their pods' order."""
    own: list[tuple[int, JobInfo]] = []
    for job in kept_jobs.values():
        place = None if job.has_pod_group else pods.place(f"{job.namespace}/{job.name}")
        if place is not None:
            job.phase = INQUEUE
            own.append((place, job))
    if not own:
        return
    for job in [job for job in jobs.values() if not job.has_pod_group]:  # made by the pass
        del jobs[job.uid]
        place = pods.place(f"{job.namespace}/{job.name}")
        assert place is not None, job.uid
        own.append((place, job))
    own.sort(key=lambda placed: placed[0])
    jobs.update((job.uid, job) for _, job in own)
