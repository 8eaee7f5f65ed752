"""What an admission function answers: allowed or not (and why), a merge patch, warnings."""

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ParamSpec

from kbatch.cluster.errors import ObjectError
from kbatch.cluster.fields import FieldError, copied

P = ParamSpec("P")

Object = dict[str, Any]

INVALID = 422  # the object is wrong: a field breaks a rule
FORBIDDEN = 403  # the object is fine, the cluster says no (quota, a queue in use)


@dataclass(frozen=True, slots=True)
class Admission:
    """``patch`` is an RFC 7386 merge patch (``None`` deletes a key); empty when nothing
    changes. A rejection's ``message`` names the field and says why."""

    allowed: bool = True
    message: str = ""
    code: int = 0
    patch: Object = field(default_factory=dict)
    warnings: tuple[str, ...] = ()

    def applied_to(self, obj: Mapping[str, Any]) -> Object:
        """``obj`` as the patch leaves it (a new dict; ``obj`` is not changed)."""
        return merge(obj, self.patch)

    def then(self, after: "Admission") -> "Admission":
        """This answer followed by ``after`` (computed on the patched object)."""
        if not self.allowed:
            return self
        warnings = self.warnings + after.warnings
        if not after.allowed:
            return Admission(False, after.message, after.code, warnings=warnings)
        return Admission(patch=_merge_patches(self.patch, after.patch), warnings=warnings)


def allow(patch: Object | None = None, warnings: tuple[str, ...] = ()) -> Admission:
    return Admission(patch=patch or {}, warnings=warnings)


def deny(field_path: str, why: str, code: int = INVALID) -> Admission:
    return Admission(False, f"{field_path}: {why}", code)


def refusing(admission: Callable[P, Admission]) -> Callable[P, Admission]:
    """An admission function that reads its object with ``kbatch.cluster.fields`` (or the
    record parsers): a field of the wrong shape is a refusal naming it, not an exception
    the API server would show as a failed webhook."""

    @functools.wraps(admission)
    def refused_when_malformed(*args: P.args, **kwargs: P.kwargs) -> Admission:
        try:
            return admission(*args, **kwargs)
        except (FieldError, ObjectError) as exc:
            return deny(exc.field or "(the object)", exc.why)

    return refused_when_malformed


def merge(obj: Mapping[str, Any], patch: Mapping[str, Any]) -> Object:
    """RFC 7386: maps merge key by key, ``None`` removes, anything else replaces. A new
    object, sharing nothing with either (``fields.copied``): each part of ``obj`` the
    patch keeps is copied once, in its place; keys new to it follow, in the patch's
    order."""
    out: Object = {}
    for key, value in obj.items():
        if key not in patch:
            out[key] = copied(value)
        elif (change := patch[key]) is not None:
            out[key] = _merged(value, change)
    for key, change in patch.items():
        if key not in obj and change is not None:
            out[key] = _merged(None, change)
    return out


def _merged(value: Any, change: Any) -> Any:
    """``value`` with ``change`` merged in (``merge``'s step for one key)."""
    if isinstance(change, Mapping):
        return merge(value if isinstance(value, Mapping) else {}, change)
    return copied(change)


def _merge_patches(first: Mapping[str, Any], second: Mapping[str, Any]) -> Object:
    out: Object = dict(first)
    for key, value in second.items():
        base = out.get(key)
        if isinstance(value, Mapping) and isinstance(base, Mapping):
            out[key] = _merge_patches(base, value)
        else:
            out[key] = copied(value)
    return out
