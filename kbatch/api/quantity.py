"""Kubernetes quantities as they appear in the API: strings checked by the same
pattern the API server applies to ``resource.Quantity`` in a CRD schema.

Parsing into numbers is the cluster layer's job (``kbatch.cluster.quantity``),
with the kubernetes client's own parser. The scheduler core may not import that
client, so a plugin argument given as a quantity (the lifetime plugin's
``excessBudget``) is read with ``scheduler_amount`` here: the same grammar and the
same value (a property test holds the two parsers to each other).
"""

import re
from decimal import Decimal
from typing import Annotated

from pydantic import BeforeValidator, Field

# The pattern Kubernetes' OpenAPI generator gives resource.Quantity.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY = re.compile(QUANTITY_PATTERN)


def _as_quantity_string(value: object) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"a quantity must be a string or a number, not {type(value).__name__}")
    text = str(value).strip()
    if not _QUANTITY.match(text):
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. '500m', '2', '4Gi')")
    if text.startswith("-"):
        raise ValueError(f"must not be negative, not {text}")
    return text


Quantity = Annotated[
    str,
    BeforeValidator(_as_quantity_string),
    Field(json_schema_extra={"x-kubernetes-int-or-string": True}),
]
ResourceList = dict[str, Quantity]


_DECIMAL_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
_NUMBER_AND_SUFFIX = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")


def parse_quantity(value: object) -> Decimal:
    """A non-negative Kubernetes quantity's exact value (``"1.5Gi"`` → 1610612736)."""
    text = _as_quantity_string(value)
    found = _NUMBER_AND_SUFFIX.match(text)
    assert found is not None  # the pattern above has matched already
    number, suffix = Decimal(found.group(1)), found.group(2)
    if suffix.endswith("i"):  # before the exponent: "Ei" is exbi, not 10^i
        return number * dict(_BINARY)[suffix]
    if len(suffix) > 1 and suffix[0] in "eE":  # "E" alone is exa
        return number * Decimal(10) ** Decimal(suffix[1:])
    return number * _DECIMAL_SUFFIXES[suffix]


def scheduler_amount(resource: str, value: object) -> float:
    """A quantity in the scheduler's units: cpu in millicores, others in base units."""
    parsed = parse_quantity(value)
    return float(parsed * 1000) if resource == "cpu" else float(parsed)


_BINARY = (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")


def format_quantity(resource: str, amount: float) -> str:
    """Render a scheduler amount (cpu in millicores, others in base units) as Kubernetes does.

    cpu: ``"3"`` or ``"500m"``; byte-sized resources: the largest binary suffix
    that divides exactly (``"9Gi"``), else whole bytes; others: whole numbers or
    milli-units.
    """
    if resource == "cpu":
        millis = round(amount)
        return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        whole = round(amount)
        for suffix, size in _BINARY:
            if whole and whole % size == 0:
                return f"{whole // size}{suffix}"
        return str(whole)
    millis = round(amount * 1000)
    return str(millis // 1000) if millis % 1000 == 0 else f"{millis}m"
