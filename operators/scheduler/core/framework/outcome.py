"""What a session decided, for a backend to apply: the one thing that crosses from
the scheduler core to a cluster besides the snapshot.

A session builds its ``Outcome`` as its statements commit (binds, evictions,
nominations) and its close adds the PodGroup and Queue statuses that changed and the
events. A backend (the Kubernetes runtime, the simulator) applies it in one step and
in one order: binds, evictions, nominations, then the statuses that count them, then
the events. What the user reads is worded here once, for both backends: the event
reasons and messages, and which repeats are dropped (``EventFilter``).
"""

from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Protocol

from kbatch.api.podgroup import PodGroupPhase, PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo

# An identical event (same object, reason and message) is not recorded again sooner.
EVENT_REPEAT_SECONDS = 300.0
SCHEDULED = "Scheduled"
FAILED_SCHEDULING = "FailedScheduling"  # kube-scheduler's reason, for a rejected bind too
EVICT = "Evict"
# A pending pod's PodScheduled condition (DESIGN §13): kube-scheduler's reason when no
# node takes it (cluster-autoscaler and Karpenter scale up for exactly that), another
# when its queue holds it, which autoscalers leave alone: more nodes would not help.
POD_SCHEDULED = "PodScheduled"
UNSCHEDULABLE = "Unschedulable"
QUEUE_LIMITED = "kbatch.io/QueueLimited"
FAILED_EVICTION = "FailedEviction"
# The condition kube-scheduler gives a pod before it deletes it to make room, and that
# condition's reason: a Job's podFailurePolicy can ignore a failure so marked. kbatch
# gives it to every victim, with a message naming who takes the room.
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
SCHEDULER = "kbatch"  # who the condition's message says disrupts the pod


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class Bind:
    task: TaskInfo
    node: str


@dataclass(frozen=True, slots=True)
class Eviction:
    """Evict ``task``: ``reason`` is the message of its Evict events, ``disruption`` is the
    message of the DisruptionTarget condition it gets first (who takes its room)."""

    task: TaskInfo
    reason: str
    disruption: str


@dataclass(frozen=True, slots=True)
class Nomination:
    """Keep ``node``'s room for pending ``task`` (its pod's status.nominatedNodeName), or
    stop keeping it (None)."""

    task: TaskInfo
    node: str | None


@dataclass(frozen=True, slots=True)
class PodGroupUpdate:
    namespace: str
    name: str
    status: PodGroupStatus


@dataclass(frozen=True, slots=True)
class QueueUpdate:
    name: str
    status: QueueStatus


@dataclass(frozen=True, slots=True)
class Event:
    ref: ObjectRef
    type: str
    reason: str
    message: str


def failed_scheduling(task: TaskInfo, message: str) -> Event:
    """The Warning FailedScheduling on ``task``'s pod, saying ``message``: the one last
    recorded for it (``TaskInfo.last_event``) when it says the same, else a new one, kept
    there. A backlog's pods are each given an event saying why they wait, every
    session, mostly in the same words:
    these are then the same objects, not some ten thousand new ones each time (and as
    many more for the collector to walk)."""
    last = task.last_event
    if last is not None and last.message == message:
        return last
    event = task.last_event = Event(
        ObjectRef("Pod", task.namespace, task.name), "Warning", FAILED_SCHEDULING, message
    )
    return event


@dataclass(frozen=True, slots=True)
class PodCondition:
    """A pod's PodScheduled condition to write: status, reason, message."""

    task: TaskInfo
    status: str
    reason: str
    message: str

    def triple(self) -> tuple[str, str, str]:
        return (self.status, self.reason, self.message)


