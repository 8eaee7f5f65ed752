"""What a simulation ends with: the JSON contract of DESIGN §5, and a table for people.

JSON: ``time``, ``pods``, ``podGroups``, ``queues``, ``events``, ``warnings``,
``summary``, ``jobSets`` for a run with JobSets (``jobset_rows``; the table shows
them as JOBSETS), ``volcanoJobs`` for a run with vcjobs (``vcjob_rows``; the table:
VOLCANO JOBS), and ``metrics`` for a run of an Armada workload
(``kbatch.sim.metrics``; the table shows them as METRICS). ``warnings`` lists every
object refused (by the API server's checks or by admission), in the order refused:
time, kind, namespace, name, and the message naming the field.
Lists of objects are sorted by namespace, then name; events are in time order
(and, at one time, in the order they happened). Quantities are Kubernetes
strings. ``pods`` also lists the pods removed during the run (evicted, or
deleted by their Job): with ``node`` null and phase ``Failed`` unless they had
finished, so that every eviction stays visible in its pod's ``evictions``. A pod
with a role in its gang (kbatch.io/task) has ``role``; a PodGroup with roles has
``minTaskMember``, with pods running beyond minMember ``surplus``, and asking for a
topology level ``topology`` (``kbatch.sim.group_view``): a plain group's row is
DESIGN §5's, key for key; the table shows ROLES (running of each
role / its minimum), SURPLUS and TOPOLOGY columns when some group has them. A queue
under another (DESIGN §14) has ``parent``; a top-level queue's row is DESIGN §5's.
"""

from collections.abc import Callable
from typing import Any

from kbatch.api.quantity import format_quantity
from kbatch.api.queue import ROOT_QUEUE
from kbatch.cluster import records
from kbatch.cluster.quantity import amounts
from kbatch.sim import clock, departures, group_view, metrics
from kbatch.sim.backend import REJECTED
from kbatch.sim.jobsets import JobSetController
from kbatch.sim.runner import Outcome
from kbatch.sim.vcjob_spec import pod_group_name
from kbatch.sim.vcjobs import VcJobController

Json = dict[str, Any]
VCJOB_COUNTS = ("pending", "running", "succeeded", "failed")


def to_json(outcome: Outcome) -> Json:
    result: Json = {
        "time": float(outcome.time),
        "pods": pods(outcome),
        "podGroups": pod_groups(outcome),
        "queues": queues(outcome),
        "events": [
            {
                "time": float(e.time),
                "kind": e.kind,
                "namespace": e.namespace,
                "name": e.name,
                "type": e.type,
                "reason": e.reason,
                "message": e.message,
            }
            for e in outcome.cluster.event_log
        ],
        "warnings": warnings(outcome),
        "summary": {
            "sessions": outcome.totals.sessions,
            "binds": outcome.totals.binds,
            "evictions": outcome.totals.evictions,
        },
    }
    if outcome.jobsets is not None and outcome.jobsets.sets:
        result["jobSets"] = jobset_rows(outcome.jobsets)
    if outcome.vcjobs is not None and outcome.vcjobs.records:
        result["volcanoJobs"] = vcjob_rows(outcome.vcjobs)
    if isinstance(outcome, metrics.MeasuredOutcome):
        result["metrics"] = metrics.summary(outcome)
    return result


def vcjob_rows(controller: VcJobController) -> list[Json]:
    """Each vcjob as it ended: ``status.state.phase``, its pods' counts, and its PodGroup
    (deleted once the vcjob finished, as Volcano's controller deletes it)."""
    rows = []
    for (namespace, name), record in sorted(controller.records.items()):
        status = record.obj.get("status") or {}
        counts = {key: int(status.get(key) or 0) for key in VCJOB_COUNTS}
        rows.append(
            {"namespace": namespace, "name": name, "phase": record.phase,
             "minAvailable": record.spec.min_available, **counts,
             "podGroup": pod_group_name(record.obj)}
        )  # fmt: skip
    return rows


