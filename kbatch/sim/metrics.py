"""Armada's scheduler metrics (DESIGN §11, seed 004) of a simulated workload: the JSON's
top-level ``metrics`` object, given only when the run has ``--workload``.

- ``throughput``: jobs started (a *job* as ``kbatch.sim.timeline`` counts it: a PodGroup,
  or a pod without one) and pods bound, each also per second of simulated time;
- ``latency``: per queue, the jobs submitted and started, and submission-to-start
  seconds p50/p99/max (nearest rank) of those started (the timeline's waits);
- ``utilisation``: per resource (cpu, memory, and nvidia.com/gpu when the cluster has
  it), the fraction of the cluster's allocatable in use, averaged over the run
  (``mean``) and over the time some job waited to start (``whileWaiting``: submitted,
  fewer than minMember of its pods started yet); ``waitingSeconds`` is that time;
- ``fairShare``: per queue, averaged over the time it had work (pending or running):
  its dominant resource share of the cluster (``share``, as Armada's DRF counts cpu,
  memory and gpu) and its fair share (``fairShare``: weight / the summed weights of the
  queues with work, Armada's unadjusted fair share); ``belowFairShareSeconds`` is how
  long it had jobs waiting while below its fair share;
- ``overTime``: the same per equal window of the run (at most 60): utilisation, jobs
  waiting (``jobsWaiting``, a mean), each queue's share and fair share;
- ``evictions``: the total and per queue (the pods' eviction counts).

The timeline's samples hold cpu and memory only, so a ``Recorder`` takes its own (per
resource, per queue's dominant share) from each session's snapshot, keeping a point only
when it differs from the one before (values are steps, held until the next point).
"""

import math
import operator
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kbatch.api import DEFAULT_QUEUE
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskStatus, added_in_order
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from kbatch.operators.scheduler.core.framework.resources import CPU, MEMORY, Dims
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.sim import departures
from kbatch.sim.runner import Outcome
from kbatch.sim.timeline import STARTED

GPU = "nvidia.com/gpu"
RESOURCES = (CPU, MEMORY, GPU)  # Armada's DRF resources that kbatch's clusters have
HOLDING = (TaskStatus.ALLOCATED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING)
# A job's counts of its tasks in STARTED / HOLDING (``JobInfo.counts`` is by status): read
# for every job at every tick.
_started_counts = operator.itemgetter(*STARTED)
_holding_counts = operator.itemgetter(*HOLDING)
WINDOWS = 60
Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Point:
    time: float
    used: tuple[float, ...]  # fraction of allocatable in use, per RESOURCES
    waiting: int  # jobs waiting to start
    shares: tuple[tuple[str, float, float, bool], ...]  # (queue, share, fair share, waits)

    def same_values(self, other: "Point") -> bool:
        return (self.used, self.waiting, self.shares) == (other.used, other.waiting, other.shares)


@dataclass(slots=True)
class Recorder:
    points: list[Point] = field(default_factory=list)
    resources: set[str] = field(default_factory=set)  # those the cluster has any of
    shortcuts: Shortcuts = ALL  # (``count_jobs_that_never_held``, ``sums_by_bincount``)

    def record(self, now: float, snapshot: Snapshot) -> None:
        point = _point(now, snapshot, self.resources, self.shortcuts)
        if not self.points or not point.same_values(self.points[-1]):
            self.points.append(point)


@dataclass(slots=True)
class MeasuredOutcome(Outcome):
    """A run's outcome with its metrics' points (a workload's run)."""

    recorder: Recorder = field(default_factory=Recorder)


