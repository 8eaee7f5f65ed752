"""Pydantic's validation errors in kbatch's words, for every model kbatch reads (the
cluster objects, the scheduler conf): never a library's own text.

    explain(error)   # "expected an integer, not 'x'"; error: an item of ValidationError.errors()
    shown(value)     # a value as messages quote it
"""

from collections.abc import Mapping
from typing import Any


def shown(value: object) -> str:
    """``value`` as messages quote it: its repr, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a map",
    "model_type": "a map",
    "model_attributes_type": "a map",
    "list_type": "a list",
    "tuple_type": "a list",
}
_BOUNDS = {
    "greater_than_equal": (">=", "ge"),
    "greater_than": (">", "gt"),
    "less_than_equal": ("<=", "le"),
    "less_than": ("<", "lt"),
}


def explain(error: Mapping[str, Any]) -> str:
    """Why one pydantic error (an item of ``ValidationError.errors()``) refuses its field,
    as kbatch says it: never pydantic's own text."""
    kind, value, context = error["type"], error.get("input"), error.get("ctx") or {}
    quoted = shown(value)
    if error["loc"][-1:] == ("[key]",):
        return f"its keys must be strings, not {quoted}"
    if kind in _EXPECTED:
        return f"expected {_EXPECTED[kind]}, not {quoted}"
    if kind in _BOUNDS:
        sign, key = _BOUNDS[kind]
        return f"must be {sign} {context.get(key)}, not {quoted}"
    if kind in ("enum", "literal_error"):
        return f"must be {context.get('expected')}, not {quoted}"
    if kind == "value_error" and "error" in context:
        return str(context["error"])
    if kind == "missing":
        return "required"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind == "string_too_short":
        return "must not be empty"
    if kind == "too_short":
        least = context.get("min_length")
        return f"must have at least {least} item{'s' if least != 1 else ''}"
    if kind == "string_too_long":
        return f"must be at most {context.get('max_length')} characters"
    return f"not a valid value: {quoted}"
