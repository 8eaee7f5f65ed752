"""The simulator: the real scheduler against an in-memory cluster built from manifests.

    from kbatch.sim import simulate
    result = simulate(["examples/sim-cluster.yaml", "examples/gang-job.yaml"], until="5m")
    result = simulate(workload="workload.yaml", cluster="cluster.yaml", until="1h")  # Armada's

Modules: ``manifests`` (reading input), ``cluster`` (API server and kubelet),
``validation`` and ``admission`` (what the API server and the webhooks refuse),
``jobs`` and ``podgroups`` (the controllers it plays), ``runner`` (the loop),
``timeline``, ``output`` and ``report`` (what comes out), ``clock``, ``progress``;
``workload`` (Armada's WorkloadSpec and ClusterSpec as manifests) and ``metrics``
(Armada's scheduler metrics of such a run, the JSON's ``metrics``).
"""

import bisect
import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kbatch.config import SchedulerConf
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.sim import clock, manifests, metrics, output, runner
from kbatch.sim import workload as armada

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
    workload: str | Path | None = None,
    cluster: str | Path | None = None,
    config: str | Path | None = None,
    until: str | float | None = None,
    period: str | float = 1.0,
    progress: runner.ProgressFn | None = None,
    warn: Callable[[str], None] = _warn_on_stderr,
    shortcuts: Shortcuts = ALL,
    measure: bool = False,
) -> runner.Outcome:
    """Load and simulate. An object the API server would refuse is refused when it is due
    (``warn`` names it and its field; the JSON's ``warnings`` list it) and the rest runs;
    input that cannot be read at all is a ValueError subclass with a clear message
    (ManifestError, ConfigError, DurationError). ``workload`` and ``cluster`` are Armada's
    WorkloadSpec and ClusterSpec files (``kbatch.sim.workload``), added to the manifests;
    with ``workload`` (or ``measure``), the outcome is a ``metrics.MeasuredOutcome``.
    ``shortcuts``: which
    the state, the scheduler and the simulator take (``Shortcuts.none()``: the
    straightforward way, which gives the same outcome)."""
    options = runner.Options(
        period=_duration(period, "--period") or 0.0,
        until=_duration(until, "--until"),
        shortcuts=shortcuts,
    )
    loaded = runner.load(paths, documents)
    plan = None
    if workload is not None or cluster is not None:
        plan = armada.load(_path(workload), _path(cluster))
        for note in plan.warnings:
            warn(note)
        loaded.extend(plan.loaded)
    for note in runner.skipped_notes(loaded):
        warn(note)
    conf = runner.resolve_conf(Path(config) if config is not None else None, loaded)
    manifests.check_unique(loaded)
    if not loaded.objects:
        warn("the input holds no objects to simulate (the cluster stays empty)")
    if plan is None and not measure:
        simulation = runner.Simulation(loaded, conf, options, progress, warn)
    else:
        dependencies = (
            None if plan is None else armada.Dependencies(plan, str(workload), len(loaded.objects))
        )
        measured = workload is not None or measure
        recorder = metrics.Recorder(shortcuts=options.shortcuts) if measured else None
        simulation = WorkloadSimulation(
            loaded, conf, options, progress, warn, dependencies, recorder
        )
    outcome = simulation.run()
    if not outcome.settled:
        warn(
            f"stopped after {outcome.totals.sessions} sessions without settling "
            f"(at {clock.format_duration(outcome.time)}); give --until to choose the end"
        )
    return outcome


def _path(value: str | Path | None) -> Path | None:
    return None if value is None else Path(value)


class WorkloadSimulation(runner.Simulation):
    """A simulation of an Armada workload: templates with dependencies are submitted as
    the templates they name complete, and the metrics' points are taken every tick."""

    def __init__(
        self,
        loaded: manifests.Manifests,
        conf: SchedulerConf,
        options: runner.Options,
        progress: runner.ProgressFn | None,
        warn: Callable[[str], None] | None,
        dependencies: armada.Dependencies | None,
        recorder: metrics.Recorder | None,
    ) -> None:
        super().__init__(loaded, conf, options, progress, warn)
        self.dependencies = dependencies
        self.recorder = recorder

    def tick(self, now: float) -> bool:
        changed = super().tick(now)
        released = [] if self.dependencies is None else self.dependencies.release(self.jobs, now)
        for item in released:
            bisect.insort(self.pending, item, key=lambda m: m.due)
        if self.recorder is not None and self.cluster.last_snapshot is not None:
            self.recorder.record(now, self.cluster.last_snapshot)
        return changed or bool(released)

    def run(self) -> runner.Outcome:
        outcome = super().run()
        if self.recorder is None:
            return outcome
        values = {f.name: getattr(outcome, f.name) for f in dataclasses.fields(outcome)}
        return metrics.MeasuredOutcome(**values, recorder=self.recorder)


def simulate(
    paths: Sequence[str | Path] = (),
    *,
    documents: Sequence[object] | None = None,
    workload: str | Path | None = None,
    cluster: str | Path | None = None,
    config: str | Path | None = None,
    until: str | float | None = None,
    period: str | float = 1.0,
    warn: Callable[[str], None] = _warn_on_stderr,
    shortcuts: Shortcuts = ALL,
) -> dict[str, Any]:
    """Run a simulation and return DESIGN §5's JSON contract as a dict (with ``metrics``
    when ``workload`` is given); ``shortcuts``: as ``run`` takes them."""
    outcome = run(
        paths,
        documents=documents,
        workload=workload,
        cluster=cluster,
        config=config,
        until=until,
        period=period,
        warn=warn,
        shortcuts=shortcuts,
    )
    return output.to_json(outcome)