def _point(now: float, snapshot: Snapshot, present: set[str], shortcuts: Shortcuts = ALL) -> Point:
    dims, nodes = snapshot.dims, snapshot.nodes
    totals = np.zeros(len(RESOURCES))
    used = []
    for i, resource in enumerate(RESOURCES):
        index = dims.index.get(resource)
        if index is None or not len(nodes):
            used.append(0.0)
            continue
        total = totals[i] = float(nodes.allocatable[:, index].sum())
        if total > 0:
            present.add(resource)
        # (over a plain float: a fraction over numpy's would be numpy's, and so would the
        # JSON's means made of it, which only ``json`` writes and YAML's safe dump refuses)
        used.append(float(nodes.used[:, index].sum()) / total if total > 0 else 0.0)
    active: set[str] = set()
    waits: set[str] = set()
    to_add, idle = _held_and_idle(snapshot.jobs.values(), shortcuts.count_jobs_that_never_held)
    waiting = idle.total()
    waits.update(idle)
    active.update(idle)
    queues = []
    for job in to_add:
        queue = job.queue if job.has_pod_group else DEFAULT_QUEUE
        queues.append(queue)
        waits_to_start = sum(_started_counts(job.counts)) < job.min_member
        waiting += waits_to_start
        if waits_to_start:
            waits.add(queue)
        if waits_to_start or any(_holding_counts(job.counts)):
            active.add(queue)
    allocated = _allocated_by_queue(to_add, queues, dims, shortcuts.sums_by_bincount)
    weights = {q: snapshot.queues[q].weight if q in snapshot.queues else 1 for q in active}
    weight_sum = sum(weights.values())
    shares = []
    for queue in sorted(active):
        held = allocated.get(queue)
        if held is None:  # only jobs that never held anything
            held = np.zeros(len(RESOURCES))
        fractions = np.divide(held, totals, out=np.zeros(len(RESOURCES)), where=totals > 0)
        shares.append((queue, float(fractions.max()), weights[queue] / weight_sum, queue in waits))
    return Point(now, tuple(used), waiting, tuple(shares))


def _allocated_by_queue(
    jobs: list[JobInfo], queues: list[str], dims: Dims, by_bincount: bool = True
) -> dict[str, np.ndarray]:
    """Each queue's allocation of RESOURCES, summed over ``jobs`` (of ``queues``, in
    turn) in their order. ``added_in_order`` adds one job's row at a time, in order: each
    sum is the one adding the jobs one by one gives (and so the long way's), without a
    numpy step per job."""
    index = {queue: i for i, queue in enumerate(dict.fromkeys(queues))}
    sums = np.zeros((len(index), len(RESOURCES)))
    if jobs:
        # The RESOURCES the snapshot has, as (their place in a row, their column in it).
        known = [(i, dims.index[r]) for i, r in enumerate(RESOURCES) if r in dims.index]
        rows, columns = [i for i, _ in known], [column for _, column in known]
        block = np.zeros((len(jobs), len(RESOURCES)))
        block[:, rows] = np.array([job.allocated for job in jobs])[:, columns]
        at = np.fromiter((index[queue] for queue in queues), np.intp, len(queues))
        added_in_order(sums, at, block, by_bincount)
    return {queue: sums[i] for queue, i in index.items()}


def _held_and_idle(
    jobs: Collection[JobInfo], never_held_at_once: bool = True
) -> tuple[list[JobInfo], Counter[str]]:
    """The jobs to add up, and by queue how many jobs wait that were left out: those
    with no task. Such a job has held nothing (its allocation is all 0.0, never added
    to) and started nothing: adding it changes no sum, and it waits to start (unless its
    minMember is 0). Most jobs of a long backlog are PodGroups whose pods are held until
    they are admitted: counted in one step, not one by one (not ``never_held_at_once``,
    ``Shortcuts.count_jobs_that_never_held`` off: every job added up)."""
    if not never_held_at_once:
        return list(jobs), Counter()
    idle = Counter(
        [
            job.queue if job.has_pod_group else DEFAULT_QUEUE
            for job in jobs
            if not job.tasks and job.min_member > 0
        ]
    )
    return [job for job in jobs if job.tasks], idle


# --------------------------------------------------------------------------- the summary
def summary(outcome: MeasuredOutcome) -> Json:
    end = float(outcome.time)
    points = outcome.recorder.points
    spans = list(_spans(points, end))
    return {
        "throughput": _throughput(outcome, end),
        "latency": _latency(outcome),
        "utilisation": _utilisation(spans, outcome.recorder.resources),
        "fairShare": _fair_share(spans),
        "overTime": _over_time(spans, end, outcome.recorder.resources),
        "evictions": _evictions(outcome),
    }


def _spans(points: list[Point], end: float) -> Iterable[tuple[Point, float, float]]:
    """Each point with the time it holds: (point, from, to)."""
    for point, after in zip(points, [*points[1:], None], strict=True):
        until = end if after is None else after.time
        if until > point.time:
            yield point, point.time, until


def _throughput(outcome: MeasuredOutcome, end: float) -> Json:
    started = sum(1 for wait in outcome.timeline.waits.values() if wait.started is not None)
    binds = outcome.totals.binds
    return {
        "jobsStarted": started,
        "jobsPerSecond": started / end if end > 0 else 0.0,
        "podsBound": binds,
        "podsPerSecond": binds / end if end > 0 else 0.0,
    }


