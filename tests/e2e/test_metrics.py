"""After a scenario on a real cluster, ``kbatch run``'s /metrics serves DESIGN §8's
names, and the numbers tell what happened: sessions ran, the gang's six pods were
bound, the default queue deserved and was allocated its six cpus. Names and numbers
come from one scrape (the backend's, at read-back): two could disagree."""

from typing import Any

import pytest

from e2e.cluster_backend import samples_of
from scenarios.runner import run

pytestmark = pytest.mark.e2e

# DESIGN §8, as exported (Python's client adds _total to counters).
NAMES = [
    "kbatch_e2e_scheduling_latency_milliseconds",
    "kbatch_action_scheduling_latency_milliseconds",
    "kbatch_plugin_scheduling_latency_milliseconds",
    "kbatch_task_scheduling_latency_milliseconds",
    "kbatch_schedule_attempts_total",
    "kbatch_pod_preemption_victims",
    "kbatch_total_preemption_attempts",
    "kbatch_unschedule_task_count",
    "kbatch_unschedule_job_count",
    "kbatch_job_retry_counts",
    *(
        f"kbatch_queue_{kind}_{unit}"
        for kind in ("allocated", "request", "deserved", "capability")
        for unit in ("milli_cpu", "memory_bytes", "scalar_resources")
    ),
    "kbatch_queue_share",
    "kbatch_queue_weight",
    "kbatch_queue_overused",
    *(
        f"kbatch_queue_pod_group_{phase}_count"
        for phase in ("pending", "inqueue", "running", "unknown", "completed")
    ),
]


def test_metrics_after_a_run(cluster_backend: Any) -> None:
    outcome = run("seed-gang-job.yaml", backend=cluster_backend)
    # one scrape, read while kbatch still led the scenario: names and numbers agree
    text = cluster_backend.last_scrape
    declared = {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}
    declared |= {f"{name}_total" for name in declared}  # a counter's TYPE line drops _total
    assert [name for name in NAMES if name not in declared] == []

    samples = cluster_backend.last_metrics
    assert samples == samples_of(text)
    before = cluster_backend.metrics_before  # kbatch run served earlier scenarios too

    def grew(key: str) -> float:
        return samples[key] - before.get(key, 0.0)

    sessions = grew("kbatch_e2e_scheduling_latency_milliseconds_count")
    assert sessions == outcome.summary["sessions"] > 0
    # every session runs every action of the conf (a scrape may catch one mid-session)
    for action in ("enqueue", "allocate", "backfill"):
        key = f'kbatch_action_scheduling_latency_milliseconds_count{{action="{action}"}}'
        assert sessions <= grew(key) <= sessions + 1, key
    opened = 'kbatch_plugin_scheduling_latency_milliseconds_count{OnSession="OnSessionOpen",plugin="gang"}'
    assert sessions <= grew(opened) <= sessions + 1
    assert grew("kbatch_task_scheduling_latency_milliseconds_count") >= 6
    assert grew('kbatch_schedule_attempts_total{result="scheduled"}') >= 6
    default = '{parent="",queue_name="default"}'
    assert samples[f"kbatch_queue_deserved_milli_cpu{default}"] == 6000
    assert samples[f"kbatch_queue_allocated_milli_cpu{default}"] == 6000
    assert samples[f"kbatch_queue_weight{default}"] == 1
    assert samples[f"kbatch_queue_pod_group_running_count{default}"] == 1