def jobset_rows(controller: JobSetController) -> list[Json]:
    """Each JobSet as it ended: phase (Completed, Failed, Suspended or Running), its
    restarts, its Jobs per replicated Job, and why it ended."""
    rows = []
    for (namespace, name), record in sorted(controller.sets.items()):
        status = record.obj.get("status") or {}
        ended = [c for c in status.get("conditions") or () if c.get("type") == record.ended]
        suspended = (record.obj.get("spec") or {}).get("suspend")
        rows.append(
            {
                "namespace": namespace,
                "name": name,
                "phase": record.ended or ("Suspended" if suspended else "Running"),
                "restarts": record.restarts,
                "replicatedJobs": list(status.get("replicatedJobsStatus") or []),
                "message": str(ended[-1].get("message") or "") if ended else "",
            }
        )
    return rows


def warnings(outcome: Outcome) -> list[Json]:
    """The refusals: the ``AdmissionRejected`` events, which the table shows as WARNINGS."""
    return [
        {
            "time": float(e.time),
            "kind": e.kind,
            "namespace": e.namespace,
            "name": e.name,
            "message": e.message,
        }
        for e in outcome.cluster.event_log
        if e.reason == REJECTED
    ]


def pods(outcome: Outcome) -> list[Json]:
    rows = [
        {
            "namespace": row.namespace,
            "name": row.name,
            "node": row.node,
            "phase": row.phase,
            "podGroup": row.group,
            "evictions": row.evictions,
            **({"role": row.role} if row.role else {}),
        }
        for row in departures.all_pod_rows(outcome.cluster)
    ]
    return sorted(rows, key=lambda row: (row["namespace"], row["name"]))


def role_field(pod: Json) -> Json:
    """``{"role": ROLE}`` for a pod with a role in its gang (kbatch.io/task), else {}: as
    a pod's row gives it (the e2e suite's cluster backend writes its rows so too)."""
    role = records.role_of((pod.get("metadata") or {}).get("annotations") or {})
    return {"role": role} if role else {}


def pod_groups(outcome: Outcome) -> list[Json]:
    state = outcome.cluster.state
    groups = departures.all_groups(outcome.cluster)
    where = group_view.topology_fields(groups, state.list("Pod"), state.list("Node"))
    rows = []
    for group in groups:
        row = pod_group_row(group)
        topology = where.get((row["namespace"], row["name"]))
        rows.append({**row, "topology": topology} if topology is not None else row)
    return sorted(rows, key=lambda row: (row["namespace"], row["name"]))


def pod_group_row(group: Json) -> Json:
    """One PodGroup object as the contract's ``podGroups[]`` row (any backend's)."""
    metadata, spec = group["metadata"], group.get("spec") or {}
    status = group.get("status") or {}
    return {
        "namespace": metadata["namespace"],
        "name": metadata["name"],
        "queue": spec.get("queue") or "default",
        "phase": status.get("phase") or "Pending",
        "minMember": spec.get("minMember", 1),
        "running": status.get("running", 0),
        "succeeded": status.get("succeeded", 0),
        "failed": status.get("failed", 0),
        **({"minTaskMember": dict(spec["minTaskMember"])} if spec.get("minTaskMember") else {}),
        **group_view.surplus_field(status.get("running", 0), spec.get("minMember", 1)),
        "conditions": [
            {
                "type": c.get("type"),
                "status": c.get("status"),
                "reason": c.get("reason", ""),
                "message": c.get("message", ""),
            }
            for c in status.get("conditions") or []
        ],
    }


def queues(outcome: Outcome) -> list[Json]:
    rows = [queue_row(queue) for queue in outcome.cluster.state.list("Queue")]
    return sorted(rows, key=lambda row: row["name"])


