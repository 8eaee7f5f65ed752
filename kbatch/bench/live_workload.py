"""The live benchmark's pure parts: the scenarios, the objects each scheduler is handed,
and the figures made of what was seen (no cluster, no clock).

Every scheduler gets the same pods (same names, requests and nodes); only what marks
them as its own differs: the scheduler name, and for a gang the group object that
scheduler reads (kbatch's ``scheduling.incubator.k8s.io`` PodGroup, upstream's
``scheduling.k8s.io/v1beta1`` PodGroup named in ``spec.schedulingGroup``, Volcano's
``scheduling.volcano.sh`` PodGroup). Volcano's scheduler leaves alone a pod that names no
PodGroup (in a Volcano install its controller makes one of one member for each such pod),
so for Volcano even a single-pod job gets a PodGroup, of ``minMember`` 1, from the
benchmark.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION

NAMESPACE = "bench"
GANG_LABEL = "bench.kbatch.io/gang"
NODE_LABEL = "type"  # the label KWOK is told to manage nodes by
NODE_LABEL_VALUE = "kwok"
NODE_CPU, NODE_MEMORY, NODE_PODS = "32", "128Gi", "110"
POD_CPU, POD_MEMORY = "1", "2Gi"

SCHEDULERS = ("kbatch", "kube-scheduler", "volcano")
SCHEDULER_NAMES = {"kbatch": "kbatch", "kube-scheduler": "default-scheduler", "volcano": "volcano"}
KBATCH_GROUPS = "scheduling.incubator.k8s.io/v1alpha1"
UPSTREAM_GROUPS = "scheduling.k8s.io/v1beta1"
VOLCANO_GROUPS = "scheduling.volcano.sh/v1beta1"
VOLCANO_QUEUES = VOLCANO_GROUPS  # Queues are in the PodGroups' API
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE = "default"  # the queue vc-scheduler makes at its start, and the benchmark too

# The keys every JSON line has, in this order (more may follow).
LINE_KEYS = (
    "scheduler",
    "scenario",
    "nodes",
    "pods",
    "round",
    "seconds_to_all_bound",
    "binds_per_second",
    "p50_seconds",
    "p99_seconds",
    "peak_rss_bytes",
    "cpu_seconds",
    "max_partly_bound_pods",
    "error",
)


@dataclass(frozen=True)
class Scenario:
    """``pods`` pods on ``nodes`` fake nodes, in gangs of ``gang`` (1: single-pod jobs)."""

    name: str
    nodes: int
    pods: int
    gang: int

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"scenario {self.name}: nodes must be positive, not {self.nodes}")
        if self.pods < 1:
            raise ValueError(f"scenario {self.name}: pods must be positive, not {self.pods}")
        if self.pods % self.gang:
            raise ValueError(
                f"scenario {self.name}: pods ({self.pods}) must be a multiple of the gang "
                f"size {self.gang}"
            )

    @property
    def gangs(self) -> int:
        return self.pods // self.gang


# (a) single-pod jobs, (b) gangs of 10; both on 1,000 nodes unless told otherwise.
SCENARIOS = {"a": (1000, 10000, 1), "b": (1000, 10000, 10)}


def scenario(name: str, nodes: int | None = None, pods: int | None = None) -> Scenario:
    """Scenario ``name`` at its own size, or at ``nodes`` / ``pods`` where given."""
    if name not in SCENARIOS:
        raise ValueError(
            f"--scenario {name!r}: the live benchmark runs {', '.join(sorted(SCENARIOS))} so far"
        )
    default_nodes, default_pods, gang = SCENARIOS[name]
    return Scenario(name, nodes or default_nodes, pods or default_pods, gang)


def node(index: int) -> dict[str, Any]:
    """Fake node ``index``: KWOK manages it (by its label) and reports it Ready."""
    capacity = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"kwok-node-{index}",
            "labels": {
                NODE_LABEL: NODE_LABEL_VALUE,
                "kubernetes.io/hostname": f"kwok-node-{index}",
            },
        },
        "status": {"allocatable": dict(capacity), "capacity": dict(capacity)},
    }


def gang_name(index: int) -> str:
    return f"gang-{index}"


def pod_name(index: int) -> str:
    return f"pod-{index}"


def pod(spec: Scenario, index: int, scheduler: str) -> dict[str, Any]:
    """Pod ``index`` of ``spec`` for ``scheduler`` (one of ``SCHEDULERS``)."""
    gang = gang_name(index // spec.gang)
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(index), "namespace": NAMESPACE, "labels": {GANG_LABEL: gang}},
        "spec": {
            "schedulerName": SCHEDULER_NAMES[scheduler],
            "containers": [
                {
                    "name": "work",
                    "image": "fake",
                    "resources": {"requests": {"cpu": POD_CPU, "memory": POD_MEMORY}},
                }
            ],
        },
    }
    if scheduler == "volcano":  # a group even for one pod: see the module's text
        body["metadata"]["annotations"] = {VOLCANO_GROUP_ANNOTATION: gang}
    elif spec.gang > 1:
        if scheduler == "kbatch":
            body["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: gang}
        else:
            body["spec"]["schedulingGroup"] = {"podGroupName": gang}
    return body


def group(spec: Scenario, index: int, scheduler: str) -> tuple[str, dict[str, Any]] | None:
    """Gang ``index``'s group object for ``scheduler`` and the path to POST it to; None
    for single-pod jobs, but Volcano's (it needs a group for every pod)."""
    if spec.gang == 1 and scheduler != "volcano":
        return None
    meta = {"name": gang_name(index), "namespace": NAMESPACE}
    body: dict[str, Any] = {"kind": "PodGroup", "metadata": meta}
    if scheduler == "kbatch":
        api, body["spec"] = KBATCH_GROUPS, {"minMember": spec.gang}
    elif scheduler == "volcano":
        # Pending, as Volcano's controller makes them: its scheduler's enqueue action
        # moves a group to Inqueue, and only then does allocate look at it (its CRD has
        # no status subresource, so the phase holds on create).
        api, body["spec"] = VOLCANO_GROUPS, {"minMember": spec.gang, "queue": VOLCANO_QUEUE}
        body["status"] = {"phase": "Pending"}
    else:
        api, body["spec"] = UPSTREAM_GROUPS, {"schedulingPolicy": {"gang": {"minCount": spec.gang}}}
    path = f"/apis/{api}/namespaces/{NAMESPACE}/podgroups"
    return path, {"apiVersion": api, **body}


