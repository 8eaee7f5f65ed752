"""When ``kbatch run``'s cyclic garbage collector walks what the scheduler keeps.

The cache of a large cluster (its pods as nested dicts, their records, the last
snapshot) is millions of objects that live for the whole run, and the collector walks
every one still in a generation at each of its passes: with 50,000 pods on 5,000 nodes
a pass of the youngest generation alone took 0.1 to 0.5 s, every few seconds, and it
holds every thread, the bind workers too, so a gang's binds spread past a second.

The collector stays paused from a session's start until the loop has let go of the
session, and what is alive then is frozen out of its sight (``gc.freeze``: frozen
objects are still freed when nothing refers to them; only cycles among them wait): a
session leaves no cycles behind (``tests/unit/sim/test_session_garbage.py``), and each
pass then walks only what came since the last session. Cycles other parts of the
process leave among frozen objects (a request's exception, an asyncio task) are
collected by a full pass, at most every ``full_every`` seconds and only before a
session while no bind is in flight, where it delays that session and nothing a gang
waits for.
"""

import gc
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kbatch.operators.scheduler.core.framework.collector import collector_paused

log = logging.getLogger("kbatch.loop")
FULL_EVERY = 600.0  # seconds between full passes over what was frozen
FREEZE_EVERY = 0.5  # seconds between freezes of what came in between sessions, at most


class CollectorSchedule:
    """Freezes what outlives each session (``around_session``); now and then, before a
    session with no bind in flight, hands it all back to the collector for one full
    pass (``before_session``)."""

    def __init__(
        self,
        full_every: float = FULL_EVERY,
        clock: Callable[[], float] = time.monotonic,
        freeze_every: float = FREEZE_EVERY,
    ) -> None:
        self.full_every = full_every
        self.freeze_every = freeze_every
        self.clock = clock
        self._last_full = self._last_freeze = clock()
        self.full_passes = 0

    @contextmanager
    def around_session(self, binds_in_flight: bool) -> Iterator[None]:
        """A full pass first if one is due (``before_session``); the collector paused
        for the session and until the caller has let go of it, then what is left
        frozen. (Resumed sooner, its next pass would walk all the session made.)"""
        self.before_session(binds_in_flight)
        with collector_paused():
            yield
            self._freeze()

    def between_sessions(self) -> None:
        """What came in since the last freeze (the watches' new versions of pods, most
        of it, at some hundreds a second while binds are answered), frozen too, at
        most every ``freeze_every`` seconds: else each pass of the youngest generation
        walks as many, tenths of a second at 50,000 pods."""
        if self.clock() - self._last_freeze >= self.freeze_every:
            self._freeze()

    def _freeze(self) -> None:
        gc.freeze()
        self._last_freeze = self.clock()

    def before_session(self, binds_in_flight: bool) -> None:
        """A full pass over everything frozen, if one is due and no bind is in flight."""
        if binds_in_flight or self.clock() - self._last_full < self.full_every:
            return
        started = time.perf_counter()
        gc.unfreeze()
        freed = gc.collect()
        self._freeze()
        self._last_full = self.clock()
        self.full_passes += 1
        log.debug(
            "full garbage collection: %d objects freed in %.3f s",
            freed,
            time.perf_counter() - started,
        )
