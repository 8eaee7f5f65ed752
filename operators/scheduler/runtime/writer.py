"""The writes of ``kbatch run`` that follow its binds: statuses and events, each kind in
order on a thread of its own (``OrderedWriter``), and the latest status of an object
only (``LatestStatuses``).

A status waits for the binds in flight (it counts them), so during a bind burst every
session would queue the same statuses again: 1,000 PodGroups' statuses per session,
tens of thousands of writes behind a 10,000-pod burst, all but the last of each object
stale when finally sent. Queued again, an object's status replaces the one still
waiting, in that one's place.

At shutdown the writers finish what they can in ``drain_seconds`` and drop the rest,
saying how many: a stop must not wait for a backlog of thousands of events behind a
burst, and a dropped status is written again by the next leader's first session (it
writes every status that differs from what it watches).
"""

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

log = logging.getLogger("kbatch.kube")
DRAIN_SECONDS = 2.0


class OrderedWriter:
    """Calls run one after another on one thread, in the order submitted."""

    def __init__(self, name: str, drain_seconds: float | None = None) -> None:
        self.name = name
        self.drain_seconds = DRAIN_SECONDS if drain_seconds is None else drain_seconds
        self.dropped = 0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"kbatch-{name}")
        self._until = math.inf  # calls not started by then are dropped (set at shutdown)

    def submit(self, call: Callable[..., None], *args: Any) -> None:
        """Queue ``call(*args)``; nothing once shut down."""
        with contextlib.suppress(RuntimeError):  # shut down meanwhile
            self._pool.submit(self._run, call, args)

    def _run(self, call: Callable[..., None], args: tuple[Any, ...]) -> None:
        if time.monotonic() > self._until:
            self.dropped += 1
            return
        call(*args)

    def drain(self) -> None:
        """From now on, finish the queue for at most ``drain_seconds``, then drop the
        rest (several writers drain side by side; ``shutdown`` waits)."""
        self._until = min(self._until, time.monotonic() + self.drain_seconds)

    def shutdown(self) -> None:
        """Drain (if not told to already), and wait until the queue is done."""
        self.drain()
        self._pool.shutdown(wait=True)
        if self.dropped:
            log.warning("stopping: %d %s not sent", self.dropped, self.name)


class LatestStatuses:
    """Statuses queued but not yet written, by API path: the latest one of each. ``put``
    tells whether the path was queued already (the waiting write takes the new status)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queued: dict[str, tuple[str | None, dict[str, Any]]] = {}

    def put(self, path: str, group: str | None, status: dict[str, Any]) -> bool:
        """Queue ``status`` for ``path`` (``group``: the PodGroup's key, if it is one's);
        True if one was waiting already."""
        with self._lock:
            waiting = path in self._queued
            self._queued[path] = (group, status)
            return waiting

    def queued(self, path: str) -> bool:
        with self._lock:
            return path in self._queued

    def take(self, path: str) -> dict[str, Any] | None:
        with self._lock:
            queued = self._queued.pop(path, None)
        return None if queued is None else queued[1]

    def groups(self) -> frozenset[str]:
        """The PodGroups (namespace/name) whose status is queued."""
        with self._lock:
            return frozenset(group for group, _ in self._queued.values() if group)