def _latency(outcome: MeasuredOutcome) -> Json:
    by_queue: dict[str, list[float | None]] = {}
    for wait in outcome.timeline.waits.values():
        by_queue.setdefault(wait.queue, []).append(wait.seconds)
    out = {}
    for queue, waits in sorted(by_queue.items()):
        started = sorted(s for s in waits if s is not None)
        out[queue] = {
            "jobs": len(waits),
            "started": len(started),
            "p50": percentile(started, 50),
            "p99": percentile(started, 99),
            "max": started[-1] if started else None,
        }
    return out


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile of sorted ``values`` (None when empty)."""
    if not values:
        return None
    return values[max(0, math.ceil(p / 100 * len(values)) - 1)]


def _utilisation(spans: list[tuple[Point, float, float]], present: set[str]) -> Json:
    waiting = [(p, a, b) for p, a, b in spans if p.waiting > 0]
    out: Json = {}
    for i, resource in enumerate(RESOURCES):
        if resource in present:
            out[resource] = {
                "mean": _mean(spans, lambda p, i=i: p.used[i]),
                "whileWaiting": _mean(waiting, lambda p, i=i: p.used[i]),
            }
    out["waitingSeconds"] = sum(b - a for _, a, b in waiting)
    return out


def _mean(spans: list[tuple[Point, float, float]], value: Any) -> float | None:
    total = sum(b - a for _, a, b in spans)
    if total <= 0:
        return None
    return sum(value(p) * (b - a) for p, a, b in spans) / total


def _fair_share(spans: list[tuple[Point, float, float]]) -> Json:
    sums: dict[str, list[float]] = {}  # queue -> [seconds, share·s, fair·s, below seconds]
    for point, a, b in spans:
        for queue, share, fair, waits in point.shares:
            row = sums.setdefault(queue, [0.0, 0.0, 0.0, 0.0])
            row[0] += b - a
            row[1] += share * (b - a)
            row[2] += fair * (b - a)
            if waits and share < fair - 1e-9:
                row[3] += b - a
    return {
        queue: {
            "activeSeconds": seconds,
            "share": share / seconds,
            "fairShare": fair / seconds,
            "belowFairShareSeconds": below,
        }
        for queue, (seconds, share, fair, below) in sorted(sums.items())
        if seconds > 0
    }


def _over_time(spans: list[tuple[Point, float, float]], end: float, present: set[str]) -> Json:
    """Time-weighted means per window of ``window`` seconds (at most WINDOWS of them)."""
    window = max(1.0, float(math.ceil(end / WINDOWS))) if end > 0 else 1.0
    count = max(1, math.ceil(end / window)) if end > 0 else 0
    names = [r for r in RESOURCES if r in present]
    series: dict[str, list[float]] = {name: [0.0] * count for name in [*names, "jobsWaiting"]}
    queues = sorted({q for p, _, _ in spans for q, *_ in p.shares})
    share = {q: [0.0] * count for q in queues}
    fair = {q: [0.0] * count for q in queues}
    for point, a, b in spans:
        for w in range(int(a // window), min(count, math.ceil(b / window))):
            overlap = min(b, (w + 1) * window) - max(a, w * window)
            if overlap <= 0:
                continue
            length = min(window, end - w * window)
            for name in names:
                series[name][w] += point.used[RESOURCES.index(name)] * overlap / length
            series["jobsWaiting"][w] += point.waiting * overlap / length
            for queue, s, f, _ in point.shares:
                share[queue][w] += s * overlap / length
                fair[queue][w] += f * overlap / length
    rounded = {name: [round(v, 4) for v in values] for name, values in series.items()}
    return {
        "window": window,
        **rounded,
        "share": {q: [round(v, 4) for v in values] for q, values in share.items()},
        "fairShare": {q: [round(v, 4) for v in values] for q, values in fair.items()},
    }


def _evictions(outcome: MeasuredOutcome) -> Json:
    cluster = outcome.cluster
    queue_of_group = {
        (g["metadata"]["namespace"], g["metadata"]["name"]): (g.get("spec") or {}).get(
            "queue", DEFAULT_QUEUE
        )
        for g in departures.all_groups(cluster)
    }
    by_queue: dict[str, int] = {}
    for row in departures.all_pod_rows(cluster):
        if not row.evictions:
            continue
        queue = queue_of_group.get((row.namespace, row.group or ""), DEFAULT_QUEUE)
        by_queue[queue] = by_queue.get(queue, 0) + row.evictions
    return {"total": outcome.totals.evictions, "byQueue": dict(sorted(by_queue.items()))}
