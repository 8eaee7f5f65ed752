"""The flow plugin: Armada's fairness with memory (DESIGN §11).

A queue's *usage* is what it holds now, priced by ``resourceWeights``: the sum over
resources of weight × amount. Its *flow* is that usage with a decaying memory of more:

    flow = usage + max(flow_before − usage, 0) · 0.5^(Δt / halfLife)

so a queue that held the whole cluster an hour ago, with a half-life of 10 minutes,
has all but forgotten it, while one that held it a minute ago still counts most of
it. Queues go in order of flow over fair share (weight / sum of weights): the queue
that has had least of its share lately goes first.

Progressive filling, as in Armada: the allocate action takes one job of the first
queue and asks for that queue's key again before its next turn. The key is the
queue's flow at the session's open plus the cost of what the session has placed for
it since, so each job placed counts at once and the room freed in one session is
divided job by job. (The formula alone would not count it: a queue taking room below
its remembered flow keeps the same flow, and would take all of it.) As in Armada, the
key is the ratio the queue would have *after* its next job: allocate tells the key the
job at the head of the queue's line, and its next turn's cost (the rest of its
minimum, or one more surplus task) is counted too, so the job placed next is the one
that leaves its queue's flow over share smallest — a queue of small jobs is not kept
waiting behind a queue whose next job is large. The flow written at close is the
formula at the session's end.

Between sessions the formula holds: a queue's usage below its remembered flow does
not raise it. With a half-life long beside the jobs' runtimes, two busy queues whose
flows have met therefore take turns in waves around their fair shares rather than
holding exactly that; over minutes each gets its share (tests/scenarios/test_flow.py).

Arguments:

- ``halfLife``: a duration (``10m``, ``1h``); default ``10m``. ``0``: no memory at
  all, the flow is the usage.
- ``resourceWeights``: resource name -> weight. A plain number is per unit as
  Kubernetes counts the resource (cpu: per core, memory: per byte, nvidia.com/gpu:
  per device); ``"0.25/Gi"`` is per quantity (``"0.25/GiB"``, ``"1/500m"``,
  ``"2/4Gi"``). Default ``{cpu: 1}``: the flow is in cpu cores and nothing else
  counts. Given, it replaces the default (list cpu too if it should count).

Flow and overuse. This plugin says nothing about whether a queue is overused: a queue
may take more than its fair share while nobody else wants the room, and when two
queues both want more, the one with the smaller flow/share gets it — so a queue that
had little lately gets *more* than half until the flows meet, and then half. Use it
*instead of* proportion for that (Armada's rule). Beside proportion, proportion's
overused test still stops every queue at its deserved share: the flow then only
decides which queue goes first (list ``flow`` before ``proportion``, else
proportion's own queue order decides). Without proportion no queue has a deserved
share, so reclaim takes nothing back and enqueue admits a group only into idle room.

The flow lives in the Queue's status (``status.flow``, in cost units, and
``status.flowUpdated``, when it was measured), read back at the next session: a
restart or a failover of the scheduler keeps the history, and the simulator's flow
follows simulated time. So that the API server is not written to every second, a
flow is written on its own (it always goes with a status written anyway) when it
moved by more than 1% of the queue's fair share of the cluster in cost units, or,
while it is not 0, when the stored one is older than a twentieth of the half-life:
its time says until when the queue held that much, so a stale one would forget up to
3.4% too much once the queue's usage drops. A remembered excess over usage below that
1% is forgotten, so that a decay ends.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbatch.api.duration import parse_duration
from kbatch.api.quantity import scheduler_amount
from kbatch.api.times import rfc3339_seconds
from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import JobInfo, QueueInfo, TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.resources import CPU, Dims
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.plugins import arguments

NAME = "flow"
HALF_LIFE = "halfLife"
RESOURCE_WEIGHTS = "resourceWeights"
DEFAULT_HALF_LIFE = "10m"
DEFAULT_WEIGHTS: Mapping[str, Any] = {CPU: 1}
# Of a queue's fair share of the cluster, in cost units: a smaller change of its flow
# is not written on its own, and a smaller remembered excess over usage is forgotten.
WRITE_STEP = 0.01
# Of the half-life: a flow is written again at least this often while it is not 0,
# however little it moved (1 − 0.5^(1/20): at most 3.4% of what it remembers is lost).
REFRESH = 1 / 20
_SIGNIFICANT_DIGITS = 6  # of the flow as written in the status

# The scheduler counts cpu in millicores, everything else in Kubernetes' base unit.
_CPU_SCALE = 1000.0


@dataclass(frozen=True, slots=True)
class FlowArguments:
    half_life: float  # seconds; 0: no memory
    weights: Mapping[str, float]  # resource -> cost per scheduler unit (cpu: millicore)

    def cost_vector(self, dims: Dims) -> np.ndarray:
        """The weights over a session's dimensions (a resource it does not have costs 0)."""
        return dims.vector({name: w for name, w in self.weights.items() if name in dims.index})


