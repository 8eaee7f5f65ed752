"""kbatch_podgroup_wait_seconds: how long PodGroups wait, per queue (not where each stands)."""

import itertools
import json
from pathlib import Path

from prometheus_client import generate_latest

from builders import Cluster, FakeCluster
from kbatch.api.podgroup import PodGroupPhase, PodGroupStatus
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.info import TaskStatus

DASHBOARD = Path(__file__).parents[2] / "charts/kbatch/dashboards/kbatch-queues.json"


def scheduled(cluster: Cluster, metrics: SchedulerMetrics, now: float) -> None:
    scheduler = runner.Scheduler(
        FakeCluster(cluster.snapshot()),
        runner.default_conf(),
        clock=lambda: now,
        session_ids=map(str, itertools.count()).__next__,
    )
    metrics.record(scheduler.run_once())


def sample(metrics: SchedulerMetrics, name: str, queue: str) -> float | None:
    return metrics.registry.get_sample_value(name, {"queue_name": queue})


def test_a_group_that_starts_is_observed_once_with_its_wait() -> None:
    cluster = Cluster().node("n1", cpu=4).queue("research")
    cluster.job(
        "waited", queue="research", min_member=2, phase=PodGroupPhase.PENDING, created=40.0
    ).tasks(2)
    cluster.job("too-big", queue="research", min_member=2, phase=PodGroupPhase.PENDING).tasks(
        2, cpu=3
    )
    metrics = SchedulerMetrics()
    scheduled(cluster, metrics, now=100.0)
    assert sample(metrics, "kbatch_podgroup_wait_seconds_count", "research") == 1
    assert sample(metrics, "kbatch_podgroup_wait_seconds_sum", "research") == 60.0
    text = generate_latest(metrics.registry).decode()
    assert 'kbatch_podgroup_wait_seconds_bucket{le="60.0",queue_name="research"} 1.0' in text
    assert 'kbatch_podgroup_wait_seconds_bucket{le="30.0",queue_name="research"} 0.0' in text


def test_a_group_running_already_is_not_observed_again() -> None:
    cluster = Cluster().node("n1", cpu=4)
    job = cluster.job("running", phase=PodGroupPhase.RUNNING, created=1.0)
    job.tasks(1, status=TaskStatus.RUNNING, node="n1").tasks(1)  # a pod more, placed now
    job.job.old_status = PodGroupStatus(phase=PodGroupPhase.RUNNING)
    metrics = SchedulerMetrics()
    scheduled(cluster, metrics, now=100.0)
    assert sample(metrics, "kbatch_podgroup_wait_seconds_count", "default") is None


def test_the_queues_dashboard_plots_wait_percentiles_per_queue() -> None:
    board = json.loads(DASHBOARD.read_text())
    (panel,) = [
        p for p in board["panels"] if p["title"] == "PodGroup wait: p50, p90, p99 per queue"
    ]
    exprs = [t["expr"] for t in panel["targets"]]
    assert [e.split(",")[0] for e in exprs] == [
        "histogram_quantile(0.5",
        "histogram_quantile(0.9",
        "histogram_quantile(0.99",
    ]
    assert all(
        "sum by (le, queue_name) (rate(kbatch_podgroup_wait_seconds_bucket" in e for e in exprs
    )
    assert panel["fieldConfig"]["defaults"]["unit"] == "s"
