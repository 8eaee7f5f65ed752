"""The forecast against the simulation it forecasts: random gangs whose runtimes are all
known ahead (activeDeadlineSeconds) and that have all arrived by ``NOW``, simulated to
``NOW``; then every waiting job's estimate, read off the listed objects as ``kbatch
explain --eta`` reads them, is held to when the same simulation, left to run, starts it.
A high-confidence estimate is right to one step of the forecast; one that says it does
not know is for a job that never starts (its pods evicted for good, or never fitting).
"""

import os

from hypothesis import given, settings
from property.gangs import Workload, workloads

from kbatch import sim
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.visibility import eta, standing
from scenarios import live

NOW = 25.0
SETTINGS = settings(
    max_examples=int(os.environ.get("KBATCH_PROPERTY_EXAMPLES", 25)),
    deadline=None,
    derandomize=True,
    database=None,
)


def started(documents: list[dict]) -> dict[str, float]:
    """When the simulation, run to its end, first moves each PodGroup to Running after
    ``NOW`` (one that ran before and lost its pods may wait again)."""
    result = sim.simulate(documents=documents, warn=lambda _: None)
    starts: dict[str, float] = {}
    for event in result["events"]:
        if event["kind"] == "PodGroup" and event["reason"] == "Running" and event["time"] >= NOW:
            starts.setdefault(event["name"], float(event["time"]))
    return starts


@SETTINGS
@given(workloads(arrive_by=20, deadlines=True))
def test_a_sure_estimate_is_when_the_simulation_starts_the_job(workload: Workload) -> None:
    conf = default_conf()
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
