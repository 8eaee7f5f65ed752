"""Jobs with tasks handed from one snapshot to the next (issue 12: a session's cost
should follow what changed, and on a busy cluster most running gangs change nothing).

A snapshot's job of a unit (a PodGroup and its pods, or a pod without a group) is the
last snapshot's object again when that is exactly the job the new snapshot would make:

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
are still walked, in order, to put their tasks on the nodes (``PodPass.tasks``).
"""

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from kbatch.api.podgroup import PodGroupPhase
from kbatch.cluster.kept_tasks import Priorities
from kbatch.cluster.pod_units import ShownPods
from kbatch.operators.scheduler.core.framework.info import JobInfo
from kbatch.operators.scheduler.core.framework.resources import Dims

# False: every job with tasks is made anew by every snapshot (the long way, for tests).
KEEP_UNCHANGED_JOBS = True
# False: a snapshot's ``handed_on`` holds jobs with tasks only; the sums that take what
# it hands on as unchanged then compare every job without tasks (for tests).
HAND_ON_JOBS_WITHOUT_TASKS = True
INQUEUE = PodGroupPhase.INQUEUE


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
    """The last snapshot's jobs and what they were made under."""

    def __init__(self) -> None:
        self._jobs: Mapping[str, JobInfo] = {}
        self._context: JobContext | None = None
        # The units of the last snapshot's jobs with tasks that ``reusable`` did not hand on.
        self.not_kept: set[str] = set()
        # The last snapshot's jobs without tasks that nothing wrote or touched since, by
        # unit: the next one hands them on too when their group's parts give the same
        # object again (``group_parts.job_info``), as they do while the group stays the
        # same and no session moved their phase.
        self.without_tasks: dict[str, JobInfo] = {}

    def reusable(self, context: JobContext, changed: AbstractSet[str] | None) -> dict[str, JobInfo]:
        """The last snapshot's jobs with tasks that the next one, made under ``context``,
        may take as they are, by unit (see the module's docstring). ``changed``: the
        units written since the last snapshot; None, unknown (nothing is kept)."""
        last, self._context = self._context, context
        if changed is None or not KEEP_UNCHANGED_JOBS or last != context:
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
            elif HAND_ON_JOBS_WITHOUT_TASKS:
                without_tasks[unit] = job
        self.not_kept, self.without_tasks = not_kept, without_tasks
        return kept

    def made(self, jobs: Mapping[str, JobInfo]) -> None:
        """``jobs``: the snapshot just made (kept until the next one is made)."""
        self._jobs = jobs

    def forget(self) -> None:
        self._jobs = {}
        self._context = None


def own_groups_in_order(
    jobs: dict[str, JobInfo], kept_jobs: Mapping[str, JobInfo], pods: ShownPods
) -> None:
    """Add the handed-on jobs of pods without a PodGroup (whose pods the pass did not
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
