"""The simulated cluster's events: recorded on simulated time, as the runtime records them.

An event identical to one recorded lately about the same object is held back (one
rule with the runtime: ``outcome.EventFilter``). The log also knows when an event it
recorded or held back may be recorded again (``retell_at``, since the runner last
reset it): a session that repeats the event then records it, so a run that jumps over quiet ticks
must not jump past that time (``kbatch.sim.runner``).

A run that keeps no history (``runner.Options.history`` False) keeps only the
refusals in its log: the admission reads back why it refused an object, and nothing
reads the rest, which would grow with every bind of the run.
"""

import math
from collections.abc import Hashable
from dataclasses import dataclass

from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.interface import ObjectRef

REJECTED = "AdmissionRejected"  # the reason of a refused creation's event


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    kind: str
    namespace: str
    name: str
    type: str
    reason: str
    message: str


class EventLog:
    def __init__(self, history: bool = True) -> None:
        self.entries: list[Event] = []  # (without ``history``: the refusals only)
        self.history = history
        self.retell_at = math.inf
        self._filter = decided.EventFilter()

    def record(
        self, identity: Hashable, ref: ObjectRef, type_: str, reason: str, message: str, now: float
    ) -> None:
        """Record the event at ``now`` unless the same was recorded lately about
        ``identity`` (the object: a new one of the same name gets its events again)."""
        fresh, again = self._filter.check(identity, type_, reason, message, now)
        if fresh and (self.history or reason == REJECTED):
            self.entries.append(
                Event(now, ref.kind, ref.namespace, ref.name, type_, reason, message)
            )
        if again < self.retell_at:
            self.retell_at = again
