"""Two simulated runs of the same inputs, compared: what a change of conf would have done.

A run is summed up as ``RunFigures``: per job (a PodGroup, or a pod without one) its
queue, when it was submitted and when it started (``None``: it never did), and the
run's ``metrics`` object (``kbatch.sim.metrics``: utilisation, each queue's share
against its fair share, evictions). ``compare(base, other)`` gives:

- per queue: the wait (submission to start) p50 and p99 of the jobs that started
  (nearest rank, as the metrics count them), the share and fair share (averaged over
  the time the queue had work), the seconds it waited below its fair share, and its
  evictions, each for both runs;
- utilisation per resource (mean, and while work waited) for both runs;
- the jobs that would have started earlier or later under ``other``, with the
  difference in seconds (other − base; negative: earlier), largest change first, and
  those that started in one run only;
- each queue's share and fair share over time in both runs (for the report's plots).

It reads no files and runs nothing: ``figures`` takes a finished simulation (run with
a metrics recorder: ``kbatch.sim.run(..., measure=True)``), ``RunFigures.from_json``
reads what ``to_json`` wrote. ``Comparison.to_json`` is the JSON (``-o json``) and the
HTML report's data; ``to_table`` the text.
"""

from dataclasses import dataclass, field
from typing import Any

from kbatch.sim import clock, metrics
from kbatch.sim.runner import Outcome

Json = dict[str, Any]


@dataclass(frozen=True, slots=True)
class JobStart:
    queue: str
    submitted: float
    started: float | None

    @property
    def wait(self) -> float | None:
        return None if self.started is None else self.started - self.submitted


@dataclass(frozen=True, slots=True)
class RunFigures:
    """What a comparison reads of one run (``name``: how the output calls it)."""

    name: str
    jobs: dict[str, JobStart]  # "PodGroup ns/name" or "Pod ns/name"
    metrics: Json = field(default_factory=dict)  # the run's ``metrics`` object (may be {})

    def to_json(self) -> Json:
        return {
            "name": self.name,
            "jobs": {
                key: {"queue": j.queue, "submitted": j.submitted, "started": j.started}
                for key, j in sorted(self.jobs.items())
            },
            "metrics": self.metrics,
        }

    @classmethod
    def from_json(cls, data: Json) -> "RunFigures":
        """What ``to_json`` wrote; ValueError naming the field that is missing or wrong."""
        try:
            jobs = {
                str(key): JobStart(
                    str(job["queue"]),
                    float(job["submitted"]),
                    None if job["started"] is None else float(job["started"]),
                )
                for key, job in data["jobs"].items()
            }
            return cls(str(data["name"]), jobs, dict(data.get("metrics") or {}))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(
                f"run figures: expected name, jobs{{queue, submitted, started}}: {exc}"
            ) from exc


def figures(outcome: Outcome, name: str) -> RunFigures:
    """The figures of a finished simulation (its ``metrics`` only if it was measured)."""
    jobs = {
        f"{kind} {namespace}/{job}": JobStart(wait.queue, wait.submitted, wait.started)
        for (kind, namespace, job), wait in outcome.timeline.waits.items()
    }
    measured = metrics.summary(outcome) if isinstance(outcome, metrics.MeasuredOutcome) else {}
    return RunFigures(name, jobs, measured)


@dataclass(frozen=True, slots=True)
class Comparison:
    base: RunFigures
    other: RunFigures

    def queues(self) -> list[str]:
        names = {j.queue for j in self.base.jobs.values()} | {
            j.queue for j in self.other.jobs.values()
        }
        for run in (self.base, self.other):
            names |= set(run.metrics.get("fairShare", {}))
            names |= set(run.metrics.get("evictions", {}).get("byQueue", {}))
        return sorted(names)

    def to_json(self) -> Json:
        runs = (self.base, self.other)
        return {
            "runs": [run.name for run in runs],
            "queues": {queue: _queue(runs, queue) for queue in self.queues()},
            "utilisation": _utilisation(runs),
            "evictions": [_evictions_total(run) for run in runs],
            "jobs": _moved_jobs(self.base, self.other),
            "overTime": [_share_over_time(run) for run in runs],
        }

    def to_table(self) -> str:
        return to_table(self.to_json())


def compare(base: RunFigures, other: RunFigures) -> Comparison:
    return Comparison(base, other)


def wait_percentiles(run: RunFigures, queue: str) -> tuple[float | None, float | None]:
    """p50 and p99 (nearest rank) of the waits of ``queue``'s jobs that started."""
    waits = sorted(w for j in run.jobs.values() if j.queue == queue and (w := j.wait) is not None)
    return metrics.percentile(waits, 50), metrics.percentile(waits, 99)


def _queue(runs: tuple[RunFigures, RunFigures], queue: str) -> Json:
    row: Json = {
        "waitP50": [],
        "waitP99": [],
        "share": [],
        "fairShare": [],
        "belowFairShareSeconds": [],
    }
    row["evictions"] = []
    for run in runs:
        p50, p99 = wait_percentiles(run, queue)
        row["waitP50"].append(p50)
        row["waitP99"].append(p99)
        share = run.metrics.get("fairShare", {}).get(queue, {})
        for key in ("share", "fairShare", "belowFairShareSeconds"):
            row[key].append(share.get(key))
        row["evictions"].append(run.metrics.get("evictions", {}).get("byQueue", {}).get(queue, 0))
    return row


