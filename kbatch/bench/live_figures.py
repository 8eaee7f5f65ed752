"""The live benchmark's figures, made of what a run saw (no cluster, no clock): each
run's JSON line from when each pod was created and first seen bound, and the
min/median/max table over the runs, in markdown (also from JSON lines kept in files,
``read_lines``).
"""

from __future__ import annotations

import heapq
import json
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kbatch.bench import live_workload as workload

# The keys every JSON line has, in this order (more may follow).
LINE_KEYS = (
    "scheduler",
    "scenario",
    "nodes",
    "pods",
    "round",
    "seconds_to_all_bound",
    "seconds_to_first_bind",
    "binds_per_second",
    "p50_seconds",
    "p99_seconds",
    "gang_p50_seconds",
    "gang_p99_seconds",
    "peak_rss_bytes",
    "cpu_seconds",
    "max_partly_bound_pods",
    "api_requests",
    "error",
)


def percentile(values: Sequence[float], fraction: float) -> float | None:
    """The ``fraction`` quantile of ``values`` by linear interpolation; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = fraction * (len(ordered) - 1)
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def gang_latencies(
    created: Mapping[str, float], bound: Mapping[str, float], gangs: Mapping[str, str]
) -> list[float]:
    """Per gang wholly bound: from its last pod's creation to its last pod's bind."""
    members: dict[str, list[str]] = {}
    for name, gang in gangs.items():
        members.setdefault(gang, []).append(name)
    out = []
    for names in members.values():
        if all(n in bound and n in created for n in names):
            out.append(max(bound[n] for n in names) - max(created[n] for n in names))
    return out


def bind_spreads(bound: Mapping[str, float], gangs: Mapping[str, str]) -> dict[str, float]:
    """Per gang with a pod bound: from its first pod's bind to its last one's so far. A
    scheduler that places a gang whole still binds it one request at a time, so a gang
    whose binds spread over more than the grace of ``max_partly_bound`` counts there
    even if none of it waited on another's room: its spread tells the two apart."""
    first: dict[str, float] = {}
    last: dict[str, float] = {}
    for name, when in bound.items():
        gang = gangs[name]
        first[gang] = min(when, first.get(gang, when))
        last[gang] = max(when, last.get(gang, when))
    return {gang: last[gang] - first[gang] for gang in first}


def max_partly_bound(
    binds: Iterable[tuple[float, str]], sizes: Mapping[str, int], grace: float = 0.0
) -> int:
    """The most pods ever bound in gangs not wholly bound, counting a gang only once it
    has been partly bound for ``grace`` seconds (a scheduler binds a gang's pods one
    request at a time: with ``grace`` 0 every gang of more than one pod counts for an
    instant). ``binds``: (time, gang) for each pod's first bind."""
    bound: dict[str, int] = {}
    counted: set[str] = set()
    total = peak = 0
    # (time, order, gang): ageing checks sort before binds at the same instant
    events: list[tuple[float, int, str]] = [(t, 1, g) for t, g in binds]
    heapq.heapify(events)
    first: set[str] = set()
    while events:
        when, kind, gang = heapq.heappop(events)
        if kind == 0:  # the gang has been partly bound for ``grace`` seconds
            if 0 < bound.get(gang, 0) < sizes[gang]:
                counted.add(gang)
                total += bound[gang]
        else:
            bound[gang] = bound.get(gang, 0) + 1
            if gang not in first:
                first.add(gang)
                heapq.heappush(events, (when + grace, 0, gang))
            if gang in counted:
                total += 1
                if bound[gang] >= sizes[gang]:
                    counted.discard(gang)
                    total -= bound[gang]
        peak = max(peak, total)
    return peak


def partly_bound(spec: workload.Scenario, bound: Mapping[str, float], grace: float) -> int:
    """``max_partly_bound`` of a run of ``spec`` whose pods were first seen bound at
    ``bound`` (0 for single-pod jobs)."""
    if spec.gangs == spec.pods:
        return 0
    binds = [(t, workload.gang_name(spec.gang_of(workload.pod_index(p)))) for p, t in bound.items()]
    sizes = {workload.gang_name(g): size for g, size in enumerate(spec.sizes)}
    return max_partly_bound(binds, sizes, grace)