@dataclass(slots=True)
class Outcome:
    """A session's decisions, in the order a backend applies them."""

    binds: list[Bind] = field(default_factory=list)
    evictions: list[Eviction] = field(default_factory=list)
    nominations: list[Nomination] = field(default_factory=list)
    pod_groups: list[PodGroupUpdate] = field(default_factory=list)
    queues: list[QueueUpdate] = field(default_factory=list)
    pod_conditions: list[PodCondition] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)

    def event(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None:
        self.events.append(Event(ref, type_, reason, message))

    def changes_nothing(self) -> bool:
        """Nothing to send but events: no bind, eviction or nomination, no status or pod
        condition to write (a session that found everything as its snapshot showed it;
        its events repeat the last ones, which a cluster records at most once in a while)."""
        return not (
            self.binds
            or self.evictions
            or self.nominations
            or self.pod_groups
            or self.queues
            or self.pod_conditions
        )


class Backend(Protocol):
    """What applying an outcome asks of a cluster (``apply_in_order``)."""

    def bind(self, task: TaskInfo, node: str) -> None: ...
    def flush(self) -> None: ...
    def evict(self, task: TaskInfo, reason: str, disruption: str) -> None: ...
    def nominate(self, task: TaskInfo, node: str | None) -> None: ...
    def update_pod_group(self, namespace: str, name: str, status: PodGroupStatus) -> None: ...
    def update_queue(self, name: str, status: QueueStatus) -> None: ...
    def update_pod_condition(self, condition: PodCondition) -> None: ...
    def record(self, ref: ObjectRef, type_: str, reason: str, message: str) -> None: ...


def apply_in_order(backend: Backend, outcome: Outcome) -> None:
    """The one order both backends apply an outcome in: the binds (then ``flush``: all
    of them are known, to be sent), the evictions, the nominations, then the PodGroup
    and Queue statuses that count them, the pods' PodScheduled conditions, then the
    events."""
    for bind in outcome.binds:
        backend.bind(bind.task, bind.node)
    backend.flush()
    for eviction in outcome.evictions:
        backend.evict(eviction.task, eviction.reason, eviction.disruption)
    for nomination in outcome.nominations:
        backend.nominate(nomination.task, nomination.node)
    for group in outcome.pod_groups:
        backend.update_pod_group(group.namespace, group.name, group.status)
    for queue in outcome.queues:
        backend.update_queue(queue.name, queue.status)
    for condition in outcome.pod_conditions:
        backend.update_pod_condition(condition)
    for event in outcome.events:
        backend.record(event.ref, event.type, event.reason, event.message)


# --------------------------------------------------------------------------- words
def scheduled_message(key: str, node: str) -> str:
    return f"Successfully assigned {key} to {node}"


def binding_rejected_message(why: str) -> str:
    return f"Binding rejected: {why}"


def missing_group_message(namespace: str, group: str, refused: str | None = None) -> str:
    """Why a pod waits for its PodGroup: there is none, or kbatch refused it (``refused``:
    'field: why')."""
    if refused is not None:
        return (
            f"PodGroup {namespace}/{group} is ignored by kbatch ({refused}): the pod waits "
            "until it is fixed"
        )
    return (
        f"PodGroup {namespace}/{group} does not exist: the pod waits until it is created "
        "(annotation scheduling.k8s.io/group-name)"
    )


def evicted_message(key: str, reason: str) -> str:
    return f"Evicted {key}: {reason}"


def disruption_condition(message: str) -> dict[str, str]:
    """The DisruptionTarget condition a victim's pod gets before its deletion (without
    its transition time, which the backend stamps)."""
    return {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "reason": PREEMPTION_BY_SCHEDULER,
        "message": message,
    }


def preemptor(task: TaskInfo, job: JobInfo) -> str:
    """``task``'s pod and its PodGroup (none for a pod without one), as a victim's
    DisruptionTarget message names them."""
    group = f" of PodGroup {job.namespace}/{job.name}" if job.has_pod_group else ""
    return f"pod {task.key}{group}"


def preempted_message(task: TaskInfo, job: JobInfo) -> str:
    """The DisruptionTarget message of a victim preempted for ``task`` of ``job``: in
    kube-scheduler's words, naming the preemptor."""
    return f"{SCHEDULER}: preempting to accommodate {preemptor(task, job)}"


def reclaimed_message(task: TaskInfo, job: JobInfo) -> str:
    """The DisruptionTarget message of a victim whose room ``job``'s queue takes back
    for ``task``."""
    reclaims = f"queue {job.queue} reclaims its share"
    return f"{SCHEDULER}: {reclaims}, to accommodate {preemptor(task, job)}"


def preemption_messages(task: TaskInfo, job: JobInfo) -> tuple[str, str]:
    """What a victim preempted for ``task`` of ``job`` is told: its Evict events' message
    and its DisruptionTarget message."""
    return f"preempted for {task.key}", preempted_message(task, job)


def reclaim_messages(task: TaskInfo, job: JobInfo) -> tuple[str, str]:
    """What a victim whose room ``job``'s queue takes back for ``task`` is told: its
    Evict events' message and its DisruptionTarget message."""
    return f"reclaimed by {task.key}", reclaimed_message(task, job)


def phase_event(namespace: str, name: str, old: PodGroupPhase, new: PodGroupPhase) -> Event:
    """A PodGroup's phase change, as an event (reason: the new phase), so that its
    events show Pending → Inqueue → Running over time."""
    message = f"phase {old.value} → {new.value}"
    return Event(ObjectRef("PodGroup", namespace, name), "Normal", new.value, message)


class EventFilter:
    """Which events to record: an event identical to one recorded for the same object (by
    identity: a pod made again under the same name gets its events again) within
    ``EVENT_REPEAT_SECONDS`` is dropped. The clock is the caller's (simulated time in
    the simulator, monotonic seconds on a cluster).

    Events recorded longer ago than that are forgotten once more than ``limit`` are
    remembered; when most are still within the window, the next such clearing waits
    until twice as many are (one rebuild per doubling: a burst of events costs each of
    them a constant share, not a rebuild each)."""

    def __init__(self, repeat_seconds: float = EVENT_REPEAT_SECONDS, limit: int = 50_000) -> None:
        self.repeat_seconds = repeat_seconds
        self.limit = limit
        self._recorded: dict[tuple[Hashable, str, str, str], float] = {}
        self._clear_above = limit  # clear old events when more than this are remembered

    def fresh(self, identity: Hashable, event: Event, now: float) -> bool:
        """Record ``event`` now? (and remember it if so)"""
        return self.check(identity, event.type, event.reason, event.message, now)[0]

    def check(
        self, identity: Hashable, type_: str, reason: str, message: str, now: float
    ) -> tuple[bool, float]:
        """``fresh`` for an event given by its fields, and when it may be recorded
        again (``may_record_again_at`` after it): one look-up, for a simulator that repeats
        hundreds of held-back events every session."""
        key = (identity, type_, reason, message)
        last = self._recorded.get(key)
        if last is not None and now - last < self.repeat_seconds:
            return False, last + self.repeat_seconds
        self._recorded[key] = now
        if len(self._recorded) > self._clear_above:
            self._recorded = {
                k: t for k, t in self._recorded.items() if now - t < self.repeat_seconds
            }
            self._clear_above = max(self.limit, 2 * len(self._recorded))
        return True, now + self.repeat_seconds

    def may_record_again_at(self, identity: Hashable, event: Event) -> float | None:
        """When ``event`` may be recorded again (None: it is not remembered as recorded)."""
        last = self._recorded.get((identity, event.type, event.reason, event.message))
        return None if last is None else last + self.repeat_seconds