def parse_arguments(args: Mapping[str, Any]) -> FlowArguments:
    arguments.refuse_unknown(args, (HALF_LIFE, RESOURCE_WEIGHTS), NAME)
    half_life = parse_duration(args.get(HALF_LIFE, DEFAULT_HALF_LIFE), HALF_LIFE)
    given = args.get(RESOURCE_WEIGHTS, DEFAULT_WEIGHTS)
    if not isinstance(given, Mapping) or not given:
        raise ValueError(
            f"{RESOURCE_WEIGHTS} must map resource names to weights "
            f"(e.g. {{cpu: 1, memory: 0.25/Gi}}), not {given!r}"
        )
    weights: dict[str, float] = {}
    for resource, value in given.items():
        if not isinstance(resource, str) or not resource.strip():
            raise ValueError(f"{RESOURCE_WEIGHTS}: {resource!r} is not a resource name")
        weights[resource] = _weight(resource, value)
    if not any(weights.values()):
        raise ValueError(f"{RESOURCE_WEIGHTS}: every weight is 0, so nothing would count")
    return FlowArguments(half_life, weights)


def _weight(resource: str, value: object) -> float:
    """Cost per scheduler unit of ``resource`` (see the module doc for the spellings)."""
    where = f"{RESOURCE_WEIGHTS}.{resource}"
    if isinstance(value, str) and "/" in value:
        number, _, per = value.partition("/")
        weight = arguments.number({where: number}, where, 0.0)
        size = _scheduler_amount(resource, per, where)
        if size <= 0:
            raise ValueError(f"{where}: {value!r} is per nothing: the quantity must be more than 0")
        return weight / size
    weight = arguments.number({where: value}, where, 0.0)
    return weight / _CPU_SCALE if resource == CPU else weight


def _scheduler_amount(resource: str, text: str, where: str) -> float:
    """The amount in ``text`` — a Kubernetes quantity, or a bare suffix meaning one of it
    (``Gi``; ``GiB`` as people write it) — in scheduler units (cpu: millicores)."""
    spelled = text.strip()
    if spelled.endswith("iB"):
        spelled = spelled[:-1]
    if spelled and not (spelled[0].isdigit() or spelled[0] == "."):
        spelled = "1" + spelled
    try:
        return scheduler_amount(resource, spelled)
    except ValueError as exc:
        raise ValueError(f"{where}: {text!r} is not a quantity (e.g. Gi, 1Gi, 500m)") from exc


def decayed(flow: float, usage: float, elapsed: float, half_life: float) -> float:
    """Armada's flow after ``elapsed`` seconds at ``usage``: usage + max(flow − usage, 0)
    halved every ``half_life`` (none left with a half-life of 0)."""
    keep = 0.5 ** (max(elapsed, 0.0) / half_life) if half_life > 0 else 0.0
    return usage + max(flow - usage, 0.0) * keep


@dataclass(slots=True)
class _QueueFlow:
    share: float  # weight / sum of weights
    step: float  # WRITE_STEP of its fair share of the cluster, in cost units
    stored: float | None  # the flow its status holds
    elapsed: float  # seconds since the stored flow was measured
    held: float = 0.0  # its usage at the session's open
    placed: float = 0.0  # the cost of what the session placed, less what it took away
    opened: float = 0.0  # its flow at the session's open

    @property
    def usage(self) -> float:
        return max(self.held + self.placed, 0.0)


