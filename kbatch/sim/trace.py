"""``kbatch bench --trace``: one simulated day of a mixed batch workload, timed.

The workload (seeded, so every run is the same one): ``nodes`` Nodes of 32 cpu /
256Gi / 110 pods; 8 queues ``q0``..``q7`` of weights 1, 1, 1, 1, 2, 2, 3, 3 that get
25, 20, 15, 10, 10, 8, 7 and 5 % of the jobs; ``jobs`` jobs (100 per node, 100,000
on the full 1,000 nodes) submitted over the day following a daily curve — the rate
is ``1 − 0.6·cos(2π(t − 3h)/24h)`` times the mean, lowest at 03:00 and 4× that at
15:00. A job is a gang of 2^k pods (k = 0..6, 1 to 64 pods, each size half as likely
as the one before), every pod asking 1, 2, 4 or 8 cpu (40, 30, 20, 10 %) and 4Gi
per cpu, all running one shifted-exponential runtime: 2 minutes plus an exponential
of mean 25 minutes. On average that fills about half the cluster, near nine tenths
in the afternoon, when work waits.

Each job is what ``kbatch simulate --workload`` makes of an Armada job: a batch/v1
Job (held until its PodGroup is admitted) and a PodGroup of ``minMember`` = its
pods (``kbatch.sim.workload.job_objects``). The default scheduler conf runs it
(``run``'s ``conf``: another).

``hours`` simulates only the first hours of the day (the jobs submitted by then,
until then); fewer ``nodes`` scale the jobs down with them, so the load stays the
same. The result is one JSON object: the workload's size, the simulated and wall
seconds, simulated seconds per wall second, sessions, binds, evictions.

``declared_runtimes`` is the share of the jobs (seeded, drawn apart from the rest, so
the day's jobs are the same whatever it is) that declare their runtime as users do on
Kubernetes: ``activeDeadlineSeconds`` on their pods, the runtime rounded up to the next
whole minute (a walltime the user knows). The pod still ends at its runtime, before its
deadline; the scheduler does not read the deadline, so only what ``kbatch explain
--eta`` can foresee changes (it takes a deadline as the pod's runtime).
"""

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kbatch.api import API_VERSION
from kbatch.config import SchedulerConf
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.sim import manifests, runner
from kbatch.sim.armada_spec import NAMESPACE
from kbatch.sim.armada_templates import Template
from kbatch.sim.workload import job_objects

DAY = 86_400.0
FULL_NODES = 1_000
JOBS_PER_NODE = 100
QUEUE_WEIGHTS = (1, 1, 1, 1, 2, 2, 3, 3)
QUEUE_SHARES = (0.25, 0.20, 0.15, 0.10, 0.10, 0.08, 0.07, 0.05)
GANG_SIZES = tuple(2**k for k in range(7))  # 1 .. 64 pods
CPU_CHOICES = (1, 2, 4, 8)
CPU_SHARES = (0.4, 0.3, 0.2, 0.1)
MIN_RUNTIME = 120.0
TAIL_MEAN = 1_500.0
CURVE_DEPTH = 0.6  # the daily curve's swing around its mean
LOWEST_AT = 3 * 3600.0  # 03:00
DECLARED_STREAM = 1  # the seed's second stream: which jobs declare their runtime
DEADLINE = "activeDeadlineSeconds"
Object = dict[str, Any]
SOURCE = "<trace>"


@dataclass(frozen=True, slots=True)
class TraceSpec:
    nodes: int = FULL_NODES
    hours: float = 24.0
    seed: int = 0
    declared_runtimes: float = 0.0  # the share of jobs with activeDeadlineSeconds

    def __post_init__(self) -> None:
        if self.nodes <= 0:
            raise ValueError(f"--trace-nodes: expected a positive number, not {self.nodes}")
        if not 0 < self.hours <= 24:
            raise ValueError(
                f"--trace-hours: expected more than 0 and at most 24, not {self.hours}"
            )
        if not 0 <= self.declared_runtimes <= 1:  # (NaN too)
            raise ValueError(
                "--trace-declared-runtimes: expected a fraction from 0 to 1, not "
                f"{self.declared_runtimes}"
            )

    @property
    def jobs_per_day(self) -> int:
        return self.nodes * JOBS_PER_NODE

    @property
    def seconds(self) -> float:
        return self.hours * 3600.0


@dataclass(frozen=True, slots=True)
class TraceJob:
    name: str
    queue: str
    submit_at: float
    pods: int
    cpu: int
    runtime: float
    deadline: int | None = None  # activeDeadlineSeconds of its pods (None: not declared)


