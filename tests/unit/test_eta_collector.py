"""The cyclic collector does not run during a forecast: everything the plan, the import
and the forward run make outlives the next of them, so a collection set off in between
would walk it all (on 1,000 nodes and 10,000 pods some tenth of a second) to free nothing."""

import gc

from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.visibility import eta, standing
from scenarios import eta_seeded


def test_no_collection_runs_while_a_forecast_does() -> None:
    objects = eta_seeded.cluster(1)
    conf = default_conf()
    session, _ = standing.open_session(objects, conf)
    asked = [uid for uid, job in session.jobs.items() if standing.is_waiting(job)]
    assert asked
    collections = []

    def noted(phase: str, info: dict) -> None:
        if phase == "start":
            collections.append(info["generation"])

    was_enabled = gc.isenabled()
    gc.enable()
    gc.collect()
    gc.callbacks.append(noted)
    try:
        result = eta.forecast(session, objects, conf, asked)
    finally:
        gc.callbacks.remove(noted)
        if not was_enabled:
            gc.disable()
    assert result.sessions > 0
    assert collections == []
    assert gc.isenabled()
