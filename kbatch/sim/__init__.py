"""The simulator: the real scheduler against an in-memory cluster built from manifests.

    from kbatch.sim import simulate
    result = simulate(["examples/sim-cluster.yaml", "examples/gang-job.yaml"], until="5m")

Modules: ``manifests`` (reading input), ``cluster`` (API server and kubelet),
``validation`` and ``admission`` (what the API server and the webhooks refuse),
``jobs`` and ``podgroups`` (the controllers it plays), ``runner`` (the loop),
``timeline``, ``output`` and ``report`` (what comes out), ``clock``, ``progress``.
"""

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kbatch.sim import clock, manifests, output, runner

__all__ = ["run", "simulate"]


def _duration(value: str | float | None, where: str) -> float | None:
    if value is None or isinstance(value, (int, float)):
        return value
    return clock.parse_duration(value, where)


def _warn_on_stderr(message: str) -> None:
    print(f"kbatch: {message}", file=sys.stderr)


def run(
    paths: Sequence[str | Path] = (),
    *,
    documents: Sequence[object] | None = None,
    config: str | Path | None = None,
    until: str | float | None = None,
    period: str | float = 1.0,
    progress: runner.ProgressFn | None = None,
    warn: Callable[[str], None] = _warn_on_stderr,
) -> runner.Outcome:
    """Load and simulate. An object the API server would refuse is refused when it is due
    (``warn`` names it and its field; the JSON's ``warnings`` list it) and the rest runs;
    input that cannot be read at all is a ValueError subclass with a clear message
    (ManifestError, ConfigError, DurationError)."""
    options = runner.Options(
        period=_duration(period, "--period") or 0.0,
        until=_duration(until, "--until"),
    )
    loaded = runner.load(paths, documents)
    for note in runner.skipped_notes(loaded):
        warn(note)
    conf = runner.resolve_conf(Path(config) if config is not None else None, loaded)
    manifests.check_unique(loaded)
    if not loaded.objects:
        warn("the input holds no objects to simulate (the cluster stays empty)")
    outcome = runner.Simulation(loaded, conf, options, progress, warn).run()
    if not outcome.settled:
        warn(
            f"stopped after {outcome.totals.sessions} sessions without settling "
            f"(at {clock.format_duration(outcome.time)}); give --until to choose the end"
        )
    return outcome


def simulate(
    paths: Sequence[str | Path] = (),
    *,
    documents: Sequence[object] | None = None,
    config: str | Path | None = None,
    until: str | float | None = None,
    period: str | float = 1.0,
    warn: Callable[[str], None] = _warn_on_stderr,
) -> dict[str, Any]:
    """Run a simulation and return DESIGN §5's JSON contract as a dict."""
    outcome = run(paths, documents=documents, config=config, until=until, period=period, warn=warn)
    return output.to_json(outcome)