def submission_times(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` sorted times in [0, DAY) drawn from the daily curve (inverse CDF)."""
    grid = np.linspace(0.0, DAY, 24 * 60 + 1)
    phase = 2 * math.pi * (grid - LOWEST_AT) / DAY
    start = 2 * math.pi * -LOWEST_AT / DAY
    cumulative = grid - CURVE_DEPTH * DAY / (2 * math.pi) * (np.sin(phase) - math.sin(start))
    drawn = np.sort(rng.uniform(0.0, cumulative[-1], count))
    times: np.ndarray = np.interp(drawn, cumulative, grid)
    return times


def trace_jobs(spec: TraceSpec) -> list[TraceJob]:
    """The day's jobs submitted before ``spec.hours``, in submission order."""
    return list(iter_trace_jobs(spec))


def iter_trace_jobs(spec: TraceSpec) -> Iterator[TraceJob]:
    """``trace_jobs``, made one by one (only the draws, a few numbers a job, are held)."""
    rng = np.random.default_rng(spec.seed)
    count = spec.jobs_per_day
    times = submission_times(count, rng)
    size_weights = np.array([1.0 / size for size in GANG_SIZES])
    sizes = rng.choice(GANG_SIZES, size=count, p=size_weights / size_weights.sum())
    queues = rng.choice(len(QUEUE_WEIGHTS), size=count, p=QUEUE_SHARES)
    cpus = rng.choice(CPU_CHOICES, size=count, p=CPU_SHARES)
    runtimes = MIN_RUNTIME + rng.exponential(TAIL_MEAN, size=count)
    # Its own generator: the share declaring changes no other draw, and a larger share
    # declares for the same jobs and more.
    declares = np.random.default_rng([spec.seed, DECLARED_STREAM]).uniform(size=count)
    for i in range(count):
        if times[i] >= spec.seconds:
            return  # (the times are sorted)
        runtime = round(float(runtimes[i]), 3)
        yield TraceJob(
            f"job-{i:06d}",
            f"q{queues[i]}",
            round(float(times[i]), 3),
            int(sizes[i]),
            int(cpus[i]),
            runtime,
            walltime(runtime) if declares[i] < spec.declared_runtimes else None,
        )


def walltime(runtime: float) -> int:
    """The runtime rounded up to the next whole minute: the deadline a user who knows
    how long the job runs would declare (never before it ends)."""
    return 60 * math.ceil(runtime / 60)


def trace_objects(spec: TraceSpec) -> list[Object]:
    """The cluster and the workload as manifests (the jobs' due at their submission)."""
    return list(iter_trace_objects(spec))


def iter_trace_objects(spec: TraceSpec) -> Iterator[Object]:
    """``trace_objects``, made one by one: the cluster first, then the jobs in
    submission order."""
    yield {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    for i, weight in enumerate(QUEUE_WEIGHTS):
        yield {
            "apiVersion": API_VERSION,
            "kind": "Queue",
            "metadata": {"name": f"q{i}"},
            "spec": {"weight": weight},
        }
    yield from (_node(n) for n in range(spec.nodes))
    templates: dict[tuple[str, int, int], Template] = {}
    for job in iter_trace_jobs(spec):
        key = (job.queue, job.pods, job.cpu)
        template = templates.get(key)
        if template is None:
            template = templates[key] = _template(*key)
        made = job_objects(template, job.name, job.runtime, job.submit_at)
        if job.deadline is not None:
            (held,) = (obj for obj in made if obj["kind"] == "Job")
            held["spec"]["template"]["spec"][DEADLINE] = job.deadline  # (its own copy)
        yield from made


def trace_manifests(spec: TraceSpec) -> Iterator[manifests.Manifest]:
    """The trace's objects as ``manifests.load_documents`` loads them from
    ``trace_objects`` (the same source, time and order each), one by one and in time
    order: what ``runner.Simulation`` takes as ``arriving``."""
    for order, obj in enumerate(iter_trace_objects(spec)):
        (item,) = manifests.load_documents([obj], SOURCE).objects
        yield manifests.Manifest(item.obj, f"{SOURCE}, document {order + 1}", item.submit_at, order)


def _node(index: int) -> Object:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{index:05d}"},
        "status": {
            "allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _template(queue: str, pods: int, cpu: int) -> Template:
    """A job shape, as ``job_objects`` reads it (a gang of ``pods``)."""
    requests = {"cpu": str(cpu), "memory": f"{4 * cpu}Gi"}
    return Template(
        id=f"{queue}-{pods}x{cpu}",
        queue=queue,
        number=1,
        priority_class="",
        pod_spec={"containers": [{"name": "main", "resources": {"requests": requests}}]},
        annotations={},
        minimum=MIN_RUNTIME,
        tail_mean=TAIL_MEAN,
        earliest=0.0,
        after_dependencies=0.0,
        cardinality=pods,
        uniformity_label=None,
        job_set="",
        dependencies=(),
        repeat=None,
    )


def run(
    spec: TraceSpec, record: tuple[Path, int] | None = None, conf: SchedulerConf | None = None
) -> dict[str, Any]:
    """Simulate the trace under ``conf`` (None: the default conf); what it did and how
    fast (wall time: the simulation, with the making of the jobs as they come due, and
    the writing of its recording when ``record``, a directory and a bound, asks)."""
    jobs = pods = 0
    for job in iter_trace_jobs(spec):
        jobs, pods = jobs + 1, pods + job.pods
    # Only the totals are read: the run keeps no history (``runner.Options.history``), and
    # the jobs are made as they come due (the input held is the next few, not the day).
    options = runner.Options(until=spec.seconds, record=record, history=False)
    simulation = runner.Simulation(
        manifests.Manifests(), conf or default_conf(), options, arriving=trace_manifests(spec)
    )
    started = time.perf_counter()
    outcome = simulation.run()
    wall = time.perf_counter() - started
    return {
        "trace": described(spec),
        "jobs": jobs,
        "pods": pods,
        "simulated_seconds": outcome.time,
        "wall_seconds": round(wall, 3),
        "simulated_per_wall_second": round(outcome.time / wall, 1) if wall > 0 else None,
        "sessions": outcome.totals.sessions,
        "binds": outcome.totals.binds,
        "evictions": outcome.totals.evictions,
    }


def described(spec: TraceSpec) -> dict[str, Any]:
    """The trace as a result names it: its nodes, hours and seed, and the share of jobs
    declaring their runtime when any does (the default day's line stays as it was)."""
    named: dict[str, Any] = {"nodes": spec.nodes, "hours": spec.hours, "seed": spec.seed}
    if spec.declared_runtimes:
        named["declared_runtimes"] = spec.declared_runtimes
    return named
