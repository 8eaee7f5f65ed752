"""Prometheus metrics (DESIGN §8), fed from each closed scheduling session.

Names are kube-batch's and Volcano's behind the ``kbatch_`` prefix. Go's client
lets a counter keep its name; Python's appends ``_total``. So the two counters
whose documented names do not end in ``_total`` (total_preemption_attempts,
job_retry_counts) are exported as gauges that only ever grow, under the exact
name users' dashboards query.

Series labelled by a job or a queue live as long as it does: each session removes
the label sets it did not set again (a deleted queue, a capability taken away, a
resource no longer in the cluster, a job gone), so that neither the registry grows
without bound nor a gauge keeps a value nothing stands for.
"""

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from kbatch.api.podgroup import PodGroupPhase
from kbatch.api.queue import ROOT_QUEUE
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.resources import Dims
from kbatch.operators.scheduler.core.framework.session import Session

LATENCY_MS_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
TASK_MS_BUCKETS = (10, 100, 500, 1000, 5000, 10000, 30000, 60000, 300000, 900000, 3600000)
# A PodGroup's wait, creation to start: seconds to a day.
WAIT_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)
NOT_STARTED = (PodGroupPhase.PENDING, PodGroupPhase.INQUEUE)
STARTED = (PodGroupPhase.RUNNING, PodGroupPhase.COMPLETED)
RESOURCE_KINDS = ("allocated", "request", "deserved", "capability")
PHASES = {
    PodGroupPhase.PENDING: "pending",
    PodGroupPhase.INQUEUE: "inqueue",
    PodGroupPhase.RUNNING: "running",
    PodGroupPhase.UNKNOWN: "unknown",
    PodGroupPhase.COMPLETED: "completed",
}


class SchedulerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.e2e = Histogram(
            "kbatch_e2e_scheduling_latency_milliseconds",
            "Latency of one whole scheduling session",
            buckets=LATENCY_MS_BUCKETS,
            registry=r,
        )
        self.action = Histogram(
            "kbatch_action_scheduling_latency_milliseconds",
            "Latency of one action in a session",
            ["action"],
            buckets=LATENCY_MS_BUCKETS,
            registry=r,
        )
        self.plugin = Histogram(
            "kbatch_plugin_scheduling_latency_milliseconds",
            "Latency of a plugin's session open or close",
            ["plugin", "OnSession"],
            buckets=LATENCY_MS_BUCKETS,
            registry=r,
        )
        self.task = Histogram(
            "kbatch_task_scheduling_latency_milliseconds",
            "From a pod's creation to its bind",
            buckets=TASK_MS_BUCKETS,
            registry=r,
        )
        self.attempts = Counter(
            "kbatch_schedule_attempts", "Tasks tried, by result", ["result"], registry=r
        )
        self.victims = Gauge(
            "kbatch_pod_preemption_victims", "Victims chosen in the last session", registry=r
        )
        self.preemption_attempts = Gauge(
            "kbatch_total_preemption_attempts", "Preemption attempts so far", registry=r
        )
        self.unschedulable_tasks = Gauge(
            "kbatch_unschedule_task_count", "Unschedulable tasks of a job", ["job_id"], registry=r
        )
        self.unschedulable_jobs = Gauge(
            "kbatch_unschedule_job_count", "Jobs that could not be scheduled", registry=r
        )
        self.job_retries = Gauge(
            "kbatch_job_retry_counts",
            "Sessions in which a job stayed unschedulable",
            ["job_id"],
            registry=r,
        )
        self._declare_queue_metrics(r)
        # Written by the ETA publisher (kbatch.visibility.publisher), not by the sessions.
        self.estimated_start = Gauge(
            "kbatch_podgroup_estimated_start_seconds",
            "When a waiting PodGroup is estimated to start (seconds since the epoch)",
            ["namespace", "name", "queue", "confidence"],
            registry=r,
        )
        self._estimated: set[tuple[str, ...]] = set()
        # label sets set by the last session, and by this one so far, per labelled gauge
        self._series: dict[Gauge, set[tuple[str, ...]]] = {}
        self._setting: dict[Gauge, set[tuple[str, ...]]] = {}
        self._retried: set[str] = set()  # job ids with a kbatch_job_retry_counts series
        self._waited: set[str] = set()  # queues with a kbatch_podgroup_wait_seconds series

    def _declare_queue_metrics(self, r: CollectorRegistry) -> None:
        """Each queue's resources, share, weight and PodGroups, and how long its jobs wait."""
        self.queue_resources = {
            (kind, unit): Gauge(
                f"kbatch_queue_{kind}_{unit}",
                f"Queue {kind} ({unit.replace('_', ' ')})",
                ["queue_name", "parent"] + (["resource"] if unit == "scalar_resources" else []),
                registry=r,
            )
            for kind in RESOURCE_KINDS
            for unit in ("milli_cpu", "memory_bytes", "scalar_resources")
        }
        self.queue_share = Gauge(
            "kbatch_queue_share", "Allocated/deserved", ["queue_name", "parent"], registry=r
        )
        self.queue_weight = Gauge(
            "kbatch_queue_weight", "Queue weight", ["queue_name", "parent"], registry=r
        )
        # Each queue's place in the tree (DESIGN §14): 1, labelled with its parent (root for a
        # top-level queue). The other queue gauges carry ``parent`` too ("" for a top-level
        # queue), so a subtree is ``{parent="team-a"} or {queue_name="team-a"}``; this one
        # lists the tree alone. A queue's series are its subtree's.
        self.queue_parent = Gauge(
            "kbatch_queue_parent",
            "1, labelled with the queue's parent in the queue tree (root: top level)",
            ["queue_name", "parent"],
            registry=r,
        )
        self.queue_overused = Gauge(
            "kbatch_queue_overused",
            "1 if the queue holds more than it deserves",
            ["queue_name", "parent"],
            registry=r,
        )
        # Where a job stands in line is not a metric (one series per job): the CLI computes
        # it (kbatch jobs). How long jobs wait, per queue, is.
        self.pod_group_wait = Histogram(
            "kbatch_podgroup_wait_seconds",
            "From a PodGroup's creation to its start (phase Running), by queue",
            ["queue_name"],
            buckets=WAIT_BUCKETS,
            registry=r,
        )
        self.queue_groups = {
            phase: Gauge(
                f"kbatch_queue_pod_group_{name}_count",
                f"PodGroups {name} in the queue",
                ["queue_name", "parent"],
                registry=r,
            )
            for phase, name in PHASES.items()
        }

    def _labelled_gauges(self) -> list[Gauge]:
        return [
            *self.queue_resources.values(),
            *self.queue_groups.values(),
            self.queue_share,
            self.queue_weight,
            self.queue_parent,
            self.queue_overused,
            self.unschedulable_tasks,
        ]

    def _set(self, gauge: Gauge, labels: tuple[str, ...], value: float) -> None:
        gauge.labels(*labels).set(value)
        self._setting.setdefault(gauge, set()).add(labels)

    def _remove_unset(self) -> None:
        """Remove what the last session set and this one did not."""
        for gauge in self._labelled_gauges():
            now = self._setting.pop(gauge, set())
            for labels in self._series.get(gauge, set()) - now:
                with contextlib.suppress(KeyError):
                    gauge.remove(*labels)
            self._series[gauge] = now

    def record(self, session: Session) -> None:
        """Fold one closed session into the metrics."""
        stats = session.stats
        self.e2e.observe(stats.e2e_seconds * 1000)
        for action, seconds in stats.action_seconds.items():
            self.action.labels(action=action).observe(seconds * 1000)
        for plugin, seconds in stats.plugin_open_seconds.items():
            self.plugin.labels(plugin=plugin, OnSession="OnSessionOpen").observe(seconds * 1000)
        for plugin, seconds in stats.plugin_close_seconds.items():
            self.plugin.labels(plugin=plugin, OnSession="OnSessionClose").observe(seconds * 1000)
        for latency in stats.task_latencies:
            self.task.observe(latency * 1000)
        for result, count in stats.attempts.items():
            self.attempts.labels(result=result).inc(count)
        self.victims.set(stats.preemption_victims)
        self.preemption_attempts.inc(stats.preemption_attempts)
        self._record_jobs(session)
        self._record_waits(session)
        self._record_queues(session)
        self._remove_unset()

    def record_estimates(self, estimates: dict[tuple[str, str, str, str], float]) -> None:
        """The ETA publisher's estimates, by (namespace, name, queue, confidence): these
        series, and none of the last round's others."""
        for labels in self._estimated - estimates.keys():
            with contextlib.suppress(KeyError):
                self.estimated_start.remove(*labels)
        for labels, value in estimates.items():
            self.estimated_start.labels(*labels).set(value)
        self._estimated = set(estimates)

    def forget_cluster_state(self) -> None:
        """Drop the gauges that describe the cluster (queues, unschedulable jobs): a replica
        that stopped scheduling must not keep exporting what it saw last."""
        for gauge in self._labelled_gauges():
            gauge.clear()
        self.pod_group_wait.clear()  # the leader's to tell; a reset is what rate() expects
        self._waited.clear()
        self._series.clear()
        self._setting.clear()
        self.unschedulable_jobs.set(0)

    def _record_jobs(self, session: Session) -> None:
        unschedulable = 0
        for job in session.jobs.values():
            pending = job.counts[TaskStatus.PENDING]
            if pending and session.unschedulable(job):
                unschedulable += 1
                self._set(self.unschedulable_tasks, (job.uid,), pending)
                self.job_retries.labels(job_id=job.uid).inc()
                self._retried.add(job.uid)
        self.unschedulable_jobs.set(unschedulable)
        for gone in self._retried - session.jobs.keys():
            with contextlib.suppress(KeyError):
                self.job_retries.remove(gone)
        self._retried &= session.jobs.keys()

    def _record_waits(self, session: Session) -> None:
        """A PodGroup that this session started (its status moves from Pending or Inqueue
        to Running, or straight to Completed) waited from its creation until now. Once
        only: the next session sees it Running already, and so does a new leader."""
        for update in session.outcome.pod_groups:
            job = session.jobs.get(f"{update.namespace}/{update.name}")
            if job is None or update.status.phase not in STARTED:
                continue
            was = job.old_status.phase if job.old_status is not None else PodGroupPhase.PENDING
            if was in NOT_STARTED:
                wait = max(session.now - job.created, 0.0)
                self.pod_group_wait.labels(queue_name=job.queue).observe(wait)
                self._waited.add(job.queue)
        for gone in self._waited - session.queues.keys():
            with contextlib.suppress(KeyError):
                self.pod_group_wait.remove(gone)
        self._waited &= session.queues.keys()

    def _record_queues(self, session: Session) -> None:
        groups: dict[str, dict[PodGroupPhase, int]] = {q: {} for q in session.queues}
        for job in session.jobs.values():
            if job.has_pod_group and job.queue in groups:
                counts = groups[job.queue]
                counts[job.phase] = counts.get(job.phase, 0) + 1
        for name, queue in session.queues.items():
            labels = (name, queue.parent or "")
            vectors = {
                "allocated": queue.allocated,
                "request": queue.request,
                "deserved": queue.deserved,
                "capability": queue.capability,
            }
            for kind, vector in vectors.items():
                self._set_resources(kind, labels, session.dims, vector)
            self._set(self.queue_share, labels, queue.share)
            self._set(self.queue_weight, labels, queue.weight)
            self._set(self.queue_parent, (name, queue.parent or ROOT_QUEUE), 1)
            self._set(self.queue_overused, labels, 1 if session.overused(queue) else 0)
            for phase, gauge in self.queue_groups.items():
                self._set(gauge, labels, groups[name].get(phase, 0))

    def _set_resources(self, kind: str, queue: tuple[str, str], dims: Dims, vector: object) -> None:
        """``queue``: its labels, (its name, its parent's or "")."""
        if vector is None:
            return
        for i, resource in enumerate(dims.names):
            value = float(vector[i])  # type: ignore[index]
            if value == float("inf"):
                continue
            if resource == "cpu":
                self._set(self.queue_resources[(kind, "milli_cpu")], queue, value)
            elif resource == "memory":
                self._set(self.queue_resources[(kind, "memory_bytes")], queue, value)
            elif resource != "pods":
                gauge = self.queue_resources[(kind, "scalar_resources")]
                self._set(gauge, (*queue, resource), value)


def exported_names(metrics: SchedulerMetrics) -> set[str]:
    """Every sample name the registry can expose (for dashboard checks)."""
    names = set()
    for family in metrics.registry.collect():
        names.add(family.name)
        for sample in family.samples:
            names.add(sample.name)
    return names
