"""Kubernetes quantities to scheduler amounts, with the kubernetes client's own parser.

Units: cpu in millicores, every other resource in its base unit (bytes, devices, pods).
"""

from collections.abc import Mapping
from decimal import Decimal, InvalidOperation

from kubernetes.utils.quantity import parse_quantity

CPU = "cpu"


def amount(resource: str, value: object) -> float:
    """Parse one quantity; raise ValueError saying what is wrong with it."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"{value!r} is not a quantity")
    try:
        parsed: Decimal = parse_quantity(value)  # type: ignore[no-untyped-call]
    except (ValueError, InvalidOperation, TypeError) as exc:
        raise ValueError(
            f"{value!r} is not a Kubernetes quantity (e.g. '500m', '2', '4Gi')"
        ) from exc
    if not parsed.is_finite():  # NaN, Infinity: Decimal reads them, Kubernetes does not
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. '500m', '2', '4Gi')")
    if parsed < 0:
        raise ValueError(f"must not be negative, not {value}")
    out = float(parsed * 1000) if resource == CPU else float(parsed)
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
