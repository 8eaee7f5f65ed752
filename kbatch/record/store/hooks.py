"""What ties a scheduler to a recorder: its backend and its clock, wrapped.

``recorded(backend, clock, recorder)`` gives the backend and the clock to build a
``Scheduler`` with: the backend notes where each session's snapshot stands among the
changes, what the session decided, and when its outcome is applied (the session's
work done); the clock notes the time the session read.
Each only enqueues (``recorder``); a session's decisions are taken as names and
status objects, the work of turning them into JSON is the writer thread's.
"""

from collections.abc import Callable
from typing import Any, Protocol

from kbatch.operators.scheduler.core.framework.interface import Backend, Outcome, Snapshot

# (binds [key, node], evictions [key, reason], nominations [key, node or None],
#  PodGroup statuses [key, status], Queue statuses [name, status])
Decisions = tuple[list[list[str]], list[list[str]], list[list[str | None]], list[Any], list[Any]]


class SessionRecorder(Protocol):
    def new_scheduler(self) -> None: ...

    def session(self) -> None: ...

    def now(self, value: float) -> None: ...

    def decided(self, decisions: Decisions) -> None: ...

    def ended(self) -> None: ...


def decisions(outcome: Outcome) -> Decisions:
    """What ``outcome`` decided, by object: the pods bound and where, evicted and why,
    nominated; the PodGroup and Queue statuses written."""
    return (
        [[f"{b.task.namespace}/{b.task.name}", b.node] for b in outcome.binds],
        [[f"{e.task.namespace}/{e.task.name}", e.reason] for e in outcome.evictions],
        [[f"{n.task.namespace}/{n.task.name}", n.node] for n in outcome.nominations],
        [(f"{g.namespace}/{g.name}", g.status) for g in outcome.pod_groups],
        [(q.name, q.status) for q in outcome.queues],
    )


class RecordingBackend:
    """``inner``, telling ``recorder`` when a session begins and what it decided."""

    def __init__(self, inner: Backend, recorder: SessionRecorder) -> None:
        self.inner = inner
        self.recorder = recorder

    def snapshot(self) -> Snapshot:
        self.recorder.session()
        return self.inner.snapshot()

    def apply(self, outcome: Outcome) -> None:
        self.recorder.decided(decisions(outcome))
        try:
            self.inner.apply(outcome)
        finally:
            self.recorder.ended()


def recorded(
    backend: Backend, clock: Callable[[], float], recorder: SessionRecorder
) -> tuple[Backend, Callable[[], float]]:
    """The backend and clock of a new scheduler whose sessions ``recorder`` records."""
    recorder.new_scheduler()

    def now() -> float:
        value = clock()
        recorder.now(value)
        return value

    return RecordingBackend(backend, recorder), now
