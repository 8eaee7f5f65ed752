"""kbatch run's loop does not start a session while the last one's binds are in flight:
the session's CPU would slow them, and spread a gang's binds over seconds. It waits
until they are answered, a bounded time at most, and no longer than the loop runs."""

import threading
import time

from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.runtime.kube_backend import KubeBackend
from kbatch.operators.scheduler.runtime.loop import ConfSource, SchedulerLoop
from tests.operator.test_early_binds import GANGS, SIZE, GatedApi, api, backlog, wait_for

__all__ = ["api"]  # the fixture, used by name

HELD = 0.3  # how long a test holds the binds before it looks


def looping(cluster: KubeBackend, binds_wait: float) -> SchedulerLoop:
    """A loop over ``cluster`` with work always waiting (pods keep coming)."""
    return SchedulerLoop(
        cluster,
        ConfSource(None),
        period=1.0,
        metrics=SchedulerMetrics(),
        may_schedule=lambda: True,
        has_work=lambda: True,
        busy=cluster.binds_in_flight,
        committed_binds=cluster.committed,
        binds_wait=binds_wait,
    )


def in_thread(loop: SchedulerLoop) -> threading.Thread:
    """The next period, on its own thread (it may wait)."""
    period = threading.Thread(target=loop.period_once)
    period.start()
    return period


def first_session(api: GatedApi, binds_wait: float) -> tuple[KubeBackend, SchedulerLoop]:
    """A loop whose first session has placed every gang, its binds held at the server."""
    cluster = KubeBackend(None, backlog(), early_binds=0)  # type: ignore[arg-type]
    loop = looping(cluster, binds_wait)
    loop.period_once()
    assert loop.sessions == 1
    wait_for("every bind at the server", lambda: len(api.binds()) == GANGS * SIZE)
    return cluster, loop


def test_the_next_session_waits_until_the_binds_are_answered(api: GatedApi) -> None:
    cluster, loop = first_session(api, binds_wait=10.0)
    period = in_thread(loop)
    time.sleep(HELD)
    assert loop.sessions == 1, "no session while the binds are in flight"
    api.gate.set()
    period.join(5)
    assert not period.is_alive() and loop.sessions == 2, "the session, once they are answered"
    cluster.shutdown()


def test_the_wait_is_bounded(api: GatedApi) -> None:
    cluster, loop = first_session(api, binds_wait=HELD)
    started = time.monotonic()
    in_thread(loop).join(5)
    waited = time.monotonic() - started
    assert loop.sessions == 2, "the session runs with the binds still in flight"
    assert HELD <= waited < HELD + 2, waited
    assert cluster.binds_in_flight()
    api.gate.set()
    wait_for("every bind answered", lambda: not cluster.binds_in_flight())
    cluster.shutdown()


def test_stopping_ends_the_wait(api: GatedApi) -> None:
    cluster, loop = first_session(api, binds_wait=10.0)
    period = in_thread(loop)
    time.sleep(HELD)
    loop.stop()  # the loop's own thread never started: stop joins nothing
    period.join(5)
    assert not period.is_alive(), "the wait ended with the loop"
    assert loop.sessions == 1, "and no session after it"
    api.gate.set()
    wait_for("every bind answered", lambda: not cluster.binds_in_flight())
    cluster.shutdown()
