"""A progress bar on stderr for long simulations.

Drawn at most ten times a real second; when not forced (``--progress``), it
stays silent for the first second, so that a short run prints nothing.
"""

import time
from collections.abc import Callable
from typing import TextIO

from kbatch.sim.clock import format_duration

_WIDTH = 30
_REDRAW_SECONDS = 0.1
_QUIET_SECONDS = 1.0


class ProgressBar:
    def __init__(
        self,
        stream: TextIO,
        until: float | None,
        forced: bool = False,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream = stream
        self.until = until
        self.monotonic = monotonic
        self.started = monotonic()
        self.quiet_until = self.started if forced else self.started + _QUIET_SECONDS
        self.last_drawn: float | None = None
        self.line = ""

    def __call__(self, now: float, sessions: int) -> None:
        real = self.monotonic()
        if real < self.quiet_until:
            return
        if self.last_drawn is not None and real - self.last_drawn < _REDRAW_SECONDS:
            self.line = self._render(now, sessions)
            return
        self.last_drawn = real
        self.line = self._render(now, sessions)
        self.stream.write("\r" + self.line)
        self.stream.flush()

    def close(self) -> None:
        """Draw the last state and end the line (nothing if nothing was drawn)."""
        if self.last_drawn is None:
            return
        self.stream.write("\r" + self.line + "\n")
        self.stream.flush()

    def _render(self, now: float, sessions: int) -> str:
        status = f"t={format_duration(now)} sessions={sessions}"
        if not self.until:
            return f"simulating… {status}"
        fraction = min(1.0, max(0.0, now / self.until))
        filled = round(fraction * _WIDTH)
        bar = "#" * filled + "-" * (_WIDTH - filled)
        return f"[{bar}] {fraction:4.0%} {status}"
