"""The times at which the simulated kubelet acts on a pod on its own, earliest first.

A pod finishes when its ``kbatch.io/sim-duration`` (or its ``activeDeadlineSeconds``,
if that comes first) has elapsed, and a pod being deleted goes away when its grace
period is over. Each tick asks which pods are due and when the next one is; scanning
every pod the run has ever made for that costs in proportion to the run's history, so
the times are kept in a heap instead, and a tick costs in proportion to the pods
actually due.

A pod's time may be changed or cleared after it was set (an evicted pod no longer
finishes); the heap keeps the old entry and drops it when it reaches the top,
because it no longer matches the pod's current time (``current``). Due pods come
out in the order the pods were first seen (``order``), as a scan of them would
take them, so that the run does not depend on the heap.
"""

import functools
import heapq
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kbatch.sim.pod_objects import PodKey

Key = TypeVar("Key", bound=Hashable)


@dataclass(slots=True)
class Alarms(Generic[Key]):
    """Keys due at times; ``current(key)`` is the time now set for it (None: none)."""

    current: Callable[[Key], float | None]
    order: Callable[[Key], int]
    _heap: list[tuple[float, int, Key]] = field(default_factory=list)

    def set(self, key: Key, at: float) -> None:
        """``key`` is due at ``at`` (its ``current`` must say so from now on)."""
        heapq.heappush(self._heap, (at, self.order(key), key))

    def pop_due(self, now: float) -> list[Key]:
        """The keys due at or before ``now``, in their order; they are forgotten."""
        due: dict[Key, int] = {}
        while self._heap and self._heap[0][0] <= now:
            at, order, key = heapq.heappop(self._heap)
            if self.current(key) == at:
                due[key] = order
        return sorted(due, key=due.__getitem__)

    def next(self) -> float | None:
        """The earliest time some key is due at (None: none is)."""
        while self._heap:
            at, _, key = self._heap[0]
            if self.current(key) == at:
                return at
            heapq.heappop(self._heap)
        return None


@dataclass(slots=True)
class PodTimes:
    """What the simulator knows of one pod beyond its object."""

    duration: float | None = None  # from kbatch.io/sim-duration
    finish_at: float | None = None  # set when it starts running with a duration or deadline
    exceeds: bool = False  # its activeDeadlineSeconds ends it before its duration
    release_at: float | None = None  # set when it is being deleted
    evictions: int = 0
    order: int = 0  # when it was first seen, among the pods: the order due pods go in


def pod_alarms(pods: dict[PodKey, PodTimes], name: str) -> Alarms[PodKey]:
    """Alarms at the pods' ``finish_at`` or ``release_at`` (``name``), in the order they
    were first seen. (They read the pods' times, not the backend: no cycle through a
    bound method, so a simulation is freed as soon as nothing refers to it.)"""
    return Alarms[PodKey](
        functools.partial(_time_of, name, pods), functools.partial(_order_of, pods)
    )


def _order_of(pods: dict[PodKey, PodTimes], key: PodKey) -> int:
    return pods[key].order


def _time_of(name: str, pods: dict[PodKey, PodTimes], key: PodKey) -> float | None:
    """The pod's ``finish_at`` or ``release_at`` (``name``); None for a pod not known."""
    times = pods.get(key)
    return None if times is None else getattr(times, name)
