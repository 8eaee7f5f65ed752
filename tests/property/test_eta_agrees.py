"""The forecast against the simulation it forecasts: random gangs whose runtimes are all
known ahead (activeDeadlineSeconds) and that have all arrived by ``NOW``, simulated to
``NOW``; then every waiting job's estimate, read off the listed objects as ``kbatch
explain --eta`` reads them, is held to when the same simulation, left to run, starts it.
A high-confidence estimate is right to one step of the forecast; one that says it does
not know is for a job that never starts (its pods evicted for good, or never fitting).
"""

import os

from hypothesis import given, settings
from hypothesis import strategies as st
from property.gangs import TOPOLOGY, Workload, workloads

from kbatch.config import DEFAULT_CONF
from kbatch.operators.scheduler.core.runner import load_conf
from kbatch.sim import manifests, runner
from kbatch.visibility import eta, standing
from scenarios import live

NOW = 25.0
CONF = load_conf(DEFAULT_CONF + TOPOLOGY)  # (the rack level, for gangs that require one)
SETTINGS = settings(
    max_examples=int(os.environ.get("KBATCH_PROPERTY_EXAMPLES", 25)),
    deadline=None,
    derandomize=True,
    database=None,
)


class Watched(runner.Simulation):
    """The simulation, noting when each PodGroup is first Running (or done) at a tick
    from ``NOW`` on, as the forecast notes it (events would not do: a group that starts
    twice is told so once, the second telling a repeat)."""

    def __init__(self, documents: list[dict]) -> None:
        loaded = manifests.load_documents(documents)
        super().__init__(loaded, CONF, runner.Options())
        self.started: dict[str, float] = {}

    def tick(self, now: float) -> bool:
        changed = super().tick(now)
        if now >= NOW:
            for group in self.cluster.state.list("PodGroup"):
                name = group["metadata"]["name"]
                phase = (group.get("status") or {}).get("phase")
                if phase in ("Running", "Completed") and name not in self.started:
                    self.started[name] = now
        return changed


def started(documents: list[dict]) -> dict[str, float]:
    """When the simulation, left to run, first has each PodGroup started from ``NOW`` on."""
    simulation = Watched(documents)
    simulation.run()
    return simulation.started


@SETTINGS
@given(st.booleans().flatmap(lambda placed: workloads(arrive_by=20, deadlines=True, placed=placed)))
def test_a_sure_estimate_is_when_the_simulation_starts_the_job(workload: Workload) -> None:
    conf = CONF
    objects = live.cluster_at(workload.docs, NOW)
    session, _ = standing.open_session(objects, conf)
    waiting = sorted(uid for uid, job in session.jobs.items() if standing.is_waiting(job))
    forecast = eta.forecast(session, objects, conf, waiting)
    actual = started(workload.docs)
    for uid in waiting:
        estimate = forecast.estimates[uid]
        start = actual.get(uid.split("/", 1)[1])
        if estimate.seconds is None:
            assert start is None, (uid, estimate.text, start)
        elif estimate.confidence == "high":
            assert start is not None, (uid, estimate.text)
            assert abs(NOW + estimate.seconds - start) <= forecast.step, (uid, estimate, start)
