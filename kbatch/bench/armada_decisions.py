"""The decisions of one simulated run, by Armada's simulator or by kbatch's, in one shape
to compare: when the first big job started, submission-to-start p50/p99 per queue, and
how busy the cluster's cpu was while work waited.

Armada's simulator writes ``jobs.parquet`` into its output folder: one row per job run
that ended (succeeded, preempted or cancelled), with the job's queue, its cpu request,
and its submission, start and end times in whole seconds of simulated time (from 0).
kbatch's simulator prints its JSON (``kbatch simulate --output json``): the per-queue
latency and cpu-while-waiting of its ``metrics``, and events from which a job's
submission (its Job's first event) and start (its first pod's ``Scheduled``) are read.

A *big job* is one of the workload's template with the most cpu (then memory): its
first to start, and how long it had waited. Queues are named as kbatch names them
(Armada's names lowercased, ``kbatch.sim.armada_spec.slug``).
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbatch.bench import parquet
from kbatch.cluster.quantity import amount
from kbatch.sim.armada_spec import Reader, read_yaml, slug
from kbatch.sim.armada_templates import Template, expand_repeats, read_queue
from kbatch.sim.metrics import percentile

Json = dict[str, Any]
MILLI = 1000.0  # kbatch's cpu amounts are millicores; Armada writes cores
JOB_COLUMNS = (
    "queue",
    "job_id",
    "cpu",
    "state",
    "submitted_time",
    "scheduled_time",
    "finished_time",
)


@dataclass(frozen=True, slots=True)
class BigJob:
    """The workload's biggest template: its queue (kbatch's name), id, cpu (cores) and
    memory (bytes), as Armada's output gives a job's requests."""

    queue: str
    template: str
    cpu: float
    memory: float


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a job in Armada's output: its job, queue, cpu and times (seconds)."""

    job: str
    queue: str
    cpu: float
    submitted: float
    started: float
    finished: float
    state: str


def big_job(workload: Path) -> BigJob | None:
    """The workload's template with the most cpu, then memory (None: no template)."""
    reader = Reader(str(workload))
    document = reader.fields(read_yaml(workload), "", None)
    raw_queues = reader.items(document.get("queues"), "queues")
    templates: list[Template] = []
    for i, raw in enumerate(raw_queues):
        templates += read_queue(reader, raw, f"queues[{i}]").templates
    best: BigJob | None = None
    for t in expand_repeats(templates):
        requests = t.pod_spec["containers"][0]["resources"].get("requests", {})
        cpu = amount("cpu", requests.get("cpu", 0)) / MILLI
        memory = amount("memory", requests.get("memory", 0))
        if best is None or (cpu, memory) > (best.cpu, best.memory):
            best = BigJob(t.queue, t.id, cpu, memory)
    return best


def cluster_cpu(cluster: Path) -> float:
    """The ClusterSpec's cpu cores in all: number × totalResources.resources.cpu, summed."""
    reader = Reader(str(cluster))
    spec = reader.fields(read_yaml(cluster), "", None)
    total = 0.0
    for i, raw in enumerate(reader.items(spec.get("clusters"), "clusters")):
        at = f"clusters[{i}]"
        templates = reader.fields(raw, at, None).get("nodeTemplates")
        for j, node in enumerate(reader.items(templates, f"{at}.nodeTemplates")):
            where = f"{at}.nodeTemplates[{j}]"
            fields = reader.fields(node, where, None)
            number = reader.integer(fields.get("number", 0), f"{where}.number")
            total_resources = reader.fields(fields.get("totalResources"), where, None)
            resources = reader.quantities(total_resources.get("resources"), f"{where}.resources")
            total += number * amount("cpu", resources.get("cpu", 0)) / MILLI
    return total


# --------------------------------------------------------------------------- Armada
def armada_runs(jobs_parquet: Path) -> list[Run]:
    """The job runs in Armada's ``jobs.parquet``, checked to have the columns read."""
    columns = parquet.read_columns(jobs_parquet)
    missing = [c for c in JOB_COLUMNS if c not in columns]
    if missing:
        raise parquet.ParquetError(f"{jobs_parquet}: no column {', '.join(missing)}")
    rows = zip(*(columns[c] for c in JOB_COLUMNS), strict=True)
    return [
        Run(job, slug(queue), float(cpu), float(sub), float(start), float(end), state)
        for queue, job, cpu, state, sub, start, end in rows
    ]


