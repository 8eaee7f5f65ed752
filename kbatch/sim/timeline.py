"""What the report plots: samples taken after every tick, and each job's wait.

Samples are read from each session's snapshot as the session left it (so
what it bound counts as allocated, what it evicted still holds its node).
A sample is kept only when it differs from the one before (the plots draw
steps), so a long quiet run stays small. A *job* is what the scheduler
schedules: a PodGroup, or a pod of ours without one. Its wait runs from its
submission (the earliest creation of the group and its pods) to the first
tick at which at least minMember of its pods are bound, running or done.

Both are worked out from the jobs that changed since the last tick only
(``core.framework.job_sums``): a job the same as at the last tick adds what it added then,
and its wait was noted as it is.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from kbatch.cluster.quantity import amount
from kbatch.operators.scheduler.core.framework import job_sums
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from kbatch.operators.scheduler.core.framework.resources import CPU, MEMORY
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

# Read from a session's snapshot as the session left it: what it bound is Binding.
STARTED = (TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING, TaskStatus.SUCCEEDED)


@dataclass(frozen=True, slots=True)
class Sample:
    time: float
    # queue -> (allocated cpu, deserved cpu), in cores
    queues: dict[str, tuple[float, float]]
    cpu: float  # fraction of the cluster's allocatable cpu in use
    memory: float
    pending: int  # pods of ours waiting for a node

    def same_values(self, other: "Sample") -> bool:
        return (self.queues, self.cpu, self.memory, self.pending) == (
            other.queues,
            other.cpu,
            other.memory,
            other.pending,
        )


@dataclass(slots=True)
class Wait:
    kind: str  # "PodGroup" or "Pod"
    namespace: str
    name: str
    queue: str
    submitted: float
    started: float | None = None

    @property
    def seconds(self) -> float | None:
        return None if self.started is None else self.started - self.submitted


@dataclass(slots=True)
class Timeline:
    samples: list[Sample] = field(default_factory=list)
    waits: dict[tuple[str, str, str], Wait] = field(default_factory=dict)
    end: float = 0.0
    # The uids of the jobs whose wait is over (a job's uid names its kind, namespace and
    # name, as its key in ``waits`` does): every tick asks of every job that changed.
    _started: set[str] = field(default_factory=set)
    # Which of its shortcuts it takes: ``timeline_sums`` (off: every job added up at
    # every tick), ``queues_of_jobs_without_tasks`` and those of its sums (``JobSums``).
    shortcuts: Shortcuts = field(default=ALL, compare=False)
    # The sums over the jobs of the last tick's snapshot, kept by what changed (made
    # when first needed, under ``shortcuts``).
    _sums: job_sums.JobSums | None = field(default=None, compare=False)

    def record(self, now: float, snapshot: Snapshot, created_at: dict[str, float]) -> None:
        self.end = now
        jobs: Iterable[JobInfo] = snapshot.jobs.values()
        sums = None
        shortcuts = self.shortcuts
        if shortcuts.timeline_sums:
            sums = self._sums
            if sums is None:
                sums = self._sums = job_sums.JobSums(
                    shortcuts.timeline_sums_by_unchanged_jobs,
                    shortcuts.timeline_by_jobs_said_changed,
                )
            jobs = sums.update(snapshot.jobs, snapshot.dims.index[CPU], snapshot.delta)
        sample = _sample(now, snapshot, sums, shortcuts.queues_of_jobs_without_tasks)
        if not self.samples or not sample.same_values(self.samples[-1]):
            self.samples.append(sample)
        started, waits = self._started, self.waits
        # The jobs that changed (one the same as at the last tick was noted as it is) and
        # have not started; a group whose pods are held has not begun to wait to start.
        # A wait seen before is noted in any order; the first seen are added to ``waits``
        # in the snapshot's order (the changed jobs may come in none: ``job_sums``).
        first_seen = []
        for job in jobs:
            if job.tasks and job.uid not in started:
                if _key(job) in waits:
                    self._note_wait(now, job, created_at)
                else:
                    first_seen.append(job)
        for job in job_sums.in_order(snapshot.jobs, first_seen):
            self._note_wait(now, job, created_at)

    def _note_wait(self, now: float, job: JobInfo, created_at: dict[str, float]) -> None:
        kind, _, _ = key = _key(job)
        wait = self.waits.get(key)  # (not started: ``record`` asks only of those)
        refs = [f"Pod {t.namespace}/{t.name}" for t in job.tasks.values()]
        if job.has_pod_group:
            refs.append(f"PodGroup {job.namespace}/{job.name}")
        submitted = min((created_at[r] for r in refs if r in created_at), default=now)
        if wait is None:
            wait = self.waits[key] = Wait(kind, job.namespace, job.name, job.queue, submitted)
        wait.submitted = min(wait.submitted, submitted)
        if job.count(*STARTED) >= job.min_member:
            wait.started = now
            self._started.add(job.uid)


def _key(job: JobInfo) -> tuple[str, str, str]:
    """A job's wait's key in ``Timeline.waits``: its kind, namespace and name."""
    return ("PodGroup" if job.has_pod_group else "Pod", job.namespace, job.name)


def _sample(
    now: float, snapshot: Snapshot, sums: job_sums.JobSums | None, by_queue_name: bool = True
) -> Sample:
    """The sample of ``snapshot``; ``sums``: its jobs' sums, kept (None: add them up, as
    ``_added_up`` with ``by_queue_name``)."""
    dims, nodes = snapshot.dims, snapshot.nodes

    def used_fraction(resource: str) -> float:
        i = dims.index[resource]
        total = float(nodes.allocatable[:, i].sum()) if len(nodes) else 0.0
        return float(nodes.used[:, i].sum()) / total if total > 0 else 0.0

    kept = sums.totals() if sums is not None else None
    allocated, pending = kept if kept is not None else _added_up(snapshot, by_queue_name)
    for name in snapshot.queues:
        allocated.setdefault(name, 0.0)
    queues = {}
    for name in sorted(allocated):
        queues[name] = (allocated[name] / 1000, _deserved_cpu(snapshot, name) / 1000)
    return Sample(now, queues, used_fraction(CPU), used_fraction(MEMORY), pending)


def _added_up(snapshot: Snapshot, by_queue_name: bool = True) -> tuple[dict[str, float], int]:
    """Each queue's allocated millicores and the pods waiting, added up over every job of
    ``snapshot`` in its order (the long way). ``by_queue_name``
    (``Shortcuts.queues_of_jobs_without_tasks``): the jobs without tasks only named
    (``_queues_of_jobs_without_tasks``; False: added up as any other)."""
    allocated = {name: 0.0 for name in snapshot.queues}
    pending = 0
    cpu = snapshot.dims.index[CPU]
    jobs: Iterable[JobInfo] = snapshot.jobs.values()
    if by_queue_name:
        for queue in _queues_of_jobs_without_tasks(jobs):
            allocated.setdefault(queue, 0.0)
        jobs = [job for job in jobs if job.tasks]
    for job in jobs:
        queue = job_sums.queue_of(job)
        allocated[queue] = allocated.get(queue, 0.0) + float(job.allocated[cpu])
        pending += job_sums.waiting(job)
    return allocated, pending


def _queues_of_jobs_without_tasks(jobs: Iterable[JobInfo]) -> set[str]:
    """A job with no task (most of a backlog: PodGroups whose pods are held until they
    are admitted) adds 0.0 to its queue's allocation and nothing to the pending count:
    only its queue is named, so these are found in one step, not added one by one."""
    return {job_sums.queue_of(job) for job in jobs if not job.tasks}


def _deserved_cpu(snapshot: Snapshot, queue: str) -> float:
    """Millicores: as the session's proportion plugin left it, else as last published."""
    info = snapshot.queues.get(queue)
    if info is None:
        return 0.0
    if info.deserved is not None:
        return float(info.deserved[snapshot.dims.index[CPU]])
    published = info.old_status.deserved.get(CPU) if info.old_status is not None else None
    return amount(CPU, published) if published is not None else 0.0
