"""``kbatch replay DIR --config CONF``: the recorded traffic played forward under
another conf, compared with the recorded conf's run of the very same traffic.

The recording becomes the simulator's input (``kbatch.record.workload``), which is
simulated twice, for the window's length: once with the recorded conf (the
baseline: the two runs then differ by their conf alone, not by what the simulator
leaves out of a real cluster) and once with CONF. The two are compared as
``kbatch simulate --compare-config`` compares (``kbatch.sim.compare``).

How far to trust the baseline is measured, not assumed (``fidelity``): its binds,
jobs started and per-queue waits against the recorded ones, and how many jobs
started when they really did. A live cluster's kubelets, controllers and users are
played by the simulator and the recorded submissions and runtimes; the nearer the
baseline comes to the recording, the more the comparison says of the real cluster.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kbatch import __version__
from kbatch.config import ConfigError, SchedulerConf
from kbatch.operators.scheduler.core.runner import default_conf, load_conf, load_conf_file
from kbatch.record import workload as recorded_workload
from kbatch.sim import (
    WorkloadSimulation,
    clock,
    compare,
    manifests,
    metrics,
    output,
    report,
    runner,
)

Json = dict[str, Any]
BASELINE = "recorded conf"
PERIOD = 1.0  # the simulator's scheduling period (seconds), as ``kbatch run``'s default


@dataclass(slots=True)
class Run:
    figures: compare.RunFigures
    outcome: runner.Outcome
    result: Json  # the simulation's JSON (``kbatch.sim.output``), for the report


@dataclass(slots=True)
class Played:
    workload: recorded_workload.Workload
    config: Path
    baseline: Run
    other: Run
    warnings: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0

    def comparison(self) -> compare.Comparison:
        return compare.compare(self.baseline.figures, self.other.figures)

    def fidelity(self) -> Json:
        return fidelity(self.workload, self.baseline)

    def as_json(self) -> Json:
        work = self.workload
        return {
            "recording": work.directory,
            "version": {"recorded": work.recorded_version, "replaying": __version__},
            "from": work.start,
            "seconds": round(work.seconds, 3),
            "runs": [BASELINE, self.other.figures.name],
            "config": str(self.config),
            "workload": {**work.counts, "notes": work.notes},
            "fidelity": self.fidelity(),
            "comparison": self.comparison().to_json(),
            "stopped": None if work.stopped is None else _stop(work.stopped),
            "warnings": self.warnings,
            "wall_seconds": round(self.wall_seconds, 3),
        }


def _stop(stop: Any) -> Json:
    return {"file": stop.file, "offset": stop.offset, "object": stop.object, "why": stop.why}


def fidelity(work: recorded_workload.Workload, baseline: Run) -> Json:
    """The baseline simulation against the recording: binds, jobs started, each queue's
    wait p50 and p99 (recorded, simulated), and the jobs that started at the recorded
    time (within one period), earlier or later (with the median shift of those that
    moved)."""
    against = compare.compare(work.recorded, baseline.figures).to_json()
    jobs = against["jobs"]
    # The simulator's sessions run on a grid of PERIOD: a start within one period of
    # the recorded one is as recorded (a live cluster's sessions keep no grid).
    close = [r for r in jobs["earlier"] + jobs["later"] if abs(r["difference"]) <= PERIOD]
    earlier = [r for r in jobs["earlier"] if r not in close]
    later = [r for r in jobs["later"] if r not in close]
    moved = [abs(row["difference"]) for row in earlier + later]
    started = [
        sum(1 for j in run.jobs.values() if j.started is not None)
        for run in (work.recorded, baseline.figures)
    ]
    return {
        "binds": {"recorded": work.binds, "simulated": baseline.outcome.totals.binds},
        "jobsStarted": {"recorded": started[0], "simulated": started[1]},
        "startedAsRecorded": jobs["same"] + len(close),
        "startedEarlier": len(earlier),
        "startedLater": len(later),
        "toleranceSeconds": PERIOD,
        "startedOnlyRecorded": len(jobs["onlyBase"]),
        "startedOnlySimulated": len(jobs["onlyOther"]),
        "medianShiftSeconds": _rounded(metrics.percentile(sorted(moved), 50)),
        "queues": {
            queue: {key: [_rounded(v) for v in row[key]] for key in ("waitP50", "waitP99")}
            for queue, row in against["queues"].items()
        },
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def recorded_conf(work: recorded_workload.Workload) -> SchedulerConf:
    """The recorded conf, loaded as ``kbatch replay`` loads it (ConfigError naming the
    field); the default when the recording holds none."""
    if work.conf is None:
        return default_conf()
    where = f"{work.directory}: the recorded scheduler conf"
    try:
        return load_conf(yaml.safe_dump(work.conf), where)
    except ConfigError as exc:
        raise ConfigError(f"refused: {exc}") from exc


def _simulate(
    work: recorded_workload.Workload,
    conf: SchedulerConf,
    name: str,
    warn: Callable[[str], None],
) -> Run:
    loaded = manifests.load_documents(work.documents, f"{work.directory} (as submitted)")
    manifests.check_unique(loaded)
    options = runner.Options(
        period=PERIOD, until=work.seconds, scheduler_names=work.scheduler_names
    )
    simulation = _measured(loaded, conf, options, warn)
    outcome = simulation.run()
    return Run(compare.figures(outcome, name), outcome, output.to_json(outcome))


def _measured(
    loaded: manifests.Manifests,
    conf: SchedulerConf,
    options: runner.Options,
    warn: Callable[[str], None],
) -> runner.Simulation:
    recorder = metrics.Recorder(shortcuts=options.shortcuts)
    return WorkloadSimulation(loaded, conf, options, None, warn, None, recorder)


def play(
    directory: Path,
    config: Path,
    start: float | None = None,
    end: float | None = None,
    warn: Callable[[str], None] = lambda _: None,
) -> Played:
    """Play the recording in ``directory`` (from ``start`` to ``end`` seconds after its
    first record) forward under its recorded conf and under ``config``. ConfigError:
    ``config`` (or the recorded conf) cannot be loaded, naming the field, before any
    simulation; RecordingError: no recording, or nothing in it to replay."""
    began = time.perf_counter()
    try:
        other_conf = load_conf_file(config)
    except OSError as exc:
        raise ConfigError(f"{config}: cannot read: {exc.strerror or exc}") from exc
    warnings: list[str] = []

    def noted(message: str) -> None:
        if message not in warnings:
            warnings.append(message)
            warn(message)

    work = recorded_workload.derive(directory, start, end, noted)
    if work.recorded_version != __version__:
        noted(
            f"the recording was made by kbatch {work.recorded_version}; this is kbatch "
            f"{__version__}: what it derives of the recording may differ where the two differ"
        )
    base_conf = recorded_conf(work)
    baseline = _simulate(work, base_conf, BASELINE, noted)
    other = _simulate(work, other_conf, config.name, noted)
    played = Played(work, config, baseline, other, warnings)
    played.wall_seconds = time.perf_counter() - began
    return played


def write_report(played: Played, path: Path) -> None:
    """Both runs side by side in one self-contained HTML file."""
    sides = [
        report.Side(run.figures.name, run.outcome.timeline, run.result)
        for run in (played.baseline, played.other)
    ]
    title = f"kbatch replay: {Path(played.workload.directory).name} under {played.config.name}"
    report.write_comparison(path, sides, played.comparison().to_json(), title=title)


def to_text(shown: Json, table: str) -> str:
    """The fidelity of the baseline, then the comparison's table."""
    fid = shown["fidelity"]
    work = shown["workload"]
    lines = [
        f"recording {shown['recording']}: {work['pods']} pods in {work['groups']} groups over "
        f"{shown['seconds']:g} s, played forward under the recorded conf and {shown['config']}",
        f"pods of unknown runtime (running at the end, or evicted), run until the end or "
        f"an eviction: {work.get('runtimeUnknown', 0)}; left out (withdrawn before "
        f"starting): {work.get('podsLeftOut', 0)}",
        "",
        "BASELINE AGAINST THE RECORDING (how far to trust the comparison)",
        f"binds: recorded {fid['binds']['recorded']}, simulated {fid['binds']['simulated']}; "
        f"jobs started: recorded {fid['jobsStarted']['recorded']}, "
        f"simulated {fid['jobsStarted']['simulated']}",
        f"jobs started as recorded (within {fid['toleranceSeconds']:g} s): "
        f"{fid['startedAsRecorded']}, earlier: "
        f"{fid['startedEarlier']}, later: {fid['startedLater']}, only recorded: "
        f"{fid['startedOnlyRecorded']}, only simulated: {fid['startedOnlySimulated']}",
    ]
    for queue, row in fid["queues"].items():
        lines.append(
            f"  {queue}: wait p50 {_pair(row['waitP50'])}, p99 {_pair(row['waitP99'])} "
            "(recorded → simulated)"
        )
    return "\n".join(lines) + "\n\n" + table


def _pair(values: list[float | None]) -> str:
    return " → ".join("-" if v is None else clock.format_duration(v) for v in values)
