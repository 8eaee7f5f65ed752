"""The cyclic garbage collector, paused while a snapshot is built or a session runs."""

import gc
from collections.abc import Iterator
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
