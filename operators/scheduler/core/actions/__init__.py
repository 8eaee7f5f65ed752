"""Actions: the mechanism of a session. Each is one module with ``NAME`` and ``execute``."""

from types import ModuleType

from kbatch.operators.scheduler.core.actions import (
    allocate,
    backfill,
    enqueue,
    preempt,
    reclaim,
    reserve,
)

REGISTRY: dict[str, ModuleType] = {
    module.NAME: module for module in (enqueue, allocate, backfill, preempt, reclaim, reserve)
}
