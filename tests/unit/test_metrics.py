"""Metrics: the names of DESIGN §8, fed by a real session."""

from prometheus_client import generate_latest

from builders import Cluster, run_actions, vec
from kbatch.metrics import SchedulerMetrics, exported_names
from kbatch.operators.scheduler.core.framework.info import TaskStatus

DESIGN_NAMES = {
    "kbatch_e2e_scheduling_latency_milliseconds_bucket",
    "kbatch_action_scheduling_latency_milliseconds_bucket",
    "kbatch_plugin_scheduling_latency_milliseconds_bucket",
    "kbatch_task_scheduling_latency_milliseconds_bucket",
    "kbatch_schedule_attempts_total",
    "kbatch_pod_preemption_victims",
    "kbatch_total_preemption_attempts",
    "kbatch_unschedule_task_count",
    "kbatch_unschedule_job_count",
    "kbatch_job_retry_counts",
    "kbatch_queue_share",
    "kbatch_queue_weight",
    "kbatch_queue_overused",
    *(
        f"kbatch_queue_{kind}_{unit}"
        for kind in ("allocated", "request", "deserved", "capability")
        for unit in ("milli_cpu", "memory_bytes")
    ),
    *(
        f"kbatch_queue_pod_group_{phase}_count"
        for phase in ("pending", "inqueue", "running", "unknown", "completed")
    ),
}


def session_after_scheduling():
    cluster = Cluster().node("n1", cpu=4).queue("q", capability=None)
    cluster.job("fits", queue="q", min_member=2, created=50.0).tasks(2, cpu=1)
    cluster.job("too-big", queue="q", min_member=3).tasks(3, cpu=2)
    cluster.job("running", queue="q").tasks(1, cpu=1, status=TaskStatus.RUNNING, node="n1")
    session = cluster.open()
    run_actions(session, "allocate")
    session.stats.e2e_seconds = 0.01
    session.stats.action_seconds["allocate"] = 0.005
    return session


def test_every_design_metric_is_exported_with_values_from_the_session() -> None:
    metrics = SchedulerMetrics()
    metrics.record(session_after_scheduling())
    names = exported_names(metrics)
    assert names >= DESIGN_NAMES, DESIGN_NAMES - names
    text = generate_latest(metrics.registry).decode()
    assert 'kbatch_schedule_attempts_total{result="scheduled"} 2.0' in text
    assert 'kbatch_unschedule_task_count{job_id="default/too-big"} 3.0' in text
    assert "kbatch_unschedule_job_count 1.0" in text
    assert 'kbatch_queue_allocated_milli_cpu{parent="",queue_name="q"} 3000.0' in text
    assert 'kbatch_queue_weight{parent="",queue_name="q"} 1.0' in text
    assert "kbatch_task_scheduling_latency_milliseconds_count 2.0" in text


def test_retries_grow_and_unschedulable_jobs_clear() -> None:
    metrics = SchedulerMetrics()
    metrics.record(session_after_scheduling())
    metrics.record(session_after_scheduling())
    text = generate_latest(metrics.registry).decode()
    assert 'kbatch_job_retry_counts{job_id="default/too-big"} 2.0' in text
    empty = Cluster().node("n1")
    metrics.record(run_actions_session(empty))
    text = generate_latest(metrics.registry).decode()
    assert "kbatch_unschedule_task_count{" not in text
    assert "kbatch_unschedule_job_count 0.0" in text


def run_actions_session(cluster: Cluster):
    session = cluster.open()
    run_actions(session, "allocate")
    return session


def test_a_replica_that_stops_scheduling_forgets_the_cluster_gauges() -> None:
    metrics = SchedulerMetrics()
    metrics.record(session_after_scheduling())
    metrics.forget_cluster_state()
    text = generate_latest(metrics.registry).decode()
    assert 'queue_name="q"' not in text
    assert "kbatch_unschedule_task_count{" not in text
    assert "kbatch_e2e_scheduling_latency_milliseconds_count 1.0" in text  # history stays


def test_series_of_jobs_and_queues_gone_are_removed() -> None:
    metrics = SchedulerMetrics()
    metrics.record(session_after_scheduling())
    capped = Cluster().node("n1", cpu=4).queue("other", capability=vec(cpu=8, memory=8))
    capped.job("stuck", queue="other", min_member=1).tasks(1, cpu=5)
    metrics.record(run_actions_session(capped))
    text = generate_latest(metrics.registry).decode()
    assert 'queue_name="q"' not in text, "a queue gone leaves no series"
    assert 'job_id="default/too-big"' not in text, "nor a job gone"
    assert 'kbatch_job_retry_counts{job_id="default/stuck"} 1.0' in text
    assert 'kbatch_queue_capability_milli_cpu{parent="",queue_name="other"} 8000.0' in text
    uncapped = Cluster().node("n1", cpu=4).queue("other", capability=None)
    metrics.record(run_actions_session(uncapped))
    text = generate_latest(metrics.registry).decode()
    assert "kbatch_queue_capability_milli_cpu{" not in text, "a capability taken away"
    assert 'kbatch_queue_weight{parent="",queue_name="other"} 1.0' in text
    metrics.forget_cluster_state()
    metrics.record(run_actions_session(uncapped))  # nothing left to remove: no KeyError


def test_each_queue_says_its_parent_in_the_tree() -> None:
    cluster = Cluster().node("n1", cpu=4).queue("team").queue("leaf")
    cluster.queues["leaf"].parent = "team"
    metrics = SchedulerMetrics()
    metrics.record(cluster.open())
    text = generate_latest(metrics.registry).decode()
    assert 'kbatch_queue_parent{parent="team",queue_name="leaf"} 1.0' in text
    assert 'kbatch_queue_parent{parent="root",queue_name="team"} 1.0' in text
    # every queue gauge carries the parent ("" at the top), so a subtree is one selector
    assert 'kbatch_queue_weight{parent="team",queue_name="leaf"} 1.0' in text
    assert 'kbatch_queue_weight{parent="",queue_name="team"} 1.0' in text
    assert 'kbatch_queue_pod_group_pending_count{parent="team",queue_name="leaf"} 0.0' in text
    cluster.queues["leaf"].parent = None  # moved to the top: the old series goes
    metrics.record(cluster.open())
    text = generate_latest(metrics.registry).decode()
    assert 'parent="team"' not in text
    assert 'kbatch_queue_parent{parent="root",queue_name="leaf"} 1.0' in text
    assert 'kbatch_queue_weight{parent="",queue_name="leaf"} 1.0' in text
