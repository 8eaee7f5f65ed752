"""Durations as Kubernetes users write them (Go's spelling, as ``kubectl`` and every
controller flag): numbers with units ``ms``, ``s``, ``m``, ``h`` — ``"30s"``, ``"2m"``,
``"1h30m"``, ``"500ms"``, ``"1.5s"``; ``"0"`` alone needs no unit. Used by the
simulator's annotations and flags and by the scheduler (``kbatch.io/lifetime``).
"""

import re

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_EXAMPLES = "e.g. 30s, 2m, 1h30m, 500ms"


class DurationError(ValueError):
    """A duration that cannot be read; the message names where it came from."""


# Texts read before and their seconds: a duration is read again and again (every pod of
# a Job carries its runtime). Bounded, the oldest dropped first; only good ones are kept.
_READ: dict[str, float] = {}
_READ_SIZE = 4096


def known_duration(text: object) -> float | None:
    """The seconds of ``text`` if it was read before (None: ``parse_duration`` it)."""
    return _READ.get(text) if isinstance(text, str) else None


def parse_duration(text: object, where: str) -> float:
    """Seconds in ``text`` (Go duration syntax), or DurationError naming ``where``.

    ``where`` says what held the value, e.g. ``"--until"`` or
    ``"Pod default/x: annotation kbatch.io/sim-duration"``; "" where the caller names
    it itself (a pydantic validator, whose error carries the field's path).
    """
    known = known_duration(text)
    if known is not None:
        return known
    prefix = f"{where}: " if where else ""
    if not isinstance(text, str):
        raise DurationError(
            f"{prefix}{text!r} is not a duration: write it as a string with a unit ({_EXAMPLES})"
        )
    value = text.strip()
    if value == "0":
        return 0.0
    position, total = 0, 0.0
    while position < len(value):
        match = _PART.match(value, position)
        if match is None:
            raise DurationError(f"{prefix}{text!r} is not a duration ({_EXAMPLES})")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position == 0:
        raise DurationError(f"{prefix}{text!r} is not a duration ({_EXAMPLES})")
    if len(_READ) >= _READ_SIZE:  # (the oldest goes: most texts are read in a burst)
        # pop, not del: informers parse on several threads, which may drop it first
        _READ.pop(next(iter(_READ), ""), None)
    _READ[text] = total
    return total
