"""Where each waiting job stands in kbatch's line, and why: recomputed, never stored.

kbatch publishes each PodGroup's phase and conditions and each Queue's shares, but not
the *order* it will consider waiting work in: that changes with every session, and as a
metric it would be a series per waiting job (so there is no such metric). The CLI computes it
the way the scheduler does, with the scheduler's own code: the objects listed from the
API server go into a ``ClusterState`` (as ``kbatch run``'s informers feed one), its
snapshot opens a ``Session`` with the scheduler's conf, and the session's order keys —
every plugin's queue and job order, combined tier by tier (DESIGN §3) — sort the line.
Nothing here talks to the API server or writes anything: objects in, rows out.

The line is the order in which one session visits the waiting jobs when none of them
can be placed (the usual state of a backlog): queues by queue order, and within a
queue, jobs by job order, a job already ready (only surplus pods left) after every job
still short of its minimum — the allocate action's own rule; the enqueue action visits
Pending groups in the same order. As jobs start, queues' shares move and so may their
order: ``eta`` runs the simulator forward for *when*.

A job's reason comes first from the session itself when it cannot be scheduled at all
(its queue is missing, too few pods for minMember), then from what kbatch published: the
PodGroup's Unschedulable condition, or a pod's PodScheduled condition for a pod of its
own; else from its phase.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from kbatch.api import DEFAULT_SCHEDULER_NAMES
from kbatch.api.podgroup import ConditionType, PodGroupPhase
from kbatch.api.quantity import format_quantity
from kbatch.cluster.state import ClusterState
from kbatch.config import SchedulerConf
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.collector import collector_paused
from kbatch.operators.scheduler.core.framework.info import (
    SCHEDULED_STATUSES,
    JobInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.resources import Dims
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.visibility.rows import Explanation, JobRow, Line, QueueRow

Object = dict[str, Any]
Found = TypeVar("Found")
# The phases of a PodGroup that has not started (Unknown: it ran, and fell below
# minMember with pods still running: it waits to be whole again).
WAITING_PHASES = frozenset({PodGroupPhase.PENDING, PodGroupPhase.INQUEUE, PodGroupPhase.UNKNOWN})
SESSION_UID = "kbatch-cli"  # the session the CLI opens is never applied: no real id


@dataclass
class Loaded:
    """The ClusterState last made of some ``ClusterObjects`` (None: none yet)."""

    state: ClusterState | None = None


@dataclass(frozen=True)
class ClusterObjects:
    """What the CLI reads of a cluster: raw objects as the API server lists them, the
    time they were read (epoch seconds), and the events of the objects explained. Once
    read, nothing changes them in place: the states made of them share their parts."""

    now: float
    nodes: Sequence[Object] = ()
    pods: Sequence[Object] = ()
    pod_groups: Sequence[Object] = ()
    queues: Sequence[Object] = ()
    priority_classes: Sequence[Object] = ()
    quotas: Sequence[Object] = ()
    jobs: Sequence[Object] = ()  # batch/v1 Jobs: those held for their PodGroup matter
    events: Sequence[Object] = ()
    # Where pods' volumes let them go (``kbatch.cluster.volumes``): none where the user
    # may not list them
    claims: Sequence[Object] = ()
    volumes: Sequence[Object] = ()
    storage_classes: Sequence[Object] = ()
    csi_nodes: Sequence[Object] = ()  # (how many volumes a node may attach)
    # The state ``load_state`` made of them, not part of what was read: a forward run of
    # the same pods takes their records from it (``eta``), rather than parse each again.
    loaded: Loaded = field(default_factory=Loaded, compare=False, repr=False, kw_only=True)

    def by_kind(self) -> dict[str, Sequence[Object]]:
        return {
            "Node": self.nodes,
            "CSINode": self.csi_nodes,
            "StorageClass": self.storage_classes,
            "PersistentVolume": self.volumes,
            "PersistentVolumeClaim": self.claims,
            "PriorityClass": self.priority_classes,
            "Queue": self.queues,
            "ResourceQuota": self.quotas,
            "PodGroup": self.pod_groups,
            "Pod": self.pods,
            "Job": self.jobs,  # (their own deadlines: ``kbatch.cluster.job_records``)
        }


def load_state(
    objects: ClusterObjects, scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES)
) -> tuple[ClusterState, list[str]]:
    """A ClusterState holding ``objects`` (as the informers would fill it), and one line
    for each object it refused. It holds them as they are, not copies (nothing changes
    listed objects in place: ``ClusterObjects``)."""
    state = ClusterState(scheduler_names)
    warnings = []
    for kind, items in objects.by_kind().items():
        for error in state.replace(kind, items, owned=True):
            warnings.append(f"{error} (kbatch ignores it)")
    objects.loaded.state = state
    return state, warnings


def open_session(
    objects: ClusterObjects,
    conf: SchedulerConf,
    scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES),
) -> tuple[Session, list[str]]:
    """A session on a snapshot of ``objects``, opened as the scheduler opens one (its
    plugins have computed shares and registered their orders); never run or applied.
    The cyclic collector is paused meanwhile: every record and row made outlives it, and
    a collection would walk them all to free nothing."""
    with collector_paused():
        state, warnings = load_state(objects, scheduler_names)
        session = runner.open_session(state.snapshot(), conf, objects.now, SESSION_UID)
    return session, warnings


def line(
    objects: ClusterObjects,
    conf: SchedulerConf,
    scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES),
) -> Line:
    session, warnings = open_session(objects, conf, scheduler_names)
    return line_of(session, warnings)


def line_of(session: Session, warnings: list[str] | None = None) -> Line:
    """The line of an opened session (see the module docstring for the order)."""
    queue_order = sorted(session.queues, key=lambda q: session.queue_order_key(session.queues[q]))
    per_queue: dict[str, list[JobInfo]] = {name: [] for name in queue_order}
    lost: list[JobInfo] = []  # in a queue that does not exist: never considered
    running: list[JobInfo] = []
    for job in session.jobs.values():
        if not is_waiting(job):
            if job.count(*SCHEDULED_STATUSES):
                running.append(job)
            continue
        per_queue.get(job.queue, lost).append(job)
    rows: list[JobRow] = []
    for name in queue_order:
        jobs = sorted(per_queue[name], key=lambda j: turn_key(session, j))
        for place, job in enumerate(jobs, start=1):
            rows.append(_job_row(session, job, place, len(rows) + 1))
    lost.sort(key=lambda j: (j.queue, j.created, j.uid))
    rows.extend(_job_row(session, job, None, None) for job in lost)
    queues = [
        _queue_row(session, name, place, per_queue[name])
        for place, name in enumerate(queue_order, start=1)
    ]
    if any(queue.parent is not None for queue in session.queues.values()):
        queues = as_tree(queues)
    running.sort(key=lambda j: (j.queue, j.created, j.uid))
    held = [_job_row(session, job, None, None) for job in running]
    return Line(queues, rows, held, list(warnings or []))


def turn_key(session: Session, job: JobInfo) -> tuple[object, ...]:
    """A job's place in its queue's line: the allocate action's (a job ready already,
    whose pending pods are surplus, after every job still short of its minimum)."""
    return (session.job_ready(job), *session.job_order_key(job))


def is_waiting(job: JobInfo) -> bool:
    """Has the job not started yet (or lost its minimum)? A PodGroup by its phase; a pod
    of its own while it is pending."""
    if job.has_pod_group:
        return job.phase in WAITING_PHASES
    return bool(job.counts[TaskStatus.PENDING])


def _job_row(session: Session, job: JobInfo, queue_place: int | None, place: int | None) -> JobRow:
    unfinished = len(job.tasks) - job.count(TaskStatus.SUCCEEDED, TaskStatus.FAILED)
    return JobRow(
        namespace=job.namespace,
        name=job.name,
        kind="PodGroup" if job.has_pod_group else "Pod",
        queue=job.queue,
        phase=job.phase.value if job.has_pod_group else _pod_phase(job),
        min_member=job.min_member,
        pods=unfinished,
        scheduled=job.count(*SCHEDULED_STATUSES),
        priority=job.priority,
        created=job.created,
        queue_position=queue_place,
        position=place,
        reason=reason_of(session, job),
    )


def _pod_phase(job: JobInfo) -> str:
    return "Pending" if job.counts[TaskStatus.PENDING] else "Running"


def reason_of(session: Session, job: JobInfo) -> str:
    """Why ``job`` waits, in words (see the module docstring for where they come from)."""
    invalid = session.invalid_reason(job)
    if invalid is not None and (job.tasks or not job.has_pod_group):
        return invalid.message
    if not job.has_pod_group:
        for task in job.tasks_with(TaskStatus.PENDING):
            if task.scheduled_condition is not None and task.scheduled_condition[0] == "False":
                return task.scheduled_condition[2] or task.scheduled_condition[1]
        return "waiting to be placed"
    for condition in job.conditions:
        if condition.type is ConditionType.UNSCHEDULABLE and condition.status == "True":
            return condition.message or condition.reason
    if job.phase is PodGroupPhase.PENDING:
        if invalid is not None:  # no pods yet: admitted all the same (delayed pod creation)
            return f"waiting to be admitted; then: {invalid.message}"
        return "waiting to be admitted (enqueue)"
    if job.phase is PodGroupPhase.INQUEUE:
        return "admitted, waiting for room for its minimum"
    if job.phase is PodGroupPhase.UNKNOWN:
        return f"below minMember ({job.count(*SCHEDULED_STATUSES)}/{job.min_member} scheduled)"
    return f"{job.phase.value}: {job.count(*SCHEDULED_STATUSES)}/{job.min_member} scheduled"


def as_tree(rows: list[QueueRow]) -> list[QueueRow]:
    """``rows`` (in queue order) as a tree: each queue followed by its children, depth
    first, siblings in queue order."""
    children: dict[str | None, list[QueueRow]] = {}
    names = {row.name for row in rows}
    for row in rows:
        children.setdefault(row.parent if row.parent in names else None, []).append(row)
    out: list[QueueRow] = []
    stack = list(reversed(children.get(None, [])))
    while stack:
        row = stack.pop()
        out.append(row)
        stack.extend(reversed(children.get(row.name, [])))
    return out


def _subtree(session: Session, name: str) -> set[str]:
    """``name`` and the queues under it."""
    out = {name}
    grew = True
    while grew:
        more = {n for n, q in session.queues.items() if q.parent in out and n not in out}
        out |= more
        grew = bool(more)
    return out


def _depth(session: Session, name: str) -> int:
    depth, seen = 0, {name}
    parent = session.queues[name].parent
    while parent is not None and parent in session.queues and parent not in seen:
        seen.add(parent)
        depth += 1
        parent = session.queues[parent].parent
    return depth


def _queue_row(session: Session, name: str, place: int, waiting: list[JobInfo]) -> QueueRow:
    queue = session.queues[name]
    within = _subtree(session, name)  # its own, and its subtree's in a tree
    phases = [j.phase for j in session.jobs.values() if j.has_pod_group and j.queue in within]
    dims = session.dims
    return QueueRow(
        name=name,
        weight=queue.weight,
        state="Open" if queue.open else "Closed",
        share=float(queue.share),
        deserved=quantities(dims, queue.deserved),
        allocated=quantities(dims, queue.allocated),
        request=quantities(dims, queue.request),
        capability=None if queue.capability is None else quantities(dims, queue.capability),
        pending=phases.count(PodGroupPhase.PENDING),
        inqueue=phases.count(PodGroupPhase.INQUEUE),
        running=phases.count(PodGroupPhase.RUNNING),
        waiting=len(waiting),
        position=place,
        parent=queue.parent,
        depth=_depth(session, name),
    )


def quantities(dims: Dims, vector: np.ndarray | None) -> dict[str, str]:
    """A vector as Kubernetes quantities (``{"cpu": "3", "memory": "9Gi"}``), infinite
    and zero amounts left out."""
    if vector is None:
        return {}
    return {
        name: format_quantity(name, amount)
        for name, amount in dims.mapping(vector).items()
        if np.isfinite(amount)
    }


EVENTS_SHOWN = 10
EVENT_PODS = 3  # a gang of at most this many pods: its pods' events are shown too


def by_name(by_uid: Mapping[str, Found], namespace: str, name: str) -> Found | None:
    """Of what ``by_uid`` holds by job uid, the PodGroup ``namespace/name``'s, else that of
    the pod of its own of that name."""
    return by_uid.get(f"{namespace}/{name}") or by_uid.get(f"pod:{namespace}/{name}")


def gates_of(objects: ClusterObjects, namespace: str, name: str) -> tuple[str, ...]:
    """The scheduling gates the unbound pod ``namespace/name`` waits for (none: empty)."""
    for pod in objects.pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if (meta.get("namespace") or "default", meta.get("name")) == (namespace, name):
            gates = [] if spec.get("nodeName") else spec.get("schedulingGates") or []
            return tuple(str(gate.get("name")) for gate in gates if isinstance(gate, dict))
    return ()


def find_job(session: Session, namespace: str, name: str) -> JobInfo | None:
    """The PodGroup ``namespace/name``, else the pod of its own of that name."""
    return by_name(session.jobs, namespace, name)


def explain(
    session: Session, line: Line, objects: ClusterObjects, namespace: str, name: str
) -> Explanation | None:
    """The story of the PodGroup ``namespace/name`` (or of a pod of its own of that
    name); None if there is neither."""
    job = find_job(session, namespace, name)
    if job is None:
        return None
    return story_of(line, facts_of(session, job, line.find(namespace, name)), objects.events)


@dataclass(frozen=True)
class JobFacts:
    """What one job's story reads of its session: its row, conditions, minimum, pods by
    status and their names (``kbatch.visibility.served`` keeps them for every job)."""

    row: JobRow
    conditions: list[dict[str, str]]
    min_resources: dict[str, str]
    pods: dict[str, int]  # pod status -> count
    pod_names: frozenset[str]

    @property
    def event_pods(self) -> frozenset[str]:
        """The pods whose events its story shows beside the PodGroup's: all of a gang of
        at most ``EVENT_PODS`` (a pod of its own: itself), none of a larger one (the
        scheduler tells the group what it tells each pod; asking a busy API server for
        each pod's events costs a tenth of a second or more apiece)."""
        return self.pod_names if len(self.pod_names) <= EVENT_PODS else frozenset()


def facts_of(session: Session, job: JobInfo, row: JobRow | None) -> JobFacts:
    """``job``'s facts; ``row``: its row in the line, None when it has none there."""
    counts: dict[str, int] = {}
    for task in job.tasks.values():
        counts[task.status.name.title()] = counts.get(task.status.name.title(), 0) + 1
    if job.gated is not None:  # (not its tasks until their gates are removed)
        counts["Gated"] = job.gated.count
    return JobFacts(
        row=row if row is not None else _job_row(session, job, None, None),
        conditions=[
            c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in job.conditions
        ],
        min_resources=quantities(session.dims, job.min_resources),
        pods=counts,
        pod_names=frozenset(task.name for task in job.tasks.values()),
    )


def story_of(line: Line, facts: JobFacts, events: Sequence[Object]) -> Explanation:
    """The story of the job of ``facts`` in ``line``, with its last ``events``."""
    row = facts.row
    ahead_in_queue = [
        other
        for other in line.jobs
        if other.queue == row.queue
        and row.queue_position is not None
        and other.queue_position is not None
        and other.queue_position < row.queue_position
    ]
    return Explanation(
        job=row,
        conditions=facts.conditions,
        min_resources=facts.min_resources,
        pods=facts.pods,
        ahead_in_queue=ahead_in_queue,
        ahead=(row.position - 1) if row.position is not None else 0,
        running_in_queue=[r for r in line.running if r.queue == row.queue],
        events=events_of(events, row.namespace, row.name, facts.event_pods),
    )


def events_of(
    events: Sequence[Object], namespace: str, group: str, pods: frozenset[str]
) -> list[dict[str, str]]:
    """The last ``EVENTS_SHOWN`` events of the PodGroup and of ``pods``, oldest first."""
    chosen = []
    for event in events:
        involved = event.get("involvedObject") or {}
        if involved.get("namespace", namespace) != namespace:
            continue
        kind, obj = involved.get("kind"), involved.get("name")
        if (kind == "PodGroup" and obj == group) or (kind == "Pod" and obj in pods):
            chosen.append(
                {
                    "time": str(_event_time(event)),
                    "object": f"{kind}/{obj}",
                    "type": str(event.get("type") or ""),
                    "reason": str(event.get("reason") or ""),
                    "message": str(event.get("message") or ""),
                    "count": str(event.get("count") or 1),
                }
            )
    # (in the same second, by object: the same whatever order they were listed in)
    chosen.sort(key=lambda e: (e["time"], e["object"], e["reason"], e["message"]))
    return chosen[-EVENTS_SHOWN:]


def _event_time(event: Mapping[str, Any]) -> str:
    series = event.get("series") or {}
    return str(
        series.get("lastObservedTime")
        or event.get("lastTimestamp")
        or event.get("eventTime")
        or event.get("firstTimestamp")
        or (event.get("metadata") or {}).get("creationTimestamp")
        or ""
    )
