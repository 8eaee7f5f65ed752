"""Kubernetes quantities to scheduler amounts, with the kubernetes client's own parser.

Units: cpu in millicores, every other resource in its base unit (bytes, devices, pods).
"""

import functools
import importlib.util
import sys
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from types import ModuleType
from typing import Any

CPU = "cpu"
CLIENT_PARSER = "kubernetes.utils.quantity"


def _client_parser_module() -> ModuleType:
    """The kubernetes client's ``kubernetes.utils.quantity``. It needs nothing but
    ``decimal``; imported by its name, though, it runs the client package's
    ``__init__``, which imports the whole API client: a tenth of a second at every
    start of every command, ``kbatch simulate`` included, that reads no cluster. So it
    is read from the installed client's own file, unless something imported the client
    already (the operators: then that module is the one)."""
    imported = sys.modules.get(CLIENT_PARSER)
    if imported is not None:
        return imported
    package = importlib.util.find_spec("kubernetes")  # found, not imported
    if package is None or not package.submodule_search_locations:
        raise ImportError("the kubernetes client is not installed")
    path = Path(package.submodule_search_locations[0]) / "utils" / "quantity.py"
    spec = importlib.util.spec_from_file_location(f"kbatch._client.{CLIENT_PARSER}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot read the kubernetes client's parser at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


parse_quantity: Callable[[Any], Decimal] = _client_parser_module().parse_quantity


def amount(resource: str, value: object) -> float:
    """Parse one quantity; raise ValueError saying what is wrong with it."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not a quantity")
    return _amount(resource == CPU, value)


@functools.lru_cache(maxsize=4096, typed=True)
def _amount(milli: bool, value: str | int | float) -> float:
    """``amount`` of a string or number (millis: cpu's unit), kept for the quantities read
    last: every pod and PodGroup of a template names the same few, each read by the
    client's parser (Decimal arithmetic) at every validation. A failure is not kept."""
    try:
        parsed: Decimal = parse_quantity(value)
    except (ValueError, InvalidOperation, TypeError) as exc:
        raise ValueError(
            f"{value!r} is not a Kubernetes quantity (e.g. '500m', '2', '4Gi')"
        ) from exc
    if not parsed.is_finite():  # NaN, Infinity: Decimal reads them, Kubernetes does not
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. '500m', '2', '4Gi')")
    if parsed < 0:
        raise ValueError(f"must not be negative, not {value}")
    out = float(parsed * 1000) if milli else float(parsed)
    if out == float("inf"):
        raise ValueError(f"{value!r} is too large a quantity")
    return out


def amounts(values: Mapping[str, object] | None, field: str) -> dict[str, float]:
    """Parse a ResourceList; a bad entry raises ValueError naming ``field.<resource>``."""
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise ValueError(f"{field}: expected a map of resource names to quantities")
    out: dict[str, float] = {}
    for resource, value in values.items():
        try:
            out[str(resource)] = amount(str(resource), value)
        except ValueError as exc:
            raise ValueError(f"{field}.{resource}: {exc}") from exc
    return out
