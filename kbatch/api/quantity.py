"""Kubernetes quantities as they appear in the API: strings checked by the same
pattern the API server applies to ``resource.Quantity`` in a CRD schema.

Parsing into numbers is the cluster layer's job (``kbatch.cluster.quantity``),
with the kubernetes client's own parser.
"""

import re
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