class _Flows:
    def __init__(self, session: Session, args: FlowArguments) -> None:
        self.session = session
        self.half_life = args.half_life
        self.cost = args.cost_vector(session.dims)
        queues = session.queues
        # In a queue tree (DESIGN §14) a flow per queue at every level, its fair share
        # among its siblings; a queue's ancestors, nearest first (none: flat queues).
        self.above = {name: _ancestors(queues, name) for name in queues}
        self.tree = any(self.above.values())
        weights: dict[str | None, int] = {}
        for info in queues.values():
            parent = self._parent(info)
            weights[parent] = weights.get(parent, 0) + info.weight
        cluster = self.price(session.total)
        self.queues = {
            name: _stored(queue, weights[self._parent(queue)] or 1, cluster, session.now)
            for name, queue in queues.items()
        }
        if self.tree:  # the cluster's part each queue's fair share is, for the write step
            for name, state in self.queues.items():
                for ancestor in self.above[name]:
                    state.step *= self.queues[ancestor].share
        for job in session.jobs.values():
            if job.queue in self.queues:
                held = self.price(job.allocated)
                self.queues[job.queue].held += held
                for ancestor in self.above[job.queue]:
                    self.queues[ancestor].held += held
        for queue in self.queues.values():
            queue.opened = self.flow(queue)

    def _parent(self, queue: QueueInfo) -> str | None:
        """The queue's parent among the session's queues (None: top level)."""
        above = self.above[queue.name]
        return above[0] if above else None

    def price(self, vector: np.ndarray) -> float:
        return float(vector @ self.cost)

    def flow(self, queue: _QueueFlow) -> float:
        """The queue's flow now, at its usage now (DESIGN's formula)."""
        return decayed(queue.stored or 0.0, queue.usage, queue.elapsed, self.half_life)

    def queue_key(self, queue: QueueInfo, next_job: JobInfo | None = None) -> Any:
        """Flow over fair share after ``next_job``'s turn, what the session placed counted
        in full (module doc). In a tree, that of each queue on the path, the top level's
        first: queues go in order at each level by flow over that level's fair share."""
        state = self.queues[queue.name]
        cost = self.next_cost(next_job)
        own = (state.opened + state.placed + cost) / state.share
        if not self.tree:
            return own
        path = [self.queues[name] for name in reversed(self.above[queue.name])]
        return (*((q.opened + q.placed + cost) / q.share for q in path), own)

    def next_cost(self, job: JobInfo | None) -> float:
        """What ``job``'s next turn in allocate places, priced: the rest of its minimum
        while it is short of it, else one more of its pending tasks (their average: the
        tasks of a job mostly share one template). 0 for no job, or none pending."""
        if job is None or not job.counts[TaskStatus.PENDING]:
            return 0.0
        pending = job.counts[TaskStatus.PENDING]
        per_task = self.price(np.maximum(job.total_request - job.allocated, 0.0)) / pending
        if self.session.job_ready(job):
            return per_task
        unplaced = job.minimum_unplaced()
        if unplaced is not None:
            return self.price(unplaced)
        return per_task * max(job.min_member - job.ready_count, 1)

    def changed(self, task: TaskInfo, sign: float) -> None:
        name = self.session.jobs[task.job].queue
        queue = self.queues.get(name)
        if queue is not None:
            cost = sign * self.price(task.request)
            queue.placed += cost
            for ancestor in self.above[name]:
                self.queues[ancestor].placed += cost

    def close(self, session: Session) -> None:
        """Each queue's flow, for its status, and whether it moved enough to be written."""
        for name, info in session.queues.items():
            queue = self.queues[name]
            flow = self.flow(queue)
            if flow - queue.usage < queue.step:
                flow = queue.usage  # too little left to remember
            flow = float(f"{flow:.{_SIGNIFICANT_DIGITS}g}")
            info.flow, info.flow_updated = flow, session.now
            info.flow_due = self._due(queue, flow)

    def _due(self, queue: _QueueFlow, flow: float) -> bool:
        """Is ``flow`` worth a status write of its own? When it moved by more than a step,
        or when the stored one is old: the time it was measured says until when the
        queue held that much, and so how much of it is remembered later."""
        stored = queue.stored or 0.0
        moved = abs(flow - stored) > queue.step if queue.step > 0 else flow != stored
        remembers = queue.stored is not None and self.half_life > 0
        stale = remembers and queue.elapsed >= REFRESH * self.half_life
        return moved or (stale and flow > queue.step)


def _ancestors(queues: Mapping[str, QueueInfo], name: str) -> list[str]:
    """The ancestors of queue ``name`` among ``queues``, nearest first."""
    out: list[str] = []
    parent = queues[name].parent
    while parent is not None and parent in queues and parent not in out and parent != name:
        out.append(parent)
        parent = queues[parent].parent
    return out


def _stored(queue: QueueInfo, weights: int, cluster: float, now: float) -> _QueueFlow:
    """A queue's fair share and the flow its status kept (none: it starts from its usage)."""
    share = queue.weight / weights
    status = queue.old_status
    stored, elapsed = None, 0.0
    if status is not None and status.flow is not None:
        stored = status.flow
        if status.flow_updated is not None:
            elapsed = now - rfc3339_seconds(status.flow_updated)
    return _QueueFlow(share, WRITE_STEP * share * cluster, stored, elapsed)


def on_session_open(session: Session, option: PluginOption) -> None:
    plugin = _Flows(session, parse_arguments(option.arguments))
    session.add_queue_order_fn(plugin.queue_key, next_job=True)
    session.add_event_handler(
        allocate=lambda task: plugin.changed(task, +1.0),
        deallocate=lambda task: plugin.changed(task, -1.0),
    )
    session.add_close_fn(plugin.close)
