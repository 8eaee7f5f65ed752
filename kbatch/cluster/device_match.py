"""Which devices a request's CEL selectors (its DeviceClass's and its own) select, as
kube-scheduler's DynamicResources plugin evaluates them: each expression sees ``device``
with ``driver``, ``attributes[domain].name`` and ``capacity[domain].name`` (quantities:
``quantity("1Gi")``, ``q.compareTo(other)``, ``isGreaterThan``, ``isLessThan``,
``asInteger``, ``asApproximateFloat``). An expression that does not compile, fails at run
time on a device (e.g. an attribute it lacks) or yields no bool raises SelectorError:
the claim cannot be allocated, and its pod is told the error.

Programs are compiled once per expression (``_program``), and each device's context made
once per device record (``DeviceContexts``).
"""

import functools
import importlib
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from kbatch.cluster.dra_records import DeviceRecord
from kbatch.cluster.quantity import parse_quantity

if TYPE_CHECKING:
    import cel

QUANTITY = "__quantity__"  # (a quantity in CEL: a map of its one number under this key)


@functools.cache
def _cel() -> ModuleType:
    """The CEL evaluator, imported when a selector is first evaluated: its package loads
    a command line of its own too (0.17 s and 17 MiB), which no process without claims
    should pay."""
    return importlib.import_module("cel")


class SelectorError(ValueError):
    """A CEL selector that cannot be evaluated; ``str()`` says which and why."""


@functools.lru_cache(maxsize=1024)
def _program(expression: str) -> "cel.Program":
    try:
        return _cel().compile(expression)
    except (ValueError, RuntimeError) as exc:
        raise SelectorError(f"CEL expression {expression!r} does not compile: {exc}") from exc


def _quantity(value: object) -> dict[str, float]:
    if isinstance(value, Mapping) and QUANTITY in value:
        return {QUANTITY: float(value[QUANTITY])}
    try:
        return {QUANTITY: float(parse_quantity(value))}
    except (ValueError, ArithmeticError, TypeError) as exc:
        raise ValueError(f"{value!r} is not a quantity") from exc


def _number(value: object) -> float:
    if not isinstance(value, Mapping) or QUANTITY not in value:
        raise ValueError(f"{value!r} is not a quantity")
    return float(value[QUANTITY])


def _compare(left: object, right: object) -> int:
    a, b = _number(left), _number(right)
    return (a > b) - (a < b)


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "compareTo": _compare,
    "isGreaterThan": lambda a, b: _compare(a, b) > 0,
    "isLessThan": lambda a, b: _compare(a, b) < 0,
    "asInteger": lambda a: int(_number(a)),
    "asApproximateFloat": _number,
}


def cel_device(driver: str, device: DeviceRecord) -> dict[str, object]:
    """``device`` as CEL sees it."""
    attributes: dict[str, dict[str, object]] = {}
    for key, value in device.attributes.items():
        domain, _, name = key.rpartition("/")
        attributes.setdefault(domain, {})[name] = value
    capacity: dict[str, dict[str, object]] = {}
    for key, amount in device.capacity.items():
        domain, _, name = key.rpartition("/")
        capacity.setdefault(domain, {})[name] = {QUANTITY: amount}
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


class DeviceContexts:
    """A CEL context per device (driver, record), made once while the records last."""

    def __init__(self) -> None:
        self._contexts: dict[int, tuple[DeviceRecord, cel.Context]] = {}

    def selects(self, driver: str, device: DeviceRecord, expressions: tuple[str, ...]) -> bool:
        """Do all of ``expressions`` select ``device`` (of ``driver``)? SelectorError
        when one cannot be evaluated on it."""
        if not expressions:
            return True
        context = self._context(driver, device)
        for expression in expressions:
            program = _program(expression)
            try:
                found = program.execute(context)
            except (LookupError, ArithmeticError, ValueError, TypeError, RuntimeError) as exc:
                why = f"{type(exc).__name__}: {exc}" if isinstance(exc, LookupError) else str(exc)
                raise SelectorError(
                    f"CEL expression {expression!r} failed on device {device.name!r} "
                    f"of driver {driver}: {why}"
                ) from exc
            if not isinstance(found, bool):
                raise SelectorError(f"CEL expression {expression!r} yields no bool: {found!r}")
            if not found:
                return False
        return True

    def _context(self, driver: str, device: DeviceRecord) -> "cel.Context":
        kept = self._contexts.get(id(device))
        if kept is not None and kept[0] is device:
            return kept[1]
        context = _cel().Context()
        for name, function in FUNCTIONS.items():
            context.add_function(name, function)
        context.add_variable("device", cel_device(driver, device))
        self._contexts[id(device)] = (device, context)
        return context
