"""Simulated time: durations as Kubernetes users write them, timestamps, the period grid.

Durations use Go's spelling (as ``kubectl`` and every controller flag do):
a sequence of numbers with units ``ms``, ``s``, ``m``, ``h`` — ``"30s"``,
``"2m"``, ``"1h30m"``, ``"500ms"``, ``"1.5s"``; ``"0"`` alone needs no unit.
Simulated time is seconds since the simulation started, rendered as seconds
since the Unix epoch where Kubernetes wants a timestamp.
"""

import math
import re
from datetime import UTC, datetime

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
_EXAMPLES = "e.g. 30s, 2m, 1h30m, 500ms"
# Below this, two simulated times are the same instant (guards float noise on the grid).
_TICK_EPSILON = 1e-9


class DurationError(ValueError):
    """A duration that cannot be read; the message names where it came from."""


def parse_duration(text: object, where: str) -> float:
    """Seconds in ``text`` (Go duration syntax), or DurationError naming ``where``.

    ``where`` says what held the value, e.g. ``"--until"`` or
    ``"Pod default/x: annotation kbatch.io/sim-duration"``.
    """
    if not isinstance(text, str):
        raise DurationError(
            f"{where}: {text!r} is not a duration: write it as a string with a unit ({_EXAMPLES})"
        )
    value = text.strip()
    if value == "0":
        return 0.0
    position, total = 0, 0.0
    while position < len(value):
        match = _PART.match(value, position)
        if match is None:
            raise DurationError(f"{where}: {text!r} is not a duration ({_EXAMPLES})")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position == 0:
        raise DurationError(f"{where}: {text!r} is not a duration ({_EXAMPLES})")
    return total


def format_duration(seconds: float) -> str:
    """The shortest readable spelling: ``"1h30m"``, ``"45s"``, ``"1.5s"``, ``"250ms"``."""
    if seconds <= 0:
        return "0s"
    if seconds < 1:
        return f"{round(seconds * 1000)}ms"
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    parts = []
    if hours:
        parts.append(f"{int(hours)}h")
    if minutes:
        parts.append(f"{int(minutes)}m")
    if secs or not parts:
        parts.append(f"{secs:g}s")
    return "".join(parts)


def timestamp(seconds: float) -> str:
    """A Kubernetes timestamp (RFC 3339, whole seconds) for simulated time ``seconds``."""
    return datetime.fromtimestamp(math.floor(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def tick_at_or_after(seconds: float, period: float) -> int:
    """The index of the first tick of the period grid at or after ``seconds``."""
    return max(0, math.ceil(seconds / period - _TICK_EPSILON))


def tick_at_or_before(seconds: float, period: float) -> int:
    """The index of the last tick of the period grid at or before ``seconds``."""
    return max(0, math.floor(seconds / period + _TICK_EPSILON))


class SimClock:
    """The simulated clock: a callable for the scheduler, moved only by the runner."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now
