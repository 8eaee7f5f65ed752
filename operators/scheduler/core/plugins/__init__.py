"""Plugins: the policy of a session. Each is one module with ``NAME`` and
``on_session_open(session, option)`` that registers its functions; an explicit
registry, no import side effects."""

from types import ModuleType

from kbatch.operators.scheduler.core.plugins import (
    binpack,
    conformance,
    drf,
    flow,
    gang,
    lifetime,
    nodeorder,
    overcommit,
    predicates,
    priority,
    proportion,
)

REGISTRY: dict[str, ModuleType] = {
    module.NAME: module
    for module in (
        priority,
        gang,
        conformance,
        drf,
        predicates,
        proportion,
        nodeorder,
        binpack,
        lifetime,
        flow,
        overcommit,
    )
}