def _utilisation(runs: tuple[RunFigures, RunFigures]) -> Json:
    names = sorted(
        {
            k
            for run in runs
            for k, v in run.metrics.get("utilisation", {}).items()
            if isinstance(v, dict)
        }
    )
    out: Json = {}
    for name in names:
        values = [run.metrics.get("utilisation", {}).get(name) or {} for run in runs]
        out[name] = {
            "mean": [v.get("mean") for v in values],
            "whileWaiting": [v.get("whileWaiting") for v in values],
        }
    return out


def _evictions_total(run: RunFigures) -> int:
    return int(run.metrics.get("evictions", {}).get("total", 0))


def _moved_jobs(base: RunFigures, other: RunFigures) -> Json:
    """The jobs whose start differs: ``earlier`` and ``later`` (each row: job, queue, the
    two starts, the difference other − base), largest change first, then by name;
    ``onlyBase`` / ``onlyOther``: started in that run only; ``same``: how many started
    at the same time in both."""
    earlier: list[Json] = []
    later: list[Json] = []
    only_base: list[str] = []
    only_other: list[str] = []
    same = 0
    for key in sorted(base.jobs.keys() | other.jobs.keys()):
        a, b = base.jobs.get(key), other.jobs.get(key)
        start_a = a.started if a is not None else None
        start_b = b.started if b is not None else None
        if start_a is None and start_b is None:
            continue
        queue = a.queue if a is not None else b.queue if b is not None else ""
        if start_b is None:
            only_base.append(key)
        elif start_a is None:
            only_other.append(key)
        elif start_a == start_b:
            same += 1
        else:
            row = {
                "job": key,
                "queue": queue,
                "started": [start_a, start_b],
                "difference": start_b - start_a,
            }
            (earlier if start_b < start_a else later).append(row)

    def by_change(row: Json) -> tuple[float, str]:
        return -abs(row["difference"]), row["job"]

    return {
        "earlier": sorted(earlier, key=by_change),
        "later": sorted(later, key=by_change),
        "onlyBase": only_base,
        "onlyOther": only_other,
        "same": same,
    }


def _share_over_time(run: RunFigures) -> Json:
    over = run.metrics.get("overTime") or {}
    return {
        "window": over.get("window"),
        "share": over.get("share", {}),
        "fairShare": over.get("fairShare", {}),
    }


# --------------------------------------------------------------------------- the table
def to_table(comparison: Json, limit: int = 20) -> str:
    """``Comparison.to_json`` as text: queues, utilisation, evictions, moved jobs (the
    ``limit`` largest changes each way)."""
    base, other = comparison["runs"]
    rows = []
    for queue, q in comparison["queues"].items():
        rows.append(
            [
                queue,
                _pair(q["waitP50"], _seconds),
                _pair(q["waitP99"], _seconds),
                _pair(q["share"], _percent),
                _pair(q["fairShare"], _percent),
                _pair(q["belowFairShareSeconds"], _seconds),
                _pair(q["evictions"], str),
            ]
        )
    header = ["QUEUE", "WAIT P50", "WAIT P99", "SHARE", "FAIR SHARE", "BELOW FAIR", "EVICTIONS"]
    sections = [
        f"COMPARED: {base} → {other} (each cell: {base} → {other})",
        _table("QUEUES", header, rows),
    ]
    use = [
        [name, _pair(v["mean"], _percent), _pair(v["whileWaiting"], _percent)]
        for name, v in comparison["utilisation"].items()
    ]
    sections.append(_table("UTILISATION", ["RESOURCE", "MEAN", "WHILE WORK WAITS"], use))
    jobs = comparison["jobs"]
    for title, moved in (("STARTED EARLIER", jobs["earlier"]), ("STARTED LATER", jobs["later"])):
        shown = [
            [
                r["job"],
                r["queue"],
                _seconds(r["started"][0]),
                _seconds(r["started"][1]),
                _signed(r["difference"]),
            ]
            for r in moved[:limit]
        ]
        more = f"\n(and {len(moved) - limit} more)" if len(moved) > limit else ""
        sections.append(
            _table(
                f"{title} ({len(moved)})",
                ["JOB", "QUEUE", base, other, "CHANGE"],
                shown,
            )
            + more
        )
    evictions = comparison["evictions"]
    sections.append(
        f"evictions: {evictions[0]} → {evictions[1]}; "
        f"jobs started at the same time: {jobs['same']}; "
        f"started only under {base}: {len(jobs['onlyBase'])}, "
        f"only under {other}: {len(jobs['onlyOther'])}"
    )
    return "\n\n".join(sections) + "\n"


def _pair(values: list[Any], show: Any) -> str:
    return " → ".join("-" if v is None else show(v) for v in values)


def _seconds(value: float) -> str:
    return clock.format_duration(value)


def _signed(value: float) -> str:
    return ("-" if value < 0 else "+") + clock.format_duration(abs(value))


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _table(title: str, header: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return f"{title}: none"
    cells = [header, *rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [
        "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return f"{title}\n" + "\n".join(lines)
