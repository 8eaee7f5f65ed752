"""How far the ETA was off: estimates made while jobs waited, scored against when they
really started.

Each estimate was made at ``at`` (seconds into a recording) for a job waiting then; it
said the job starts ``seconds`` later (None: it said "unknown" or "later than"), with a
confidence (high, medium, low, none). The job really started at the first start after
``at``; its wait from then is ``start − at`` and the estimate's error is
``|seconds − wait| / wait``: relative to the wait that was left, so a 2-minute miss is
small on a 2-hour wait and large on a 3-minute one. ``early``: the share of estimates
that said the job starts before it did (the forecast's lean). ``newer first``: the share
of estimates whose job saw a job submitted after the question start before it (when
``seen`` says when each job was first seen): the forecast assumes no new work, and this
says how often that held (a newer job that went first need not have delayed it: one
that backfilled took nothing it needed).

Estimates are tallied by confidence and by that wait (all; ≤ 5 min; > 5 min): how many,
of how many jobs, the median and the 90th percentile of the error (linear between
ranks, as numpy's percentile). An estimate of a job that had not started when the
recording ended is counted apart (with how many of them said it starts after the end),
and so is one that gave no time (a "later than" one is counted right when the job
indeed started later than that, or never). The target: for
high-confidence estimates of waits over 5 minutes, a median error of at most 20%.

Pure: estimates and start times in, a JSON-ready table out.
"""

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CONFIDENCES = ("high", "medium", "low", "none")
LONG_WAIT = 300.0  # seconds: the target is for waits longer than this
TARGET = 0.20  # the target's median relative error
BUCKETS = ("all", "wait <= 5 min", "wait > 5 min")


@dataclass(frozen=True, slots=True)
class Asked:
    """One estimate: of ``job``, made at ``at`` (seconds into the recording), that it
    starts ``seconds`` later (None: no time given; ``later_than``: not before that)."""

    job: str
    at: float
    seconds: float | None
    confidence: str
    later_than: float | None = None


def first_start(starts: Sequence[float], at: float) -> float | None:
    """The first of ``starts`` (sorted) at or after ``at``; None when there is none."""
    return next((s for s in starts if s >= at), None)


