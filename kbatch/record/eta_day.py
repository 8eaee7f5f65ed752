"""``kbatch bench --trace --eta-accuracy``: the ETA backtested on the simulated day as it
runs, with no recording.

The simulated day (``kbatch.sim.trace``) runs as ``kbatch bench --trace`` runs it, and
every ``every`` seconds of simulated time the forecast is asked about its waiting jobs,
as in ``kbatch replay --eta-accuracy`` (``eta_accuracy.Backtest`` is shared, and so is
the scoring). One thing the simulation has that a recording has not: the batch/v1 Jobs
that kbatch holds until their PodGroup is admitted. A recording (like the scheduler's
informers) holds no Jobs, so a group waiting to be admitted has no pods there and its
start cannot be foreseen; here its held Jobs go to the forecast, as ``kbatch explain
--eta`` lists them from a cluster.
"""

from typing import Any

from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.record.eta_accuracy import Backtest, Settings
from kbatch.sim import clock, manifests, runner, trace
from kbatch.visibility import eta_input


class _Watch:
    """Tells the backtest each change of the simulated cluster's state, at its time."""

    def __init__(self, day: "_Day") -> None:
        self.day = day

    def applied(self, kind: str, key: str, obj: dict[str, Any]) -> None:
        self.day.backtest.applied(obj, self.day.clock.now)

    def refused(self, obj: dict[str, Any]) -> None:
        pass

    def dropped_object(self, kind: str, key: str) -> None:
        namespace, _, name = key.rpartition("/")
        obj = self.day.cluster.state.get(kind, namespace, name)
        self.day.backtest.dropping(obj, self.day.clock.now, 0.0)

    def assumed(self, op: str, key: str, value: str | float | None = None) -> None:
        pass

    def snapshotted(self) -> None:
        pass


class _Day(runner.Simulation):
    """The simulated day, asking the forecast when the backtest says it is due."""

    def __init__(self, spec: trace.TraceSpec, backtest: Backtest) -> None:
        loaded = manifests.load_documents(trace.trace_objects(spec), "<trace>")
        super().__init__(loaded, default_conf(), runner.Options(until=spec.seconds))
        self.backtest = backtest
        self.conf = default_conf()
        self.cluster.state.observer = _Watch(self)

    def tick(self, now: float) -> bool:
        for instant in self.backtest.due(now):
            self._ask(instant)
        return super().tick(now)

    def _ask(self, instant: float) -> None:
        """Forecast as the cluster stands at ``instant``: as the last tick left it (the
        ticks skipped since were those in which nothing was due)."""
        state = self.cluster.state
        objects = eta_input.listed(state, instant)
        self.backtest.ask(objects, self.conf, state.scheduler_names, instant)


def backtest(spec: trace.TraceSpec, settings: Settings) -> dict[str, Any]:
    """The ETA's backtest on the first ``spec.hours`` of the simulated day (JSON-ready)."""
    backtest = Backtest(settings)
    day = _Day(spec, backtest)
    outcome = day.run()
    return {
        "trace": trace.described(spec),
        "simulated": clock.format_duration(outcome.time),
        **backtest.result(),
    }
