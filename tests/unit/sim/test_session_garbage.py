"""A simulated session leaves no garbage for the cyclic collector, nor does a
simulation or an ETA's forecast once nothing refers to it.

The plugins' functions hold their session, so a session that kept them would take all
it reaches (its snapshot's jobs, statuses, events) into a reference cycle; the
simulator drops them once the session is over (``TieredFunctions.forget_functions``)
and the session goes as soon as nothing refers to it. Likewise a placement's
look-ahead keeps a function of the session, not of its Placer.
"""

import gc
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from builders import cyclic_garbage_types
from kbatch.operators.scheduler.core.framework.collector import collector_paused
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.sim import manifests, runner, trace
from kbatch.visibility import eta, eta_bench, standing

EXAMPLES = Path(__file__).parents[3] / "examples"


@pytest.fixture
def collector_off() -> Iterator[None]:
    gc.collect()
    with collector_paused():
        yield


def _simulation() -> runner.Simulation:
    loaded = runner.load([EXAMPLES / "sim-cluster.yaml", EXAMPLES / "job-stream.yaml"])
    return runner.Simulation(loaded, runner.resolve_conf(None, loaded), warn=lambda _: None)


def _trace() -> runner.Simulation:
    """Gangs on a few nodes: placements that use the look-ahead (``placement.Placer``)."""
    objects = trace.trace_objects(trace.TraceSpec(nodes=4, hours=1.0, seed=2))
    return runner.Simulation(manifests.load_documents(objects, "<trace>"), default_conf())


@pytest.mark.parametrize("make", [_simulation, _trace], ids=["job-stream", "trace"])
def test_ticks_leave_nothing_for_the_cyclic_collector(
    make: Callable[[], runner.Simulation], collector_off: None
) -> None:
    simulation = make()
    for k in range(3):  # the first sessions: caches filled, modules imported
        simulation.tick(float(k))
    gc.collect()
    for k in range(3, 600, 7):
        simulation.tick(float(k))
    assert simulation.totals.binds > 0
    assert gc.collect() == 0


def test_a_session_without_its_functions_answers_no_plugin(collector_off: None) -> None:
    simulation = _simulation()
    simulation.tick(0.0)  # the jobs due at 0 created
    session = simulation.scheduler.run_once()
    assert session.job_order_key(next(iter(session.jobs.values())))[:-2]  # the plugins' keys
    session.forget_functions()
    assert all(not session.job_order_key(job)[:-2] for job in session.jobs.values())


def test_pausing_the_collector_for_a_run_changes_nothing_and_is_undone() -> None:
    """``Options.pause_collector``: the same outcome with the collector on as usual."""

    def outcome(pause: bool) -> tuple[object, ...]:
        simulation = _trace()
        simulation.options = runner.Options(pause_collector=pause)
        seen: list[tuple[bool, int]] = []
        tick = simulation.tick

        def watched_tick(now: float) -> bool:
            seen.append((gc.isenabled(), gc.get_freeze_count()))
            return tick(now)

        simulation.tick = watched_tick  # type: ignore[method-assign]
        done = simulation.run()
        assert gc.isenabled() and gc.get_freeze_count() == 0  # as before the run
        assert any(frozen > 0 for _, frozen in seen) is pause
        assert all(enabled is not pause for enabled, _ in seen)
        pods = sorted(str(pod) for pod in done.cluster.state.list("Pod"))
        return done.time, done.totals, pods, [str(e) for e in done.cluster.event_log]

    assert outcome(True) == outcome(False)


def _shown(value: object) -> object:
    """A compiled value as it answers: a key function as what it gives an item."""
    return value(object()) if callable(value) else value


def test_forgetting_sets_what_compile_makes_of_no_function() -> None:
    """``forget_functions`` sets the compiled lists at once: each as ``compile`` makes it
    of the emptied registries (one left out would hold its session's functions)."""
    simulation = _simulation()
    simulation.tick(0.0)
    session = simulation.scheduler.run_once()
    assert session._predicates and session._node_orders  # compiled of the plugins
    session.forget_functions()
    forgotten = dict(vars(session))
    session.compile()
    # what compile set: every attribute it made anew
    made = [name for name, value in vars(session).items() if forgotten.get(name) is not value]
    assert {"_job_keys", "_predicates", "_preemptable_key", "_lenders"} <= set(made)
    for name in made:
        assert _shown(forgotten[name]) == _shown(getattr(session, name)), name


def test_a_simulation_dropped_is_freed_at_once(collector_off: None) -> None:
    """Nothing in it refers back to it (a bound method kept by what it owns would): a
    run of ``kbatch simulate`` or an ETA's forecast is freed whole as its last reference
    goes, not left, millions of objects on a large cluster, for the collector's next
    pass to walk in whichever thread it falls (``kbatch run``'s bind workers)."""
    simulation = _trace()
    for k in range(0, 600, 7):
        simulation.tick(float(k))
    assert simulation.totals.binds > 0
    kept = [weakref.ref(x) for x in (simulation, simulation.cluster, simulation.cluster.state)]
    kept.append(weakref.ref(simulation.admission))
    del simulation
    assert [ref() for ref in kept] == [None] * len(kept)


def test_a_forecast_leaves_no_cluster_for_the_cyclic_collector(collector_off: None) -> None:
    objects = eta_bench.synthetic_cluster(nodes=20, gangs=20)
    conf = default_conf()
    session, _ = standing.open_session(objects, conf)
    done = eta.forecast(session, objects, conf, ["bench/waiting-5"], budget=60.0)
    assert done.sessions > 0
    session.forget_functions()
    del session
    left = cyclic_garbage_types()
    assert not left & {"ClusterState", "SimBackend", "Simulation", "_Forward", "TaskInfo"}
