"""The shapes ``kbatch queues``, ``kbatch jobs`` and ``kbatch explain`` answer with: a
queue's row, a job's row, the line, one job's story and its estimated start; and the
same read back from the data the commands print (``-o json``) and ``kbatch run``'s
visibility API serves (``kbatch.visibility.served``).

Plain data, no scheduler: printing a served answer imports this, not the scheduler
(``kbatch.visibility.standing`` computes the rows; ``kbatch.visibility.eta`` the
estimates).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kbatch.api.times import rfc3339_seconds


@dataclass(frozen=True)
class QueueRow:
    name: str
    weight: int
    state: str  # Open | Closed
    share: float
    deserved: dict[str, str]
    allocated: dict[str, str]
    request: dict[str, str]
    capability: dict[str, str] | None
    pending: int  # PodGroups by phase
    inqueue: int
    running: int
    waiting: int  # jobs in its line (PodGroups not started, and pods of their own)
    position: int  # its turn among the queues (1: first)
    # Its place in the queue tree (DESIGN §14): its parent (None: top level) and how deep
    # it is (0: top level). Its amounts and PodGroups are its subtree's.
    parent: str | None = None
    depth: int = 0


@dataclass(frozen=True)
class JobRow:
    namespace: str
    name: str
    kind: str  # PodGroup, or Pod for a pod of its own (a group of one)
    queue: str
    phase: str
    min_member: int
    pods: int  # not finished
    scheduled: int  # bound or running
    priority: int
    created: float  # epoch seconds
    queue_position: int | None  # 1: next in its queue; None: never considered
    position: int | None  # the same across the cluster
    reason: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Line:
    """The queues in their order and the waiting jobs in the order kbatch considers
    them; ``warnings`` name the objects kbatch would refuse (left out, as it does)."""

    queues: list[QueueRow]
    jobs: list[JobRow]
    running: list[JobRow]  # jobs that hold their minimum, for "what is ahead"
    warnings: list[str] = field(default_factory=list)

    def find(self, namespace: str, name: str) -> JobRow | None:
        for row in (*self.jobs, *self.running):
            if (row.namespace, row.name) == (namespace, name):
                return row
        return None


@dataclass(frozen=True)
class Explanation:
    """The full story of one job: where it stands, why, what is ahead, what happened."""

    job: JobRow
    conditions: list[dict[str, str]]
    min_resources: dict[str, str]
    pods: dict[str, int]  # pod status -> count
    ahead_in_queue: list[JobRow]  # waiting jobs its queue considers first, in order
    ahead: int  # waiting jobs the cluster considers first
    running_in_queue: list[JobRow]  # what its queue holds now
    events: list[dict[str, str]]


@dataclass(frozen=True)
class Estimate:
    """When one job starts: ``seconds`` from now (None: unknown, or not before
    ``later_than`` seconds); ``when`` for a table's column ('~14 min', 'now', '>2h00m',
    'unknown'), ``text`` the whole answer in words; and what it rests on."""

    seconds: float | None
    when: str
    text: str
    confidence: str  # high | medium | low | none
    running_done: int = 0  # running jobs that finish by then
    ahead_started: int = 0  # waiting jobs that start first
    runtimes: str = ""  # where the runtimes it rests on came from
    later_than: float | None = None
    published: float | None = None  # read off the PodGroup: made then (epoch seconds)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "seconds": self.seconds,
            "when": self.when,
            "laterThan": self.later_than,
            "text": self.text,
            "confidence": self.confidence,
            "runningJobsFinishing": self.running_done,
            "waitingJobsStartingFirst": self.ahead_started,
            "runtimes": self.runtimes,
        }
        if self.published is not None:
            data["publishedAt"] = self.published
        return data


def human(seconds: float) -> str:
    """'45s', '14 min', '3h05m', '2d4h': as precise as a wait is worth."""
    if seconds < 120:
        return f"{round(seconds)}s"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


# ----------------------------------------------------------------------------- read back
def queue_rows_of(data: Sequence[Mapping[str, Any]]) -> list[QueueRow]:
    """The queues of a line as the commands print them (``output.queue_data``), each
    as deep in the tree as its parents named in ``data`` make it (``standing``'s depth)."""
    parents = {str(queue["name"]): queue.get("parent") for queue in data}
    return [_queue_row_of(queue, _depth(str(queue["name"]), parents)) for queue in data]


def _depth(name: str, parents: Mapping[str, str | None]) -> int:
    depth, seen, parent = 0, {name}, parents[name]
    while parent is not None and parent in parents and parent not in seen:
        seen.add(parent)
        depth += 1
        parent = parents[parent]
    return depth


def _queue_row_of(data: Mapping[str, Any], depth: int) -> QueueRow:
    share, phases = data["share"], data["podGroups"]
    return QueueRow(
        name=str(data["name"]),
        weight=int(data["weight"]),
        state=str(data["state"]),
        share=math.inf if share is None else float(share),  # (None: not finite)
        deserved=dict(data["deserved"]),
        allocated=dict(data["allocated"]),
        request=dict(data["request"]),
        capability=None if data.get("capability") is None else dict(data["capability"]),
        pending=int(phases["pending"]),
        inqueue=int(phases["inqueue"]),
        running=int(phases["running"]),
        waiting=int(data["waiting"]),
        position=int(data["position"]),
        parent=data.get("parent"),
        depth=depth,
    )


def job_row_of(data: Mapping[str, Any]) -> JobRow:
    """The row of a job as the commands print it (``output.job_data``)."""
    return JobRow(
        namespace=data["namespace"],
        name=data["name"],
        kind=data["kind"],
        queue=data["queue"],
        phase=data["phase"],
        min_member=int(data["minMember"]),
        pods=int(data["pods"]),
        scheduled=int(data["scheduled"]),
        priority=int(data["priority"]),
        created=rfc3339_seconds(data["created"]),
        queue_position=data.get("queuePosition"),
        position=data.get("position"),
        reason=data["reason"],
    )


def estimate_of(data: Mapping[str, Any] | None) -> Estimate | None:
    """An estimate as the commands print it (``Estimate.to_json``), if any."""
    if not data:
        return None
    return Estimate(
        seconds=data.get("seconds"),
        when=data["when"],
        text=data["text"],
        confidence=data["confidence"],
        running_done=int(data.get("runningJobsFinishing") or 0),
        ahead_started=int(data.get("waitingJobsStartingFirst") or 0),
        runtimes=data.get("runtimes") or "",
        later_than=data.get("laterThan"),
        published=data.get("publishedAt"),
    )


def explanation_of(data: Mapping[str, Any]) -> Explanation:
    """A job's story as ``kbatch explain -o json`` prints it (``output.explanation_data``)."""
    return Explanation(
        job=job_row_of(data),
        conditions=list(data.get("conditions") or ()),
        min_resources=dict(data.get("minResources") or {}),
        pods=dict(data.get("podStatuses") or {}),
        ahead_in_queue=[job_row_of(row) for row in data.get("waitingAheadInQueue") or ()],
        ahead=int(data.get("waitingAheadInCluster") or 0),
        running_in_queue=[job_row_of(row) for row in data.get("runningInQueue") or ()],
        events=list(data.get("events") or ()),
    )
