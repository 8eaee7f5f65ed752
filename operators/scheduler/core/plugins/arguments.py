"""Typed reading of a plugin's ``arguments`` mapping, with errors that name the argument.

kube-batch kept arguments as strings (``predicate.MemoryPressureEnable: "true"``),
so a string spelling a boolean or a number the way Go's strconv would is
accepted as well as a YAML bool or number; anything else is refused.
"""

import math
from collections.abc import Collection, Mapping
from typing import Any

# Go's strconv.ParseBool, which kube-batch used for its arguments.
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


def boolean(arguments: Mapping[str, Any], name: str, default: bool) -> bool:
    value = arguments.get(name, default)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip() in _TRUE:
        return True
    if isinstance(value, str) and value.strip() in _FALSE:
        return False
    raise ValueError(f"{name} must be true or false, not {value!r}")


def number(arguments: Mapping[str, Any], name: str, default: float) -> float:
    """A finite, non-negative number (a weight)."""
    value = arguments.get(name, default)
    parsed: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        parsed = float(value)
    elif isinstance(value, str):
        try:
            parsed = float(value.strip())
        except ValueError:
            parsed = None
    if parsed is None or not math.isfinite(parsed):
        raise ValueError(f"{name} must be a number, not {value!r}")
    if parsed < 0:
        raise ValueError(f"{name} must not be negative, not {value!r}")
    return parsed


def text(arguments: Mapping[str, Any], name: str, default: str) -> str:
    value = arguments.get(name, default)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a string, not {value!r}")
    return value


def refuse_unknown(
    arguments: Mapping[str, Any], known: Collection[str], plugin: str, prefix: str = ""
) -> None:
    """Refuse an argument the plugin does not read (a typo would otherwise be a silent default).

    Names starting with ``prefix`` (when given) are left to the caller.
    """
    for name in arguments:
        if name in known or (prefix and str(name).startswith(prefix)):
            continue
        raise ValueError(
            f"unknown argument {name!r} for plugin {plugin} (known: {', '.join(sorted(known))})"
        )
