"""No pass of the cyclic collector walks a forecast's work: everything the plan, the
import and the forward run make outlives the next of them, so a collection set off in
between, or before the run is freed, would walk it all (on 1,000 nodes and 10,000 pods
some tenth of a second) to free nothing."""

import gc

from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.visibility import eta, eta_bench, standing
from scenarios import eta_seeded


def test_no_collection_walks_what_a_forecast_makes() -> None:
    """(Here the run makes some thousands of objects that a pass would walk.)"""
    objects = eta_bench.synthetic_cluster(nodes=50, gangs=50)
    conf = default_conf()
    session, _ = standing.open_session(objects, conf)
    asked = ["bench/waiting-5"]
    walked = []  # each pass's generations' objects, as it starts

    def noted(phase: str, info: dict) -> None:
        if phase == "start":
            generations = range(info["generation"] + 1)
            walked.append(sum(len(gc.get_objects(g)) for g in generations))

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
    assert all(objects < 5_000 for objects in walked), walked
    assert gc.isenabled()


def test_a_forecast_leaves_what_the_process_froze_frozen() -> None:
    """``kbatch run`` freezes what outlives each session (``collector_schedule``); the
    forecast its ETA publisher runs beside it must not thaw it (the simulator's own
    pause for a run freezes and thaws every object of the process)."""
    objects = eta_seeded.cluster(1)
    conf = default_conf()
    session, _ = standing.open_session(objects, conf)
    asked = [uid for uid, job in session.jobs.items() if standing.is_waiting(job)]
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        result = eta.forecast(session, objects, conf, asked)
        assert result.sessions > 1
        # (frozen objects the forecast replaced are freed: a few fewer, not none)
        assert gc.get_freeze_count() > frozen // 2, "thawed"
    finally:
        gc.unfreeze()
