"""Simulated time: durations as Kubernetes users write them, timestamps, the period grid.

Durations use Go's spelling (as ``kubectl`` and every controller flag do):
a sequence of numbers with units ``ms``, ``s``, ``m``, ``h`` — ``"30s"``,
``"2m"``, ``"1h30m"``, ``"500ms"``, ``"1.5s"``; ``"0"`` alone needs no unit.
Simulated time is seconds since the simulation started, rendered as seconds
since the Unix epoch where Kubernetes wants a timestamp.
"""

import functools
import math
from datetime import UTC, datetime

from kbatch.api.duration import DurationError as DurationError  # clock.DurationError
from kbatch.api.duration import known_duration as known_duration  # clock.known_duration
from kbatch.api.duration import parse_duration as parse_duration  # clock.parse_duration

# Below this, two simulated times are the same instant (guards float noise on the grid).
_TICK_EPSILON = 1e-9


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


def timestamp(seconds: float, kept: bool = True) -> str:
    """A Kubernetes timestamp (RFC 3339, whole seconds) for simulated time ``seconds``;
    the recent seconds' kept (not ``kept``, ``Shortcuts.timestamps`` off: formatted
    anew)."""
    second = math.floor(seconds)
    return _kept_timestamp(second) if kept else _timestamp(second)


def _timestamp(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# A tick writes many timestamps of the same second (each bind, pod made, status written),
# and formatting one took ~0.6% of a trace's tick: the recent seconds' are kept.
_kept_timestamp = functools.lru_cache(maxsize=64)(_timestamp)


def tick_at_or_after(seconds: float, period: float) -> int:
    """The index of the first tick of the period grid at or after ``seconds``."""
    return max(0, math.ceil(seconds / period - _TICK_EPSILON))


def tick_at_or_before(seconds: float, period: float) -> int:
    """The index of the last tick of the period grid at or before ``seconds``."""
    return max(0, math.floor(seconds / period + _TICK_EPSILON))


class SimClock:
    """The simulated clock: a callable for the scheduler, moved only by the runner.
    ``keep_timestamps``: as ``timestamp`` takes it, for those who stamp its time."""

    def __init__(self, keep_timestamps: bool = True) -> None:
        self.now = 0.0
        self.keep_timestamps = keep_timestamps

    def __call__(self) -> float:
        return self.now