def run_line(
    spec: workload.Scenario,
    scheduler: str,
    round_number: int,
    created: Mapping[str, float],
    bound: Mapping[str, float],
    since: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One run's JSON line from the pods' creation and first-bound times (seconds on one
    clock): the times to the first and to the last bind from ``since`` (default: the
    first creation), binds per second from the first bind to the last, creation-to-bound
    quantiles per pod and per gang, and how long a gang's binds spread (p99 and most)."""
    latencies = [bound[n] - created[n] for n in bound if n in created]
    line: dict[str, Any] = dict.fromkeys(LINE_KEYS)
    line.update(scheduler=scheduler, scenario=spec.name, nodes=spec.nodes, pods=spec.pods)
    line.update(round=round_number, bound=len(bound))
    origin = since if since is not None else min(created.values()) if created else None
    if bound and origin is not None:
        line["seconds_to_first_bind"] = round(min(bound.values()) - origin, 3)
    if origin is not None and len(bound) >= spec.pods:
        first, last = min(bound.values()), max(bound.values())
        line["seconds_to_all_bound"] = round(last - origin, 3)
        line["binds_per_second"] = round((len(bound) - 1) / max(last - first, 1e-9), 1)
    for key, fraction in (("p50_seconds", 0.5), ("p99_seconds", 0.99)):
        line[key] = _rounded(percentile(latencies, fraction))
    if spec.gangs < spec.pods:
        name = workload.gang_name
        gangs = {workload.pod_name(i): name(spec.gang_of(i)) for i in range(spec.pods)}
        per_gang = gang_latencies(created, bound, gangs)
        for key, fraction in (("gang_p50_seconds", 0.5), ("gang_p99_seconds", 0.99)):
            line[key] = _rounded(percentile(per_gang, fraction))
        spreads = list(bind_spreads({n: t for n, t in bound.items() if n in gangs}, gangs).values())
        line["gang_bind_spread_p99_seconds"] = _rounded(percentile(spreads, 0.99))
        line["gang_bind_spread_max_seconds"] = _rounded(max(spreads, default=None))
    line.update(extra)
    return line


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _mib(value: float | None) -> float | None:
    return None if value is None else value / 2**20


def _requests(line: Mapping[str, Any]) -> float | None:
    """All API requests of a run (every verb)."""
    counts = line.get("api_requests")
    return float(sum(counts.values())) if isinstance(counts, Mapping) else None


# The table's figures: (heading, how a line gives it).
COLUMNS: tuple[tuple[str, Callable[[Mapping[str, Any]], Any]], ...] = (
    ("to all bound (s)", lambda r: r.get("seconds_to_all_bound")),
    ("first bind (s)", lambda r: r.get("seconds_to_first_bind")),
    ("binds/s", lambda r: r.get("binds_per_second")),
    ("p50 (s)", lambda r: r.get("p50_seconds")),
    ("p99 (s)", lambda r: r.get("p99_seconds")),
    ("gang p99 (s)", lambda r: r.get("gang_p99_seconds")),
    ("peak RSS (MiB)", lambda r: _mib(r.get("peak_rss_bytes"))),
    ("CPU (s)", lambda r: r.get("cpu_seconds")),
    ("API requests", _requests),
    ("max partly bound", lambda r: r.get("max_partly_bound_pods")),
    ("gang bind spread max (s)", lambda r: r.get("gang_bind_spread_max_seconds")),
)


def summary(lines: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per scheduler and scenario: min/median/max of each of ``COLUMNS`` over the runs
    that finished, how many did not and why, and the conf and client of its runs."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for line in lines:
        groups.setdefault((line["scheduler"], line["scenario"]), []).append(line)
    rows = []
    for (scheduler, scenario_name), runs in groups.items():
        ok = [r for r in runs if not r.get("error")]
        row: dict[str, Any] = {"scheduler": scheduler, "scenario": scenario_name}
        row.update(runs=len(runs), failed=len(runs) - len(ok))
        row.update(conf=runs[0].get("conf"), client=runs[0].get("client"))
        row.update(nodes=runs[0].get("nodes"), pods=runs[0].get("pods"))
        for heading, value_of in COLUMNS:
            values = [float(v) for v in map(value_of, ok) if v is not None]
            row[heading] = (min(values), statistics.median(values), max(values)) if values else None
        row["errors"] = sorted({str(r["error"]) for r in runs if r.get("error")})
        rows.append(row)
    return rows


# The table's columns: what names a run, then its figures.
FULL_HEADS: tuple[str, ...] = (
    "scheduler", "scenario", "nodes", "pods", "runs", "failed", "conf", "client",
    *(head for head, _ in COLUMNS),
)  # fmt: skip
# The short table's columns: the figures a reader compares first.
BRIEF_HEADS = (
    "scheduler", "scenario", "nodes", "pods", "runs", "client", "to all bound (s)",
    "first bind (s)", "binds/s", "p99 (s)", "peak RSS (MiB)", "CPU (s)", "max partly bound",
)  # fmt: skip


def table(rows: Sequence[Mapping[str, Any]], brief: bool = False) -> str:
    """``summary`` rows as a markdown table, each figure min / median / max (one number
    when they are equal), then each error a run ended with; ``brief``: only the columns
    of ``BRIEF_HEADS``."""
    heads = BRIEF_HEADS if brief else FULL_HEADS

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, tuple):
            shown = [_number(v) for v in value]
            return shown[0] if len(set(shown)) == 1 else " / ".join(shown)
        return str(value).replace("|", "/")

    out = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    out += ["| " + " | ".join(cell(row.get(h)) for h in heads) + " |" for row in rows]
    errors = [f"- {r['scheduler']} ({r['scenario']}): {e}" for r in rows for e in r["errors"]]
    return "\n".join(out + (["", *errors] if errors else []))


def _number(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def read_lines(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The runs' JSON lines kept in ``paths`` (blank lines skipped), in order; ValueError
    naming the file and line of one that is not a run's line."""
    lines = []
    for path in paths:
        for number, text in enumerate(path.read_text().splitlines(), 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}:{number}: not JSON ({exc.msg})") from None
            missing = [k for k in ("scheduler", "scenario") if not isinstance(line, dict)
                       or not isinstance(line.get(k), str)]  # fmt: skip
            if missing:
                raise ValueError(
                    f"{path}:{number}: not a live run's line (no {' or '.join(missing)})"
                )
            lines.append(line)
    return lines