def queue_row(queue: Json) -> Json:
    """One Queue object as the contract's ``queues[]`` row (any backend's); ``parent``
    only for a queue under another (absent for a top-level queue, ``root``'s child)."""
    status, spec = queue.get("status") or {}, queue.get("spec") or {}
    row: Json = {"name": queue["metadata"]["name"]}
    parent = spec.get("parent")
    if parent and parent != ROOT_QUEUE:
        row["parent"] = parent
    return row | {
        "weight": spec.get("weight", 1),
        "deserved": _quantities(status.get("deserved")),
        "allocated": _quantities(status.get("allocated")),
        "request": _quantities(status.get("request")),
    }


def _quantities(values: dict[str, Any] | None) -> dict[str, str]:
    return {name: format_quantity(name, value) for name, value in amounts(values, "status").items()}


# --------------------------------------------------------------------------- table
def to_table(result: Json) -> str:
    """The JSON result as aligned text tables; the last Warning event of each object (a
    refused object, a Job that cannot create its pods, a pod that cannot be placed) gets
    a table of its own."""
    sections = [_pods_table(result), _groups_table(result), _queues_table(result)]
    if result.get("jobSets"):
        sections.append(_jobsets_table(result["jobSets"]))
    if result.get("volcanoJobs"):
        sections.append(_vcjobs_table(result["volcanoJobs"]))
    warnings = _last_warnings(result["events"])
    if warnings:
        sections.append(
            _table(
                "WARNINGS (the last of each object)",
                ["TIME", "KIND", "NAMESPACE", "NAME", "REASON", "MESSAGE"],
                [
                    [
                        clock.format_duration(e["time"]),
                        e["kind"],
                        e["namespace"] or None,
                        e["name"],
                        e["reason"],
                        e["message"],
                    ]
                    for e in warnings
                ],
            )
        )
    if "metrics" in result:
        sections.append(_metrics_section(result["metrics"]))
    summary = result["summary"]
    sections.append(
        f"at {clock.format_duration(result['time'])}: {summary['sessions']} sessions, "
        f"{summary['binds']} binds, {summary['evictions']} evictions, "
        f"{len(result['events'])} events"
    )
    return "\n\n".join(sections) + "\n"


def _pods_table(result: Json) -> str:
    return _table(
        "PODS",
        ["NAMESPACE", "NAME", "NODE", "PHASE", "PODGROUP", "EVICTIONS"],
        [
            [p["namespace"], p["name"], p["node"], p["phase"], p["podGroup"], p["evictions"]]
            for p in result["pods"]
        ],
    )


def _groups_table(result: Json) -> str:
    roles = group_view.role_counts(result)
    extra = _group_columns(result)
    return _table(
        "PODGROUPS",
        ["NAMESPACE", "NAME", "QUEUE", "PHASE", "MINMEMBER", "RUNNING", "SUCCEEDED"]
        + (["ROLES (RUNNING/MIN)"] if roles else [])
        + list(extra)
        + ["WHY NOT"],
        [
            [
                g["namespace"],
                g["name"],
                g["queue"],
                g["phase"],
                g["minMember"],
                g["running"],
                g["succeeded"],
                *([roles.get((g["namespace"], g["name"]))] if roles else []),
                *(column(g) for column in extra.values()),
                _unschedulable(g),
            ]
            for g in result["podGroups"]
        ],
    )


def _jobsets_table(rows: list[Json]) -> str:
    def jobs(row: Json) -> str:
        counts = [(r["succeeded"], r["active"], r["failed"]) for r in row["replicatedJobs"]]
        done, active, failed = (sum(c[i] for c in counts) for i in range(3))
        return f"{done}/{active}/{failed}"

    return _table(
        "JOBSETS",
        ["NAMESPACE", "NAME", "PHASE", "RESTARTS", "JOBS (DONE/ACTIVE/FAILED)", "WHY"],
        [
            [r["namespace"], r["name"], r["phase"], r["restarts"], jobs(r), r["message"] or None]
            for r in rows
        ],
    )


