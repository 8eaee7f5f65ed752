"""Leader safety: a leader steps down at its renew deadline, before a peer may take the
Lease; ``kbatch run`` settles what it sent before it gives the Lease up."""

import time
from typing import Any

import pytest

from kbatch import kubeapi
from kbatch.operators.process import RunSettings, Runtime
from kbatch.operators.scheduler.runtime.leader import LeaseElector


def elector(**options: Any) -> LeaseElector:
    return LeaseElector(None, "kube-system", **options)  # type: ignore[arg-type]


def test_a_leader_that_cannot_renew_steps_down_before_its_lease_expires() -> None:
    changes: list[bool] = []
    leader = elector(lease_seconds=15, renew_seconds=3, on_change=changes.append)
    assert leader.renew_deadline == 10, "two thirds of the lease, as client-go"
    leader._renewed = time.time()
    leader._set(True)
    assert leader.is_leader()
    leader._renewed = time.time() - 10.5  # a peer may take the Lease only after 15 s
    assert not leader.is_leader()
    assert changes == [True, False]


def test_renew_period_deadline_and_lease_must_be_in_order() -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        elector(lease_seconds=15, renew_seconds=3, renew_deadline=15)
    with pytest.raises(ValueError, match="renew period"):
        elector(lease_seconds=3, renew_seconds=2.5)


def test_stop_settles_binds_before_releasing_the_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kubeapi.client, "api_client", lambda _: None)
    runtime = Runtime(RunSettings(metrics_address=None, health_address=None))
    order: list[str] = []

    class Recorder:
        def __init__(self, name: str) -> None:
            self.name = name

        def __getattr__(self, method: str) -> Any:
            return lambda *_, **__: order.append(f"{self.name}.{method}")

    runtime.cluster = Recorder("cluster")  # type: ignore[assignment]
    runtime.elector = Recorder("elector")  # type: ignore[assignment]
    runtime.informers = []
    runtime.stop()
    assert order == ["cluster.shutdown", "elector.stop"]
