"""The cyclic garbage collector, paused while a snapshot is built or a session runs."""

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class _Pauses:
    """The pauses in force in every thread of the process, as the collector is the
    process's: it resumes when the last one ends (if it was on when the first began),
    not when the first ends while another thread's still runs (``kbatch run``'s ETA
    forecast beside a session)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0
        self._resume = False

    def begin(self) -> None:
        with self._lock:
            if self._count == 0:
                self._resume = gc.isenabled()
                gc.disable()
            self._count += 1

    def end(self) -> None:
        with self._lock:
            self._count -= 1
            if self._count == 0 and self._resume:
                gc.enable()


# (one per process, like the collector it pauses)
_PAUSES = _Pauses()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside. A snapshot makes some hundred thousand
    objects that all outlive it, and a session as many that live until it ends; a
    collection their allocations set off walks every one of them and of the cache
    (some 0.4 s at 50,000 pods) to free nothing. The collector runs again, at its usual
    pace, once the last pause in force in any thread is over (if it was on)."""
    _PAUSES.begin()
    try:
        yield
    finally:
        _PAUSES.end()


@contextmanager
def collector_paused_for_run(pause: bool) -> Iterator[Callable[[], None]]:
    """Within it, the cyclic collector is off, and a function that freezes every object
    alive (``gc.freeze``: the collector will not walk them; they are still freed when
    nothing refers to them); on leaving, all are handed back to it and it is on again
    (if it was). ``pause`` False: it does nothing. For a process that runs a
    simulation and nothing else (``kbatch simulate``, ``kbatch replay``): the freeze
    and the thaw are of every object of the process."""
    if not pause:
        yield lambda: None
        return
    with collector_paused():
        try:
            yield gc.freeze
        finally:
            gc.unfreeze()