def _vcjobs_table(rows: list[Json]) -> str:
    counts = "/".join(key.upper() for key in VCJOB_COUNTS)
    return _table(
        "VOLCANO JOBS",
        ["NAMESPACE", "NAME", "PHASE", "MINAVAILABLE", f"PODS ({counts})"],
        [
            [r["namespace"], r["name"], r["phase"], r["minAvailable"],
             "/".join(str(r[key]) for key in VCJOB_COUNTS)]
            for r in rows
        ],
    )  # fmt: skip


def _queues_table(result: Json) -> str:
    return _table(
        "QUEUES",
        ["NAME", "WEIGHT", "DESERVED", "ALLOCATED", "REQUEST"],
        [
            [
                q["name"],
                q["weight"],
                _list(q["deserved"]),
                _list(q["allocated"]),
                _list(q["request"]),
            ]
            for q in result["queues"]
        ],
    )


def _group_columns(result: Json) -> dict[str, Callable[[Json], Any]]:
    """SURPLUS and TOPOLOGY, each only when some PodGroup has something to show there."""
    columns: dict[str, Callable[[Json], Any]] = {}
    if any(g.get("surplus") for g in result["podGroups"]):
        columns["SURPLUS"] = lambda g: g.get("surplus") or None
    if any(g.get("topology") for g in result["podGroups"]):
        columns["TOPOLOGY"] = lambda g: group_view.topology_text(g.get("topology"))
    return columns


def _metrics_section(metrics: Json) -> str:
    """The ``metrics`` object (a workload's run): throughput and utilisation in words,
    then a row per queue."""
    rate = metrics["throughput"]
    use = metrics["utilisation"]
    used = ", ".join(
        f"{name} {_percent(values['mean'])} (while work waits {_percent(values['whileWaiting'])})"
        for name, values in use.items()
        if isinstance(values, dict)
    )
    shares, evicted = metrics["fairShare"], metrics["evictions"]["byQueue"]
    rows = []
    for queue, latency in metrics["latency"].items():
        share = shares.get(queue, {})
        rows.append(
            [
                queue,
                latency["jobs"],
                latency["started"],
                _seconds(latency["p50"]),
                _seconds(latency["p99"]),
                _percent(share.get("share")),
                _percent(share.get("fairShare")),
                _seconds(share.get("belowFairShareSeconds")),
                evicted.get(queue, 0),
            ]
        )
    header = ["QUEUE", "JOBS", "STARTED", "WAIT P50", "WAIT P99", "SHARE", "FAIR SHARE"]
    table = _table("METRICS", [*header, "BELOW FAIR", "EVICTIONS"], rows)
    return (
        f"{table}\nthroughput: {rate['jobsStarted']} jobs started "
        f"({rate['jobsPerSecond']:.4g}/s), {rate['podsBound']} pods bound "
        f"({rate['podsPerSecond']:.4g}/s)\nutilisation: {used or '-'}; work waited "
        f"{_seconds(use['waitingSeconds'])}; evictions: {metrics['evictions']['total']}"
    )


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _seconds(value: float | None) -> str:
    return "-" if value is None else clock.format_duration(value)


def _last_warnings(events: list[Json]) -> list[Json]:
    """The last Warning event of each object, in time order."""
    last = {
        (e["kind"], e["namespace"], e["name"]): (index, e)
        for index, e in enumerate(events)
        if e["type"] == "Warning"
    }
    return [e for _, e in sorted(last.values(), key=lambda pair: pair[0])]


def _unschedulable(group: Json) -> str:
    for c in group["conditions"]:
        if c["type"] == "Unschedulable" and c["status"] == "True":
            return str(c["message"] or c["reason"])
    return ""


def _list(values: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in values.items()) or "-"


def _table(title: str, header: list[str], rows: list[list[Any]]) -> str:
    if not rows:
        return f"{title}: none"
    cells = [header] + [["-" if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [
        "  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    return f"{title}\n" + "\n".join(lines)
