"""How long pods run: what an ETA may assume, and where each figure comes from.

A start time can only be estimated from how long the work ahead will take. kbatch does
not keep a history of its own; the simplest honest source is what the API server still
holds: a pod that **Succeeded** keeps its ``status.startTime`` and its containers'
``state.terminated.finishedAt``, so its runtime is the last finish minus the start
(until the pod is deleted: Jobs keep theirs until their ``ttlSecondsAfterFinished``).
Runtimes are grouped by PodGroup and by queue; a pod of its own counts for its queue.

For one pod, in this order of trust:

1. ``spec.activeDeadlineSeconds``: the kubelet ends the pod that long after it started
   (an upper bound, met exactly by a job that runs to its deadline);
   or its batch/v1 Job's, whichever ends it first: the job controller ends a Job's
   pods once the Job has been active that long (from its ``status.startTime``; a Job
   still held starts when it is released) (``capped``);
2. its PodGroup's ``kbatch.io/lifetime`` (DESIGN §11, when more than 0): the time it
   is meant to run for, from the group's first start — once it is over, it says
   nothing more;
3. the median runtime of its PodGroup's finished pods, else of its queue's finished
   jobs (each job's median, so that a big gang weighs as one job); for a pod
   already running for ``e`` seconds, the median of the runtimes longer than ``e``,
   less ``e`` (a pod that has run long is one of the long ones); with how widely
   those runtimes vary (``spread``: a median of widely varying runtimes is a weak
   guess for any one pod); a pod that has run longer than every one of them gets
   what the longest quarter of them ran beyond their 75th percentile (``outlived``),
   a weak guess too, but not for ever;
4. nothing: unknown (the simulator then lets it run for ever).

Pure: raw objects and an opened session's jobs in, figures out.
"""

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kbatch.cluster import job_records, records
from kbatch.cluster.errors import ObjectError
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskStatus

Object = dict[str, Any]

DEADLINE = "activeDeadlineSeconds"
JOB_DEADLINE = "job activeDeadlineSeconds"  # its batch/v1 Job's: the job controller's cut
LIFETIME = "lifetime"
GROUP = "group"  # history of the same PodGroup
QUEUE = "queue"  # history of the same queue
DELETING = "deleting"  # a pod being deleted: until its grace period ends
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Runtime:
    """How long a pod runs (a pending pod) or still runs (a running one): ``seconds``
    (None: unknown), from ``source``; for history, how many finished pods of which
    ``scope`` (a PodGroup's namespace/name, or a queue's name) it comes from."""

    seconds: float | None
    source: str
    samples: int = 0
    scope: str = ""
    spread: float = 1.0  # of history: its samples' 90th percentile over their 10th

    def words(self) -> str:
        """Where it comes from, as the ETA's explanation says it."""
        if self.source == DEADLINE:
            return "activeDeadlineSeconds"
        if self.source == JOB_DEADLINE:
            return "their Job's activeDeadlineSeconds"
        if self.source == LIFETIME:
            return "kbatch.io/lifetime"
        if self.source == DELETING:
            return "the deletion grace period"
        if self.source == GROUP:
            pods = "pod" if self.samples == 1 else "pods"
            return f"{self.samples} finished {pods} of PodGroup {self.scope}"
        if self.source == QUEUE:
            jobs = "job" if self.samples == 1 else "jobs"
            return f"{self.samples} finished {jobs} of queue {self.scope}"
        return "no known runtime"


@dataclass
class History:
    """Runtimes (seconds) of finished pods, by PodGroup key (namespace/name), and by
    queue name one per job (the median of its finished pods): a gang of 64 pods is one
    draw of its queue's runtimes, not 64, else a queue's median would be the runtime of
    its largest recent gang."""

    by_group: dict[str, list[float]] = field(default_factory=dict)
    by_queue: dict[str, list[float]] = field(default_factory=dict)

    @classmethod
    def of(cls, jobs: Iterable[JobInfo], pods: Mapping[str, Object]) -> "History":
        """From the Succeeded tasks of ``jobs`` (a session's), whose raw pods ``pods``
        (by namespace/name) say when they started and finished."""
        history = cls()
        for job in jobs:
            own = []
            for task in job.tasks_with(TaskStatus.SUCCEEDED):
                pod = pods.get(task.key)
                seconds = None if pod is None else finished_runtime(pod)
                if seconds is not None:
                    own.append(seconds)
            if not own:
                continue
            if job.has_pod_group:
                history.by_group.setdefault(job.uid, []).extend(own)
            history.by_queue.setdefault(job.queue, []).append(statistics.median(own))
        return history

    def samples(self, job: JobInfo) -> tuple[list[float], str, str]:
        """The runtimes that speak for ``job``'s pods: its group's, else its queue's;
        with their source and scope."""
        own = self.by_group.get(job.uid) if job.has_pod_group else None
        if own:
            return own, GROUP, job.uid
        return self.by_queue.get(job.queue, []), QUEUE, job.queue


