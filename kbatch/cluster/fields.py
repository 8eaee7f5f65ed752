"""Typed access to the fields of a raw Kubernetes object, for the parse boundary.

Each accessor reads a dotted ``path`` below ``obj`` and returns the value with
the type it asks for, or raises FieldError naming the field (``at`` is the
name of ``obj`` itself, so that ``mapping(spec, "affinity", at="spec")`` names
``spec.affinity``). An absent or null field is the type's empty value (or
``None`` for scalars): the API server treats ``null`` as unset, too.

    mapping(job, "spec.template.metadata")      # {} when absent
    mappings(pod, "spec.containers")            # a list of maps, items checked
    string_map(pod, "metadata.labels")          # values must be strings
"""

import copy
import functools
from collections.abc import Mapping
from typing import Any

from kbatch.api.errors import shown as shown  # fields.shown, as before


class FieldError(ValueError):
    """A field of the wrong shape; ``str()`` reads 'field: why'."""

    def __init__(self, field: str, why: str) -> None:
        self.field = field
        self.why = why
        super().__init__(f"{field}: {why}")


# Values a raw object holds that are never changed in place: shared, not copied.
_IMMUTABLE = (str, int, float, bool, type(None))


def copied(value: Any) -> Any:
    """A deep copy of a raw object (``copy.deepcopy``'s result, but for sharing: a
    sub-object that appears twice is copied twice). Raw objects are trees of dicts,
    lists and scalars, walked here directly; deepcopy's general machinery (a memo, a
    dispatch per value) was most of what creating a simulated object cost. Anything
    else is left to deepcopy."""
    kind = type(value)
    if kind is dict:
        return {key: copied(item) for key, item in value.items()}
    if kind is list:
        return [copied(item) for item in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


def _join(at: str, path: str) -> str:
    return f"{at}.{path}" if at and path else at or path


def _expected(field: str, what: str, value: object) -> FieldError:
    return FieldError(field, f"expected {what}, not {shown(value)}")


@functools.cache
def _steps(path: str) -> tuple[str, ...]:
    return tuple(path.split(".")) if path else ()


def _is_map(found: object) -> bool:
    """isinstance(found, Mapping), the plain dict of decoded JSON first (an ABC check
    costs ten times as much, and a pod list makes millions of them)."""
    return type(found) is dict or isinstance(found, Mapping)


def value(obj: Mapping[str, Any], path: str, *, at: str = "") -> Any:
    """The raw value at ``path`` (None when absent); every step on the way must be a map."""
    current: Any = obj
    # (``_is_map`` inline, the plain dict asked first, no count of the steps: a parse
    # reads a dozen fields a pod)
    for step in _steps(path):
        if type(current) is dict:
            current = current.get(step)
        elif current is None:
            return None
        elif isinstance(current, Mapping):
            current = current.get(step)
        else:
            raise _not_a_map_on_the_way(obj, path, at)
    return current


def _not_a_map_on_the_way(obj: Mapping[str, Any], path: str, at: str) -> FieldError:
    """What ``value`` raises: the first step on the way to ``path`` that is not a map."""
    current: Any = obj
    steps = _steps(path)
    for walked, step in enumerate(steps):
        if not _is_map(current):
            return _expected(_join(at, ".".join(steps[:walked])), "a map", current)
        current = current.get(step)
    raise AssertionError(f"every step on the way to {path} is a map")


def mapping(obj: Mapping[str, Any], path: str, *, at: str = "") -> Mapping[str, Any]:
    found = value(obj, path, at=at)
    if found is None:
        return {}
    if not _is_map(found):
        raise _expected(_join(at, path), "a map", found)
    return found


def sequence(obj: Mapping[str, Any], path: str, *, at: str = "") -> list[Any]:
    found = value(obj, path, at=at)
    if found is None:
        return []
    if not isinstance(found, list):
        raise _expected(_join(at, path), "a list", found)
    return found


def mappings(obj: Mapping[str, Any], path: str, *, at: str = "") -> list[Mapping[str, Any]]:
    """A list whose every item is a map (containers, taints, conditions, ...)."""
    items = sequence(obj, path, at=at)
    for index, item in enumerate(items):
        if not _is_map(item):
            raise _expected(f"{_join(at, path)}[{index}]", "a map", item)
    return items


def string(obj: Mapping[str, Any], path: str, *, at: str = "") -> str | None:
    found = value(obj, path, at=at)
    if found is not None and not isinstance(found, str):
        raise _expected(_join(at, path), "a string", found)
    return found


def integer(obj: Mapping[str, Any], path: str, *, at: str = "") -> int | None:
    found = value(obj, path, at=at)
    if found is not None and (isinstance(found, bool) or not isinstance(found, int)):
        raise _expected(_join(at, path), "an integer", found)
    return found


def string_map(obj: Mapping[str, Any], path: str, *, at: str = "") -> dict[str, str]:
    """A map of strings to strings (labels, annotations, a nodeSelector)."""
    found = mapping(obj, path, at=at)
    for key, item in found.items():
        if not isinstance(item, str):
            raise _expected(f"{_join(at, path)}.{key}", "a string (quote it)", item)
    return {str(key): item for key, item in found.items()}


def names(obj: Mapping[str, Any], path: str, *, at: str = "") -> tuple[str, ...]:
    """The ``name`` of each map of a list of named maps (a pod's ``schedulingGates``,
    ``resourceClaims``), each required; empty when the list is absent."""
    if not obj.get(path):  # (mostly absent: a pod parse is on every watch event)
        return ()
    where = _join(at, path)
    found = []
    for i, item in enumerate(mappings(obj, path, at=at)):
        name = string(item, "name", at=f"{where}[{i}]")
        if not name:
            raise FieldError(f"{where}[{i}].name", "required")
        found.append(name)
    return tuple(found)
