"""The cyclic garbage collector, paused while a snapshot is built or a session runs."""

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic garbage collection inside. A snapshot makes some hundred thousand
    objects that all outlive it, and a session as many that live until it ends; a
    collection their allocations set off walks every one of them and of the cache
    (some 0.4 s at 50,000 pods) to free nothing. The collector runs again, at its usual
    pace, once the block is over (if it was on)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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
