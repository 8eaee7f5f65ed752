"""What ``kbatch queues``, ``kbatch jobs`` and ``kbatch explain`` print: tables for people
(``rich``: columns sized to their content, colours only on a terminal) and the same rows
as data for tools (``-o json`` / ``-o yaml``, camelCase keys as Kubernetes writes them).

Piped output is not wrapped: a table row stays one line, as ``kubectl get`` keeps it,
so that ``grep`` and ``awk`` see whole rows.
"""

import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import IO, TYPE_CHECKING, Any

import yaml
from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from kbatch import json_codec
from kbatch.api.times import rfc3339
from kbatch.visibility.rows import Estimate, Explanation, JobRow, QueueRow

# Printing imports no scheduler: a served answer (``kbatch.visibility.served``) is
# printed without one.
if TYPE_CHECKING:
    from kbatch.visibility.whatif import Answer as WhatIf

UNWRAPPED = 10_000  # the width of a console that is not a terminal: rows never wrap
PHASE_STYLES = {"Pending": "yellow", "Inqueue": "cyan", "Running": "green", "Unknown": "red"}
CONFIDENCE_STYLES = {"high": "green", "medium": "yellow", "low": "red", "none": "red"}
# What an estimate cannot know, said where a user reads it: the forecast runs what is
# there now; work submitted later into a queue with more fair share or priority left
# goes first in fact (``kbatch replay --eta-accuracy`` counts how often: "newer first").
ASSUMING = (
    "no work submitted from now on goes first (more fair share or priority left), "
    "and the runtimes it names"
)


def show(stream: IO[str], *renderables: RenderableType) -> None:
    """Print on ``stream``: to the terminal's width and in colour on a terminal, else as
    plain lines that never wrap and carry no trailing blanks."""
    if stream.isatty():
        Console(file=stream).print(*renderables)
        return
    plain = Console(file=stream, width=UNWRAPPED, color_system=None, soft_wrap=True)
    with plain.capture() as captured:
        plain.print(*renderables)
    stream.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def print_data(stream: IO[str], data: Any, output: str) -> None:
    """``data`` as JSON (indented) or YAML."""
    if output == "yaml":
        yaml.safe_dump(data, stream, sort_keys=False, allow_unicode=True)
    else:
        stream.write(json_codec.dumps_indented(data) + "\n")


# ----------------------------------------------------------------------------- data
def queue_data(row: QueueRow) -> dict[str, Any]:
    tree = {} if row.parent is None else {"parent": row.parent}
    return {
        "name": row.name,
        **tree,
        "position": row.position,
        "weight": row.weight,
        "state": row.state,
        "share": _rounded(row.share),
        "deserved": row.deserved,
        "allocated": row.allocated,
        "request": row.request,
        "capability": row.capability,
        "podGroups": {"pending": row.pending, "inqueue": row.inqueue, "running": row.running},
        "waiting": row.waiting,
    }


def queues_data(rows: Sequence[QueueRow], as_of: str, conf_source: str) -> dict[str, Any]:
    """``kbatch queues -o json``'s document: the queues of a line made at ``as_of`` (a
    ``micro_time``) with the conf named ``conf_source``, computed or answered by
    ``kbatch run`` alike."""
    return {
        "asOf": as_of,
        "schedulerConf": conf_source,
        "queues": [queue_data(row) for row in rows],
    }


def jobs_data(jobs: list[dict[str, Any]], as_of: str, conf_source: str | None) -> dict[str, Any]:
    """``kbatch jobs -o json``'s document: the waiting jobs' data (``job_data``) of a line
    made at ``as_of`` with the conf named ``conf_source``, computed or answered by
    ``kbatch run`` alike."""
    return {"asOf": as_of, "schedulerConf": conf_source, "jobs": jobs}