def armada_decisions(runs: list[Run], big: BigJob | None, cpu_total: float) -> Json:
    """Armada's output as decisions: a job's wait is from its submission to its first
    run's start; it waits again from a preemption to its next run's start."""
    by_job: dict[str, list[Run]] = {}
    for run in runs:
        by_job.setdefault(run.job, []).append(run)
    waits_by_queue: dict[str, list[float]] = {}
    first_starts: list[tuple[float, float]] = []  # the big jobs' (start, wait)
    waiting: list[tuple[float, float]] = []  # (from, to) of every wait
    busy: list[tuple[float, float, float]] = []  # (from, to, cpu) of every run
    for job_runs in by_job.values():
        job_runs.sort(key=lambda r: r.started)
        first = job_runs[0]
        wait = first.started - first.submitted
        waits_by_queue.setdefault(first.queue, []).append(wait)
        if big is not None and first.queue == big.queue and math.isclose(first.cpu, big.cpu):
            first_starts.append((first.started, wait))
        ready = first.submitted
        for run in job_runs:
            waiting.append((ready, run.started))
            busy.append((run.started, run.finished, run.cpu))
            ready = run.finished
    return {
        "first_big_job_wait": min(first_starts)[1] if first_starts else None,
        "queues": _queues(waits_by_queue),
        "cpu_while_waiting": _busy_while_waiting(waiting, busy, cpu_total),
        "end": max((r.finished for r in runs), default=0.0),
    }


def _queues(waits_by_queue: dict[str, list[float]]) -> Json:
    out = {}
    for queue, waits in sorted(waits_by_queue.items()):
        started = sorted(waits)
        out[queue] = {
            "started": len(started),
            "p50": percentile(started, 50),
            "p99": percentile(started, 99),
        }
    return out


def _busy_while_waiting(
    waiting: Iterable[tuple[float, float]], busy: Iterable[tuple[float, float, float]], total: float
) -> float | None:
    """The cluster's cpu in use, as a fraction, averaged over the time some job waited."""
    changes: dict[float, list[float]] = {}  # time: [waiting jobs' change, cpu's change]
    for start, end in waiting:
        if end > start:
            changes.setdefault(start, [0, 0])[0] += 1
            changes.setdefault(end, [0, 0])[0] -= 1
    for start, end, cpu in busy:
        if end > start:
            changes.setdefault(start, [0, 0])[1] += cpu
            changes.setdefault(end, [0, 0])[1] -= cpu
    jobs = used = seconds = area = 0.0
    last = None
    for time in sorted(changes):
        if last is not None and jobs > 0:
            seconds += time - last
            area += used * (time - last)
        jobs += changes[time][0]
        used += changes[time][1]
        last = time
    if seconds == 0 or total <= 0:
        return None
    return area / seconds / total


# --------------------------------------------------------------------------- kbatch
def kbatch_decisions(result: Json, big: BigJob | None) -> Json:
    """kbatch's JSON (with ``metrics``) as decisions."""
    metrics = result.get("metrics")
    if not isinstance(metrics, dict):
        raise ValueError("kbatch's simulator output has no 'metrics' (was --workload given?)")
    queues = {
        queue: {"started": q["started"], "p50": q["p50"], "p99": q["p99"]}
        for queue, q in sorted(metrics["latency"].items())
        if q["started"]
    }
    return {
        "first_big_job_wait": _first_big_wait(result, big),
        "queues": queues,
        "cpu_while_waiting": metrics["utilisation"]["cpu"]["whileWaiting"]
        if metrics["utilisation"].get("waitingSeconds")
        else None,
        "end": float(result["time"]),
    }


def _first_big_wait(result: Json, big: BigJob | None) -> float | None:
    """The wait of the big template's first job to start: from its Job's first event
    (its submission) to its first pod's ``Scheduled``."""
    if big is None:
        return None
    prefix = slug(big.template) + "-"
    groups = {
        pg["name"]
        for pg in result.get("podGroups", [])
        if pg.get("queue") == big.queue and _of_template(pg["name"], prefix)
    }
    group_of_pod = {p["name"]: p.get("podGroup") for p in result.get("pods", [])}
    submitted: dict[str, float] = {}
    started: dict[str, float] = {}
    for event in result.get("events", []):
        name, kind = event["name"], event["kind"]
        if kind == "Job" and name in groups:
            submitted.setdefault(name, event["time"])
        elif kind == "Pod" and event["reason"] == "Scheduled":
            group = group_of_pod.get(name)
            if group is not None and group in groups:
                started.setdefault(group, event["time"])
    firsts = sorted((t, t - submitted[g]) for g, t in started.items() if g in submitted)
    return firsts[0][1] if firsts else None


def _of_template(name: str, prefix: str) -> bool:
    """Whether a PodGroup's name is ``<template id>-<n>``."""
    return name.startswith(prefix) and name[len(prefix) :].isdigit()