# ---- figures ------------------------------------------------------------------------


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


def run_line(
    spec: Scenario,
    scheduler: str,
    round_number: int,
    created: Mapping[str, float],
    bound: Mapping[str, float],
    since: float | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One run's JSON line from the pods' creation and first-bound times (seconds on one
    clock): time to all bound from ``since`` (default: the first creation), binds per
    second from the first bind to the last, creation-to-bound quantiles per pod and per
    gang."""
    latencies = [bound[n] - created[n] for n in bound if n in created]
    line: dict[str, Any] = dict.fromkeys(LINE_KEYS)
    line.update(scheduler=scheduler, scenario=spec.name, nodes=spec.nodes, pods=spec.pods)
    line.update(round=round_number, bound=len(bound))
    if created and len(bound) >= spec.pods:
        first, last = min(bound.values()), max(bound.values())
        origin = min(created.values()) if since is None else since
        line["seconds_to_all_bound"] = round(last - origin, 3)
        line["binds_per_second"] = round((len(bound) - 1) / max(last - first, 1e-9), 1)
    for key, fraction in (("p50_seconds", 0.5), ("p99_seconds", 0.99)):
        value = percentile(latencies, fraction)
        line[key] = None if value is None else round(value, 3)
    if spec.gang > 1:
        gangs = {pod_name(i): gang_name(i // spec.gang) for i in range(spec.pods)}
        per_gang = gang_latencies(created, bound, gangs)
        for key, fraction in (("gang_p50_seconds", 0.5), ("gang_p99_seconds", 0.99)):
            value = percentile(per_gang, fraction)
            line[key] = None if value is None else round(value, 3)
    line.update(extra)
    return line


SUMMARY_KEYS = ("seconds_to_all_bound", "binds_per_second", "p99_seconds", "peak_rss_bytes")


def summary(lines: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per scheduler and scenario: min/median/max of each of ``SUMMARY_KEYS`` over the
    runs that finished, and how many did not."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for line in lines:
        groups.setdefault((line["scheduler"], line["scenario"]), []).append(line)
    rows = []
    for (scheduler, scenario_name), runs in groups.items():
        ok = [r for r in runs if not r.get("error")]
        row: dict[str, Any] = {"scheduler": scheduler, "scenario": scenario_name}
        row.update(runs=len(runs), failed=len(runs) - len(ok))
        for key in SUMMARY_KEYS:
            values = [float(r[key]) for r in ok if r.get(key) is not None]
            row[key] = (min(values), statistics.median(values), max(values)) if values else None
        errors = sorted({str(r["error"]) for r in runs if r.get("error")})
        row["errors"] = errors
        rows.append(row)
    return rows


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """``summary`` rows as text: each figure as min / median / max."""
    heads = ("scheduler", "scenario", "runs", *SUMMARY_KEYS)

    def cell(value: Any) -> str:
        if value is None:
            return "-"
        if isinstance(value, tuple):
            return " / ".join(_number(v) for v in value)
        return str(value)

    body = [[cell(row.get(h)) for h in heads] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(heads)]
    out = ["  ".join(h.ljust(w) for h, w in zip(heads, widths, strict=True))]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in body]
    for row in rows:
        for error in row.get("errors") or ():
            out.append(f"{row['scheduler']} ({row['scenario']}): {error}")
    return "\n".join(out)


def _number(value: float) -> str:
    if value >= 1e6:
        return f"{value / 2**20:.0f}Mi"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"