def micro_time(seconds: float) -> str:
    """RFC 3339 with microseconds (an API MicroTime), for when a listing was taken and
    when a job is to start."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def job_data(row: JobRow, estimate: Estimate | None = None, now: float = 0.0) -> dict[str, Any]:
    data: dict[str, Any] = {
        "namespace": row.namespace,
        "name": row.name,
        "kind": row.kind,
        "queue": row.queue,
        "position": row.position,
        "queuePosition": row.queue_position,
        "phase": row.phase,
        "minMember": row.min_member,
        "pods": row.pods,
        "scheduled": row.scheduled,
        "priority": row.priority,
        "created": rfc3339(row.created),
        "reason": row.reason,
    }
    if estimate is not None:
        data["eta"] = estimate.to_json()
        if estimate.seconds is not None:
            data["eta"]["startsAt"] = micro_time(now + estimate.seconds)
    return data


def explanation_data(
    story: Explanation, now: float, estimate: Estimate | None, conf_source: str
) -> dict[str, Any]:
    return {
        "asOf": micro_time(now),
        **job_data(story.job, estimate, now),
        "schedulerConf": conf_source,
        "minResources": story.min_resources,
        "podStatuses": story.pods,
        "conditions": story.conditions,
        "waitingAheadInQueue": [job_data(row) for row in story.ahead_in_queue],
        "waitingAheadInCluster": story.ahead,
        "runningInQueue": [job_data(row) for row in story.running_in_queue],
        "events": story.events,
    }


def _rounded(value: float) -> float | None:
    return round(value, 4) if math.isfinite(value) else None


# ----------------------------------------------------------------------------- tables
def _table(*columns: str) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")  # as kubectl get: no rules
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


def queues_table(rows: Sequence[QueueRow]) -> Table:
    table = _table(
        "QUEUE", "WEIGHT", "STATE", "SHARE", "DESERVED", "ALLOCATED", "REQUEST",
        "PENDING", "INQUEUE", "RUNNING", "WAITING",
    )  # fmt: skip
    for row in rows:
        table.add_row(
            "  " * row.depth + ("└ " if row.depth else "") + row.name,  # the tree, indented
            str(row.weight),
            Text(row.state, style="green" if row.state == "Open" else "red"),
            _share(row.share),
            resources(row.deserved),
            resources(row.allocated),
            resources(row.request),
            str(row.pending),
            str(row.inqueue),
            str(row.running),
            str(row.waiting),
        )
    return table


def _share(share: float) -> str:
    """A queue's share as its data says it (``queue_data``: four decimals) and to two: a
    table read back from the data (``kbatch run``'s answer) reads the same."""
    rounded = _rounded(share)
    return "-" if rounded is None else f"{rounded:.2f}"


def print_queues(
    stream: IO[str], output: str, rows: Sequence[QueueRow], as_of: str, conf_source: str
) -> None:
    """``kbatch queues``' answer in the ``output`` format (table, json or yaml)."""
    if output == "table":
        show(stream, queues_table(rows))
    else:
        print_data(stream, queues_data(rows, as_of, conf_source), output)


def jobs_table(
    rows: Sequence[JobRow], now: float, estimates: Mapping[str, Estimate] | None = None
) -> Table:
    columns = ["POS", "QUEUE", "Q-POS", "NAMESPACE", "NAME", "PHASE", "PODS", "AGE"]
    columns += ["ETA", "REASON"] if estimates is not None else ["REASON"]
    table = _table(*columns)
    for row in rows:
        cells: list[RenderableType] = [
            _position(row.position),
            row.queue,
            _position(row.queue_position),
            row.namespace,
            row.name if row.kind == "PodGroup" else f"pod/{row.name}",
            Text(row.phase, style=PHASE_STYLES.get(row.phase, "")),
            f"{row.scheduled}/{row.min_member}",
            age(now - row.created),
        ]
        if estimates is not None:
            cells.append(_eta_cell(estimates.get(job_uid(row))))
        cells.append(row.reason)
        table.add_row(*cells)
    return table


def what_if_table(answers: "Sequence[WhatIf]") -> Table:
    """``kbatch simulate --from-cluster``: each group, admitted or not, where and when."""
    table = _table("NAMESPACE", "NAME", "QUEUE", "ADMITTED", "NODES", "STARTS", "WHY")
    for a in answers:
        table.add_row(
            a.namespace,
            a.name if a.kind == "PodGroup" else f"pod/{a.name}",
            a.queue,
            Text("yes" if a.admitted else "no", style="green" if a.admitted else "yellow"),
            ",".join(a.nodes) or "-",
            _eta_cell(a.estimate, long=True),
            a.reason or "-",
        )
    return table


def print_gated_pod(
    stream: IO[str], namespace: str, name: str, gates: Sequence[str], output: str
) -> None:
    """``kbatch explain`` of a pod of its own held by its scheduling gates, which no
    session sees (it has no job until they are removed)."""
    reason = f"waits for scheduling gates to be removed: {', '.join(gates)}"
    if output != "table":
        data = {"namespace": namespace, "name": name, "kind": "Pod", "phase": "Pending"}
        print_data(stream, {**data, "schedulingGates": list(gates), "reason": reason}, output)
        return
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column(overflow="fold")
    facts.add_row("Pod", f"{namespace}/{name}")
    facts.add_row("Waiting because", f"it {reason} (until then it is not scheduled)")
    show(stream, facts)


def explanation(
    story: Explanation, now: float, estimate: Estimate | None, conf_source: str
) -> Group:
    row = story.job
    facts = Table.grid(padding=(0, 2))
    facts.add_column(style="bold")
    facts.add_column(overflow="fold")
    facts.add_row(row.kind, row.key)
    facts.add_row("Queue", row.queue)
    facts.add_row("Phase", Text(row.phase, style=PHASE_STYLES.get(row.phase, "")))
    facts.add_row("Pods", _pods(story, row))
    if story.min_resources:
        facts.add_row("Min resources", resources(story.min_resources))
    facts.add_row("Age", age(now - row.created))
    facts.add_row("Position", _place(row, story))
    facts.add_row("Waiting because", row.reason)
    for c in story.conditions:  # on room borrowed from another queue (DESIGN §14)
        if c.get("type") == "kbatch.io/Borrowing" and c.get("status") == "True":
            facts.add_row("Borrowing", c.get("message", ""))
    if estimate is not None:
        facts.add_row("Estimated start", _eta_cell(estimate, long=True))
        if estimate.seconds or estimate.later_than:
            facts.add_row("Assuming", ASSUMING)
    facts.add_row("Scheduler conf", conf_source)
    parts: list[RenderableType] = [facts]
    if story.conditions:
        parts += ["", _conditions(story.conditions)]
    if story.ahead_in_queue:
        ahead = jobs_table(story.ahead_in_queue[:AHEAD_SHOWN], now)
        title = f"Ahead of it in queue {row.queue}"
        if len(story.ahead_in_queue) > AHEAD_SHOWN:
            title += f" (the first {AHEAD_SHOWN})"
        parts += ["", Text(title, style="bold"), ahead]
    if story.running_in_queue:
        running = story.running_in_queue
        held = ", ".join(f"{r.namespace}/{r.name}" for r in running[:AHEAD_SHOWN])
        if len(running) > AHEAD_SHOWN:
            held += f" and {len(running) - AHEAD_SHOWN} more"
        parts += ["", Text(f"Running in queue {row.queue}: ", style="bold") + Text(held)]
    parts += ["", Text("Events", style="bold"), _events(story.events)]
    return Group(*parts)


AHEAD_SHOWN = 10


def _pods(story: Explanation, row: JobRow) -> str:
    statuses = ", ".join(f"{count} {status}" for status, count in sorted(story.pods.items()))
    return f"{row.scheduled}/{row.min_member} scheduled (minMember); " + (statuses or "none yet")


def _place(row: JobRow, story: Explanation) -> str:
    if row.position is None:
        return "not in line (" + ("started" if row.phase == "Running" else "never considered") + ")"
    return (
        f"{row.queue_position} in queue {row.queue}, {row.position} in the cluster "
        f"({len(story.ahead_in_queue)} waiting ahead in its queue, {story.ahead} in all)"
    )


def _conditions(conditions: Sequence[Mapping[str, str]]) -> Table:
    table = _table("CONDITION", "STATUS", "REASON", "SINCE", "MESSAGE")
    for c in conditions:
        table.add_row(
            c.get("type", ""),
            c.get("status", ""),
            c.get("reason", ""),
            c.get("lastTransitionTime", ""),
            c.get("message", ""),
        )
    return table


def _events(events: Sequence[Mapping[str, str]]) -> RenderableType:
    if not events:
        return Text("none (events expire after an hour by default)")
    table = _table("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE")
    for e in events:
        count = f" (x{e['count']})" if e.get("count", "1") != "1" else ""
        table.add_row(e["time"], e["type"], e["reason"], e["object"], e["message"] + count)
    return table


def _eta_cell(estimate: Estimate | None, long: bool = False) -> Text:
    if estimate is None:
        return Text("-")
    text = estimate.text if long else estimate.when
    return Text(text, style=CONFIDENCE_STYLES.get(estimate.confidence, ""))


def _position(place: int | None) -> str:
    return "-" if place is None else str(place)


def job_uid(row: JobRow) -> str:
    """The uid of the row's job in a session: a PodGroup's namespace/name, a pod's own
    group ``pod:namespace/name``."""
    return row.key if row.kind == "PodGroup" else f"pod:{row.key}"


def resources(amounts: Mapping[str, str] | None) -> str:
    """'cpu=4 memory=8Gi' ('-' for none)."""
    if not amounts:
        return "-"
    return " ".join(f"{name}={value}" for name, value in amounts.items())


def age(seconds: float) -> str:
    """As kubectl writes ages: '45s', '12m', '5h', '3d'."""
    seconds = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size or (unit == "m" and seconds >= size):
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"