def score(
    asked: Iterable[Asked],
    starts: Mapping[str, Sequence[float]],
    end: float | None = None,
    seen: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The table: per confidence, per wait bucket, the count, jobs, median and p90 of the
    relative error; the estimates of jobs that had not started by ``end`` (the last time
    seen; of those, how many said so: a start after it), and those with no time.
    ``seen``: when each job was first seen (for ``newer first``)."""
    errors: dict[tuple[str, str], list[float]] = {}
    early: dict[tuple[str, str], int] = {}  # estimates of a start before the real one
    newer: dict[tuple[str, str], int] = {}  # ... whose job a newer job started before
    overtaking = _NewerStarts(starts, seen or {})
    jobs: dict[tuple[str, str], set[str]] = {}
    never: dict[str, int] = dict.fromkeys(CONFIDENCES, 0)
    past_end = 0  # of those, estimates of a start after the end: not wrong, not scored
    no_time = {"estimates": 0, "later_than": 0, "later_than_held": 0}
    waits: list[float] = []
    for one in asked:
        start = first_start(starts.get(one.job, ()), one.at)
        confidence = one.confidence if one.confidence in CONFIDENCES else "none"
        if start is None:
            never[confidence] += 1
            if one.seconds is not None and end is not None and one.at + one.seconds > end:
                past_end += 1
            if one.seconds is None and one.later_than is not None:
                no_time["later_than"] += 1
                no_time["later_than_held"] += 1  # it never started: later indeed
            elif one.seconds is None:
                no_time["estimates"] += 1
            continue
        wait = start - one.at
        if one.seconds is None:
            if one.later_than is not None:
                no_time["later_than"] += 1
                no_time["later_than_held"] += wait >= one.later_than
            else:
                no_time["estimates"] += 1
            continue
        if wait <= 0:
            continue  # it started in the very instant it was asked about: no wait to score
        waits.append(wait)
        error = abs(one.seconds - wait) / wait
        for bucket in ("all", "wait <= 5 min" if wait <= LONG_WAIT else "wait > 5 min"):
            errors.setdefault((confidence, bucket), []).append(error)
            early[confidence, bucket] = early.get((confidence, bucket), 0) + (one.seconds < wait)
            overtaken = overtaking.between(one.at, start)
            newer[confidence, bucket] = newer.get((confidence, bucket), 0) + overtaken
            jobs.setdefault((confidence, bucket), set()).add(one.job)
    rows = [
        _row(
            confidence,
            bucket,
            errors[confidence, bucket],
            jobs,
            early[confidence, bucket],
            newer[confidence, bucket] if seen is not None else None,
        )
        for confidence in CONFIDENCES
        for bucket in BUCKETS
        if (confidence, bucket) in errors
    ]
    return {
        "rows": rows,
        "scored": len(waits),
        "never_started": never,
        "never_started_estimated_past_the_end": past_end,
        "no_time": no_time,
        "target": _target(errors.get(("high", "wait > 5 min"), [])),
    }


def _row(
    confidence: str,
    bucket: str,
    errors: list[float],
    jobs: Mapping[tuple[str, str], set[str]],
    early: int,
    newer: int | None,
) -> dict[str, Any]:
    return {
        "confidence": confidence,
        "wait": bucket,
        "estimates": len(errors),
        "jobs": len(jobs.get((confidence, bucket), ())),
        "median": _rounded(float(np.median(errors))),
        "p90": _rounded(float(np.percentile(errors, 90))),
        "early": _rounded(early / len(errors)),
        "newer_first": None if newer is None else _rounded(newer / len(errors)),
    }


class _NewerStarts:
    """The starts of every job with when it was first seen, by start time: did a job
    first seen after ``at`` start after ``at`` and before ``start``?"""

    def __init__(self, starts: Mapping[str, Sequence[float]], seen: Mapping[str, float]):
        events = sorted(
            (s, seen[job]) for job, times in starts.items() if job in seen for s in times
        )
        self.times = [s for s, _ in events]
        self.seen = [first for _, first in events]

    def between(self, at: float, start: float) -> bool:
        low, high = bisect_right(self.times, at), bisect_right(self.times, start - 1e-9)
        return any(first > at for first in self.seen[low:high])


def _target(errors: list[float]) -> dict[str, Any]:
    """Does the median error of high-confidence estimates of waits over 5 minutes stay
    within ``TARGET``? None when there is no such estimate to judge by."""
    median = float(np.median(errors)) if errors else None
    return {
        "confidence": "high",
        "wait_over_seconds": LONG_WAIT,
        "median_at_most": TARGET,
        "estimates": len(errors),
        "median": None if median is None else _rounded(median),
        "holds": None if median is None else median <= TARGET,
    }


def _rounded(value: float) -> float:
    return round(value, 4)


def table(scored: Mapping[str, Any]) -> str:
    """The table in words, one line per confidence and wait bucket, then what was left
    out and the target."""
    lines = [
        f"{'confidence':<11}{'wait':<15}{'estimates':>10}{'jobs':>7}{'median':>9}{'p90':>9}"
        f"{'early':>8}{'newer first':>13}"
    ]
    for row in scored["rows"]:
        newer = row.get("newer_first")
        lines.append(
            f"{row['confidence']:<11}{row['wait']:<15}{row['estimates']:>10}{row['jobs']:>7}"
            f"{_percent(row['median']):>9}{_percent(row['p90']):>9}{_percent(row['early']):>8}"
            f"{'-' if newer is None else _percent(newer):>13}"
        )
    never = scored["never_started"]
    counts = ", ".join(f"{c} {n}" for c, n in never.items() if n)
    lines.append(
        f"estimates of jobs not started by the end: {sum(never.values())}"
        + (f" ({counts})" if counts else "")
        + f", {scored['never_started_estimated_past_the_end']} of them estimating a start "
        "after it"
    )
    no_time = scored["no_time"]
    lines.append(
        f"estimates with no time: {no_time['estimates']} unknown, {no_time['later_than']} "
        f"'later than' ({no_time['later_than_held']} of them right)"
    )
    target = scored["target"]
    if target["holds"] is None:
        verdict = "not judged: no high-confidence estimate of a wait over 5 min"
    else:
        verdict = (
            f"{'holds' if target['holds'] else 'FAILS'}: median {_percent(target['median'])} "
            f"over {target['estimates']} estimates"
        )
    lines.append(f"target (high confidence, wait > 5 min, median <= 20%): {verdict}")
    return "\n".join(lines)


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"