def finished_runtime(pod: Mapping[str, Any]) -> float | None:
    """A Succeeded pod's runtime: its containers' last finishedAt minus its startTime
    (None when either is missing or unreadable)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Succeeded" or not status.get("startTime"):
        return None
    finishes = [
        ((container.get("state") or {}).get("terminated") or {}).get("finishedAt")
        for container in status.get("containerStatuses") or []
    ]
    try:
        started = records.timestamp(status["startTime"], "status.startTime")
        ends = [records.timestamp(f, "finishedAt") for f in finishes if f]
    except ValueError:
        return None
    if not ends:
        return None
    return max(max(ends) - started, 0.0)


def deadline_of(pod: Mapping[str, Any]) -> float | None:
    """``spec.activeDeadlineSeconds`` (None when absent or not a positive number)."""
    value = (pod.get("spec") or {}).get(DEADLINE)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def job_cuts(jobs: Iterable[Mapping[str, Any]], now: float) -> dict[str, float]:
    """By batch/v1 Job uid, the seconds from ``now`` by which the job controller ends
    the Job's pods: its ``status.startTime`` plus its ``spec.activeDeadlineSeconds``
    (a Job without both, or suspended, has none: ``job_records``, as the scheduler
    reads it; one it would refuse cuts nothing)."""
    cuts = {}
    for job in jobs:
        try:
            record = job_records.parse_job(job)
        except ObjectError:
            continue
        deadline = record.deadline
        if deadline is None or deadline.started is None or not record.uid:
            continue
        cuts[record.uid] = max(deadline.started + deadline.seconds - now, 0.0)
    return cuts


def job_cut_of(pod: Mapping[str, Any], cuts: Mapping[str, float]) -> float | None:
    """The cut (``job_cuts``) of the Job that controls ``pod``, if it has one."""
    owner = job_records.owner_job(pod)
    return cuts.get(owner) if owner else None


def capped(runtime: Runtime, cut: float | None) -> Runtime:
    """``cut`` (what its Job's activeDeadlineSeconds leaves the pod from when it is looked
    at), a deadline trusted before a lifetime or history as the pod's own is; but the
    pod's own deadline (or deletion) when that ends it first."""
    if cut is None:
        return runtime
    own = runtime.seconds if runtime.source in (DEADLINE, DELETING) else None
    return runtime if own is not None and own <= cut else Runtime(cut, JOB_DEADLINE)


def time_of(value: object) -> float | None:
    """An RFC 3339 time's epoch seconds; None when absent or not a time (a live object's
    times are read leniently: a wrong one is not known)."""
    if not value:
        return None
    try:
        return records.timestamp(value)
    except ValueError:
        return None


def pending_runtime(pod: Mapping[str, Any], job: JobInfo, history: History) -> Runtime:
    """How long a pod that has not started will run once it does."""
    deadline = deadline_of(pod)
    if deadline is not None:
        return Runtime(deadline, DEADLINE)
    if job.lifetime:
        return Runtime(job.lifetime, LIFETIME)
    samples, source, scope = history.samples(job)
    if samples:
        return Runtime(statistics.median(samples), source, len(samples), scope, spread_of(samples))
    return Runtime(None, UNKNOWN)


def spread_of(samples: Sequence[float]) -> float:
    """How widely ``samples`` vary: their 90th percentile over their 10th (linear between
    ranks; 1: all alike; infinite when the 10th is 0)."""
    ordered = sorted(samples)
    low, high = _percentile(ordered, 10), _percentile(ordered, 90)
    if low <= 0:
        return 1.0 if high <= 0 else float("inf")
    return high / low


def _percentile(ordered: Sequence[float], percent: float) -> float:
    at = (len(ordered) - 1) * percent / 100
    below = int(at)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (at - below)


def remaining_runtime(
    pod: Mapping[str, Any], job: JobInfo | None, started: float, now: float, history: History
) -> Runtime:
    """How much longer a pod that started at ``started`` runs after ``now``. A pod of
    another scheduler (``job`` None) is known by its deadline only."""
    elapsed = max(now - started, 0.0)
    deadline = deadline_of(pod)
    if deadline is not None:
        return Runtime(max(deadline - elapsed, 0.0), DEADLINE)
    if job is None:
        return Runtime(None, UNKNOWN)
    ends = job.protected_until()
    if job.lifetime and ends is not None and ends > now:
        return Runtime(ends - now, LIFETIME)
    samples, source, scope = history.samples(job)
    longer = [seconds - elapsed for seconds in samples if seconds > elapsed]
    if longer:
        return Runtime(statistics.median(longer), source, len(samples), scope, spread_of(longer))
    if samples:  # it has run longer than every one of them
        return Runtime(outlived(samples), source, len(samples), scope, float("inf"))
    return Runtime(None, UNKNOWN)


def outlived(samples: Sequence[float]) -> float:
    """What is left of a pod that has run longer than all ``samples``: what the longest
    quarter of them ran beyond their 75th percentile (the median of it), the history's
    own tail; the 75th percentile itself when none ran beyond it (all alike: it is
    overdue by then). A pod running for ever would hold its room for ever, in the
    forecast only: gangs needing whole nodes would then wait for ever, or much longer."""
    ordered = sorted(samples)
    upper = _percentile(ordered, 75)
    beyond = [seconds - upper for seconds in ordered if seconds > upper]
    return statistics.median(beyond) if beyond else upper


def summary(runtimes: Sequence[Runtime]) -> str:
    """Where a set of runtimes came from, in words: 'activeDeadlineSeconds of 3 pods;
    42 finished jobs of queue research'."""
    counted: dict[tuple[str, str], tuple[Runtime, int]] = {}
    for runtime in runtimes:
        key = (runtime.source, runtime.scope)
        first, count = counted.get(key, (runtime, 0))
        counted[key] = (first, count + 1)
    parts = []
    for (source, _), (runtime, count) in counted.items():
        if source in (GROUP, QUEUE):
            parts.append(runtime.words())  # it says how many pods the median is of
        else:
            parts.append(f"{runtime.words()} of {count} pod{'' if count == 1 else 's'}")
    return "; ".join(parts)
