"""The ETA published on waiting PodGroups (``kbatch.visibility.publisher``) and read back
by ``kbatch jobs / explain --eta`` when fresh (``kbatch.visibility.published``)."""

import gc
import json
import time
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from builders import cyclic_garbage_types
from kbatch.api.times import rfc3339
from kbatch.cli import main as cli
from kbatch.cli import visibility as cli_visibility
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core.framework.collector import collector_paused
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.visibility import eta, published, standing
from kbatch.visibility.publisher import FIRST_ROUND, EtaPublisher, PublisherSettings
from scenarios import live
from scenarios import objects as o

NOW = 10.0
DOCUMENTS = [
    o.node("n1", cpu="4"),
    *live.gang("first", 4, duration="45s", deadline=45),
    *live.gang("second", 4, duration="30s", deadline=30),
]
CONDITION = "kbatch.io/EstimatedStart"


class Cluster:
    """A ClusterState standing for the informers' caches, and the API's status writes."""

    def __init__(self, now: float = NOW, documents: list[dict] = DOCUMENTS) -> None:
        objects = live.cluster_at(documents, now)
        self.state, _ = standing.load_state(objects)
        self.writes: list[tuple[str, str, dict[str, Any]]] = []

    def write(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """A merge patch of the status (as the API server applies it), and the watch."""
        self.writes.append((namespace, name, patch))
        current = self.state.get("PodGroup", namespace, name)
        assert current is not None
        status = {**(current.get("status") or {}), **patch["status"]}
        self.state.apply({**current, "status": status})

    def conditions(self, name: str) -> list[dict[str, Any]]:
        group = self.state.get("PodGroup", "default", name)
        assert group is not None
        return list((group.get("status") or {}).get("conditions") or [])


def publisher(cluster: Cluster, metrics: SchedulerMetrics, now: float = NOW) -> EtaPublisher:
    return EtaPublisher(
        cluster.state,
        default_conf,
        lambda: True,
        cluster.write,
        metrics,
        PublisherSettings(interval=30.0, budget=30.0),
        clock=lambda: now,
    )


def estimated(condition: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in condition.items() if k != "message"}


def test_a_waiting_group_gets_its_estimate_as_a_condition_and_a_metric() -> None:
    cluster, metrics = Cluster(), SchedulerMetrics(CollectorRegistry())
    done = publisher(cluster, metrics).run_once()
    assert (done.estimated, done.written) == (1, 1)
    [condition] = [c for c in cluster.conditions("second") if c["type"] == CONDITION]
    assert estimated(condition) == {
        "type": CONDITION,
        "status": "True",
        "reason": "HighConfidence",
        "lastTransitionTime": "1970-01-01T00:00:10Z",
    }
    assert condition["message"] == (
        "starts at 1970-01-01T00:00:45Z: ~35s (1 running job finishes by then; runtimes "
        "from activeDeadlineSeconds of 4 pods; high confidence)"
    )
    labels = {"namespace": "default", "name": "second", "queue": "default", "confidence": "high"}
    value = metrics.registry.get_sample_value("kbatch_podgroup_estimated_start_seconds", labels)
    assert value == NOW + 35.0
    assert not [c for c in cluster.conditions("first") if c["type"] == CONDITION]


def test_a_group_without_pods_gets_none_its_pods_cannot_be_foreseen() -> None:
    """(No pods, and no Job kbatch holds for it: nothing says what it will run.)"""
    cluster = Cluster(documents=[*DOCUMENTS, o.pod_group("held", 2, None)])
    done = publisher(cluster, SchedulerMetrics(CollectorRegistry())).run_once()
    assert (done.estimated, done.written) == (1, 1)
    assert published.find(cluster.conditions("held")) is None


def test_a_group_whose_job_kbatch_holds_gets_its_estimate() -> None:
    """The informers hold the Jobs: a group whose Job is held until it is admitted (no
    pods yet) is forecast from the Job, as ``explain --eta`` does, and starts then."""
    group = o.pod_group("held", 4)
    group["spec"]["minResources"] = {"cpu": "4"}
    job = o.job("held", parallelism=4, group="held", duration="10s")
    documents = [*DOCUMENTS, o.at(job, "1s"), o.at(group, "1s")]
    cluster = Cluster(documents=documents)
    assert any(j["spec"].get("suspend") for j in cluster.state.list("Job")), "the Job is held"
    done = publisher(cluster, SchedulerMetrics(CollectorRegistry())).run_once()
    assert (done.estimated, done.written) == (2, 2)
    condition = published.find(cluster.conditions("held"))
    assert condition is not None
    started = live.start_of(documents, "held")
    assert started is not None
    assert condition["message"].startswith(f"starts at {rfc3339(started)}"), condition


def test_an_estimate_that_has_not_moved_is_not_written_again_until_half_stale() -> None:
    cluster, metrics = Cluster(), SchedulerMetrics(CollectorRegistry())
    publisher(cluster, metrics).run_once()
    assert publisher(cluster, metrics, NOW + 5).run_once().written == 0  # 5 s later: ~30s
    later = NOW + published.FRESH_SECONDS / 2 + 1
    assert publisher(cluster, metrics, later).run_once().written == 1


def test_the_condition_goes_once_the_group_has_started_and_its_series_too() -> None:
    cluster, metrics = Cluster(), SchedulerMetrics(CollectorRegistry())
    publisher(cluster, metrics).run_once()
    started = Cluster(now=50.0)  # 'second' runs by then: carry the old condition over
    condition = published.find(cluster.conditions("second"))
    group = started.state.get("PodGroup", "default", "second")
    assert group is not None and condition is not None
    status = {**group["status"], "conditions": [*group["status"]["conditions"], condition]}
    started.state.apply({**group, "status": status})
    assert publisher(started, metrics, 50.0).run_once().written == 1
    assert published.find(started.conditions("second")) is None
    assert started.conditions("second")  # the scheduler's own are kept
    assert "kbatch_podgroup_estimated_start_seconds{" not in metrics_text(metrics)


def metrics_text(metrics: SchedulerMetrics) -> str:
    from prometheus_client import generate_latest

    return generate_latest(metrics.registry).decode()


def group_with(condition: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": "g"}, "status": {"conditions": [condition]}}


def test_a_published_estimate_is_read_back_as_seen_from_now_while_fresh() -> None:
    made = 1_700_000_000.0
    estimate = eta.Estimate(600.0, "~10 min", "~10 min (high confidence)", "high")
    group = group_with(published.condition_of(estimate, made))
    read = published.read(group, made + 60, max_age=120)
    assert read is not None
    assert (read.estimate.seconds, read.estimate.confidence, read.made) == (540.0, "high", made)
    assert read.estimate.text.startswith("~9 min, at 2023-11-14T22:23:20Z (published 60s ago)")
    assert published.read(group, made + 121, max_age=120) is None


def test_later_than_and_unknown_are_published_as_unknown() -> None:
    made = 1_700_000_000.0
    later = eta.Estimate(None, ">2h00m", "later than 2h00m (...)", "none", later_than=7200.0)
    condition = published.condition_of(later, made)
    assert (condition["status"], condition["reason"]) == ("Unknown", "LaterThan")
    read = published.read(group_with(condition), made, max_age=120)
    assert read is not None and read.estimate.later_than == 7200.0
    unknown = eta.Estimate(None, "unknown", "unknown: 2 running pods ...", "none")
    condition = published.condition_of(unknown, made)
    assert (condition["status"], condition["reason"]) == ("Unknown", "Unknown")
    read = published.read(group_with(condition), made, max_age=120)
    assert read is not None and read.estimate.when == "unknown"


class Source:
    def __init__(self, objects: standing.ClusterObjects) -> None:
        self._objects = objects
        self.jobs_listed = 0

    def objects(self, *, events_in: str | None) -> standing.ClusterObjects:
        return self._objects

    def held_jobs(self) -> list[dict]:
        self.jobs_listed += 1
        return list(self._objects.jobs)

    def served(self, path: str) -> None:
        return None  # no kbatch run: the command computes

    def conf(self):
        return default_conf(), "the default"


def published_cluster(made: float) -> standing.ClusterObjects:
    """The cluster at NOW, 'second' carrying an estimate made at ``made`` (1 s off the
    forecast's 35 s, so that which one was shown can be told)."""
    objects = live.cluster_at(DOCUMENTS, NOW)
    estimate = eta.Estimate(NOW + 36.0 - made, "", "~36s (published)", "high")
    groups = []
    for group in objects.pod_groups:
        if group["metadata"]["name"] == "second":
            conditions = [*group["status"].get("conditions", [])]
            conditions.append(published.condition_of(estimate, made))
            group = {**group, "status": {**group["status"], "conditions": conditions}}
        groups.append(group)
    return standing.ClusterObjects(objects.now, objects.nodes, objects.pods, groups, objects.queues)


@pytest.mark.parametrize(
    ("made", "max_age", "seconds", "published_at"),
    [
        (NOW - 30, "2m", 36.0, NOW - 30),  # fresh: read, no forecast
        (NOW - 300, "2m", 35.0, None),  # stale: forecast
        (NOW - 30, "0", 35.0, None),  # reading turned off
    ],
)
def test_explain_eta_reads_a_fresh_published_estimate_and_computes_otherwise(
    made, max_age, seconds, published_at, monkeypatch, capsys
) -> None:
    source = Source(published_cluster(made))
    monkeypatch.setattr(cli_visibility, "source_for", lambda args: source)
    code = cli.main(["explain", "second", "--eta", "--eta-max-age", max_age, "-o", "json"])
    out, _ = capsys.readouterr()
    assert code == 0
    shown = json.loads(out)["eta"]
    assert (shown["seconds"], shown.get("publishedAt")) == (seconds, published_at)
    assert source.jobs_listed == (published_at is None), "Jobs listed only to forecast"


def test_no_round_runs_while_the_schedulers_binds_are_in_flight() -> None:
    cluster, metrics = Cluster(), SchedulerMetrics(CollectorRegistry())
    binding = [True]
    made = publisher(cluster, metrics)
    made.busy = lambda: binding[0]
    assert made.turn() == FIRST_ROUND  # tried again soon, not an interval later
    assert made.rounds == 0
    binding[0] = False
    assert made.turn() == 30.0
    assert made.rounds == 1


def test_a_round_s_forecast_waits_while_binds_are_in_flight() -> None:
    """A round that started while no bind was in flight waits, before each simulated
    session, for the binds that went out meanwhile: its CPU would slow them."""
    cluster, metrics = Cluster(), SchedulerMetrics(CollectorRegistry())
    looked: list[float] = []

    def binding() -> bool:
        looked.append(time.monotonic())
        return len(looked) in range(2, 30)  # free to start; then binds, for 28 looks

    made = publisher(cluster, metrics)
    made.busy = binding
    started = time.monotonic()
    assert made.turn() == 30.0 and made.rounds == 1
    assert len(looked) > 30, "the forecast looked, and waited while they were"
    assert time.monotonic() - started >= 28 * eta.HOLD_POLL
    [condition] = [c for c in cluster.conditions("second") if c["type"] == CONDITION]
    assert condition["reason"] == "HighConfidence", "held: not counted against the budget"


def test_a_round_leaves_nothing_for_the_cyclic_collector() -> None:
    """The round's session and its snapshot go with it: ``kbatch run`` freezes what
    the collector has not reached, so a cycle would keep them until its next full pass."""
    cluster, metrics = Cluster(), SchedulerMetrics(CollectorRegistry())
    made = publisher(cluster, metrics)
    gc.collect()
    with collector_paused():
        made.run_once()
        left = cyclic_garbage_types()
    assert not left & {"Session", "JobInfo", "TaskInfo", "ClusterState"}, left
