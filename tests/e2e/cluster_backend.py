"""Scenario files through a real cluster: a backend for tests/scenarios/runner.py.

    backend = ClusterBackend(api, scheduler)          # a running ``kbatch run``
    outcome = run("seed-gang-job.yaml", backend=backend)

``backend(paths, until=None, config=None)`` returns DESIGN §5's JSON, read back
from the API server, so the simulator's checks apply unchanged. One scenario:

1. *Hold*: the backend takes the scheduler's leader Lease, so ``kbatch run``
   schedules nothing, and waits until its /healthz says it no longer leads (and no
   session is under way). It
   deletes what the previous scenario made (Jobs, Pods with grace 0, PodGroups,
   Events in its namespaces; its Nodes, Queues, PriorityClasses, Namespaces)
   and waits until they are gone.
2. The scheduler conf (``--config``, the annotated ConfigMap, or the default) is
   written to the file ``kbatch run`` reloads. The loop reads it at the start of
   every session, and none runs while held: the first session uses it.
3. The objects due at 0 are created (Nodes with their status through the status
   subresource), and the Job controller's pods awaited.
4. *Release*: the Lease is given up; ``kbatch run`` takes the lead, lists
   everything afresh and opens a session on all of it at once, as the
   simulator's first session sees everything due at 0. Time 0 is that first
   session (seen on /metrics); an object due at ``s`` is created half a period
   before session ``s``.
5. The outcome has settled when nothing changed for ``SETTLE_PERIODS`` periods
   after the last submission, and no pod is bound-but-Pending, Terminating, or
   Running with a ``kbatch.io/sim-duration`` (it will finish).
6. Read back: pods (live ones, and those deleted during the run, as the
   simulator lists its removed pods: node null, phase Failed unless finished),
   PodGroups, Queues, Events. An event's time is the session it came from: its
   ``eventTime`` (kbatch stamps the moment the session decided: a bind's event is
   written later, after the binds) in seconds since time 0, rounded to the period;
   time 0 is when the first session began (seen on /metrics, less its duration).
   An event without an eventTime counts from when it was received.
   Summary: sessions from /metrics (the same scrape as ``last_scrape``), binds and
   evictions counted from events.
7. Hold again and clean up, so that between scenarios the cluster is bare and
   ``kbatch run`` idle (other tests may run their own schedulers meanwhile).

Why hold rather than apply to a running scheduler: a session could fall between
two creations (the seed-priority race: ``low`` bound before ``high`` exists).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from e2e.kubelet import DURATION, Watch, parse_time, rfc3339
from kbatch.api import GROUP, VERSION
from kbatch.config import DEFAULT_CONF
from kbatch.kubeapi import ApiError, request
from kbatch.operators.scheduler.core import runner as scheduler_runner
from kbatch.sim import clock, manifests, output

Json = dict[str, Any]
GROUP_NAME = "scheduling.k8s.io/group-name"
SESSIONS = "kbatch_e2e_scheduling_latency_milliseconds_count"
SESSION_MS = "kbatch_e2e_scheduling_latency_milliseconds_sum"
HOLDER = "e2e-scenario-backend"
SETTLE_PERIODS = 3
SETTLE_DEADLINE = 90.0
GONE_DEADLINE = 60.0
MERGE = "application/merge-patch+json"

CRD_BASE = f"/apis/{GROUP}/{VERSION}"
CLUSTER_PATHS = {
    "Namespace": "/api/v1/namespaces",
    "Node": "/api/v1/nodes",
    "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
    "Queue": f"{CRD_BASE}/queues",
}
NAMESPACED_PATHS = {  # the collection in a namespace; cleaned up in this order
    "Job": "/apis/batch/v1/namespaces/{ns}/jobs",
    "Pod": "/api/v1/namespaces/{ns}/pods",
    "PodGroup": CRD_BASE + "/namespaces/{ns}/podgroups",
    "ResourceQuota": "/api/v1/namespaces/{ns}/resourcequotas",
}


@dataclass(frozen=True)
class Scheduler:
    """What the backend needs of a running ``kbatch run``."""

    metrics_url: str
    conf_path: Path
    period: float
    lock_namespace: str
    lease_name: str = "kbatch"
    health_url: str = ""  # /healthz, which says whether it leads


def scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def metrics(url: str) -> dict[str, float]:
    """Every sample on a /metrics page, keyed ``name{label="v",...}`` (no labels: ``name``)."""
    return samples_of(scrape(url))


def samples_of(text: str) -> dict[str, float]:
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def sessions(scheduler: Scheduler) -> int:
    return int(metrics(scheduler.metrics_url).get(SESSIONS, 0))


def collection(kind: str, namespace: str = "") -> str:
    if kind in CLUSTER_PATHS:
        return CLUSTER_PATHS[kind]
    return NAMESPACED_PATHS[kind].format(ns=namespace)


def poll(what: str, done: Any, timeout: float, interval: float = 0.1) -> Any:
    """Call ``done()`` until it returns something truthy; AssertionError after ``timeout``.
    An OSError from ``done`` (a refused connection, an HTTP 503 from a replica still
    starting) means "not yet"; the last one is reported on timeout."""
    deadline = time.monotonic() + timeout
    last_error: OSError | None = None
    while True:
        try:
            value = done()
        except OSError as exc:  # urllib's URLError and HTTPError are OSErrors
            value, last_error = None, exc
        if value:
            return value
        if time.monotonic() > deadline:
            why = f" (last error: {last_error})" if last_error is not None else ""
            raise AssertionError(f"e2e: {what}: not after {timeout:.0f}s{why}")
        time.sleep(interval)


def health(url: str) -> dict[str, Any]:
    """GET /healthz: {"leader": bool, "synced": bool, "sessions": int}."""
    with urllib.request.urlopen(url, timeout=5) as response:
        return dict(json.loads(response.read()))


class Unsettled(AssertionError):
    pass


# --------------------------------------------------------------------------- recorder
class Recorder:
    """Watches pods, events, PodGroups and Queues from a scenario's start: when each
    event arrived, which pods were deleted, when anything last changed."""

    def __init__(self, api: Any, namespaces: set[str]) -> None:
        self.namespaces = namespaces
        self.started_wall = time.time()
        self.last_change = time.monotonic()
        self.lock = threading.Lock()
        self.events: dict[str, tuple[float, Json]] = {}  # uid -> (first seen, latest)
        self.removed: dict[str, Json] = {}  # pod uid -> its last state
        self.pods = Watch(api, "/api/v1/pods", self._on_pod, "e2e-recorder-pods")
        self.watches = [
            self.pods,
            Watch(api, "/api/v1/events", self._on_event, "e2e-recorder-events"),
            Watch(api, f"{CRD_BASE}/podgroups", self._on_change, "e2e-recorder-podgroups"),
            Watch(api, f"{CRD_BASE}/queues", self._on_change, "e2e-recorder-queues"),
        ]

    def start(self) -> Recorder:
        for watch in self.watches:
            watch.start()
        for watch in self.watches:
            watch.wait_synced()
        return self

    def stop(self) -> None:
        for watch in self.watches:
            watch.stop()

    def _mine(self, obj: Json) -> bool:
        return (obj["metadata"].get("namespace") or "") in self.namespaces

    def touch(self) -> None:
        """Something changed now (also: the backend submitted something)."""
        with self.lock:
            self.last_change = time.monotonic()

    def _on_change(self, kind: str, obj: Json) -> None:
        if obj["metadata"].get("namespace") is None or self._mine(obj):
            self.touch()

    def _on_pod(self, kind: str, pod: Json) -> None:
        if not self._mine(pod):
            return
        if kind == "DELETED":
            with self.lock:
                self.removed[pod["metadata"]["uid"]] = pod
        self.touch()

    def _on_event(self, kind: str, event: Json) -> None:
        if kind == "DELETED" or not self._mine(event):
            return
        created = event["metadata"].get("creationTimestamp") or ""
        if created and created < rfc3339(self.started_wall - 1):
            return  # left over from before this scenario
        with self.lock:
            first = self.events.get(event["metadata"]["uid"], (time.monotonic(), event))[0]
            self.events[event["metadata"]["uid"]] = (first, event)
        self.touch()

    def live_pods(self) -> list[Json]:
        with self.pods.lock:
            return [p for p in self.pods.objects.values() if self._mine(p)]

    def unsettled_pods(self) -> list[str]:
        """Pods a kubelet has yet to act on: bound but Pending, Terminating, or
        Running with a duration (they will finish)."""
        out = []
        for pod in self.live_pods():
            meta, phase = pod["metadata"], (pod.get("status") or {}).get("phase")
            if meta.get("deletionTimestamp"):
                out.append(f"{meta['name']} (Terminating)")
            elif (pod.get("spec") or {}).get("nodeName") and phase in (None, "Pending"):
                out.append(f"{meta['name']} (bound, Pending)")
            elif phase == "Running" and DURATION in (meta.get("annotations") or {}):
                out.append(f"{meta['name']} (Running for {meta['annotations'][DURATION]})")
        return out


# --------------------------------------------------------------------------- backend
@dataclass
class ClusterBackend:
    api: Any
    scheduler: Scheduler
    settle_periods: int = SETTLE_PERIODS
    settle_deadline: float = SETTLE_DEADLINE
    # what the last scenario made, for the next clean-up
    _namespaces: set[str] = field(default_factory=set)
    _cluster_objects: list[tuple[str, str]] = field(default_factory=list)
    _held: bool = False  # the lease is ours and kbatch run has been seen to stop
    last_scrape: str = ""  # /metrics at the last read-back
    last_metrics: dict[str, float] = field(default_factory=dict)  # its samples
    last_pods: list[Json] = field(default_factory=list)  # the pods as read back
    # /metrics just before the scheduler took the last scenario on: kbatch run serves
    # the whole e2e session, so its counters count earlier scenarios too
    metrics_before: dict[str, float] = field(default_factory=dict)

    def __call__(self, paths: Sequence[Path], **options: Any) -> Json:
        return self.run(paths, **options)

    # ------------------------------------------------------------------ a scenario
    def run(
        self,
        paths: Sequence[Path],
        until: str | float | None = None,
        config: str | Path | None = None,
        period: str | float | None = None,
    ) -> Json:
        loaded = manifests.load_files(list(paths))
        conf = self._conf_text(loaded, config)
        self._check_period(period)
        self.hold()
        self.clean_up()
        namespaces = {"default"} | {
            m.namespace or m.name for m in loaded.objects if m.namespace or m.kind == "Namespace"
        }
        self._namespaces = set(namespaces)
        self.scheduler.conf_path.write_text(conf, encoding="utf-8")
        recorder = Recorder(self.api, namespaces).start()
        try:
            due = sorted(loaded.objects, key=lambda m: (m.submit_at, m.order))
            for item in (m for m in due if m.submit_at <= 0):
                self.apply(item.obj)
            self._await_job_pods(recorder, [m.obj for m in due if m.submit_at <= 0])
            before = metrics(self.scheduler.metrics_url)
            self.metrics_before = before
            self.release()
            first = poll(
                "the scheduler's first session",
                lambda: _later_session(self.scheduler, before),
                30,
                0.02,
            )
            start = time.monotonic()
            start_wall = time.time() - (first.get(SESSION_MS, 0) - before.get(SESSION_MS, 0)) / 1e3
            recorder.touch()
            period = self.scheduler.period
            for item in (m for m in due if m.submit_at > 0):
                wait = start + item.submit_at - period / 2 - time.monotonic()
                if wait > 0:
                    time.sleep(wait)  # a point in scenario time, not a condition
                self.apply(item.obj)
                recorder.touch()  # settled counts from here, not from when its watch event comes
            if until is not None:
                end = start + clock.parse_duration(str(until), "until")
                time.sleep(max(end - time.monotonic(), 0.0))
            else:
                self._settle(recorder)
            result = self.read_back(recorder, start, start_wall, int(before.get(SESSIONS, 0)))
        finally:
            recorder.stop()
            self.hold()
            self.clean_up()
        return result

    def _conf_text(self, loaded: manifests.Manifests, config: str | Path | None) -> str:
        if config is not None:
            text, source = Path(config).read_text(encoding="utf-8"), str(config)
        elif loaded.scheduler_conf is not None:
            text, source = loaded.scheduler_conf
        else:
            text, source = DEFAULT_CONF, "<default scheduler conf>"
        scheduler_runner.load_conf(text, source)  # kbatch run would keep its last good one
        return text

    def _check_period(self, period: str | float | None) -> None:
        if period is None:
            return
        seconds = clock.parse_duration(str(period), "period")
        if abs(seconds - self.scheduler.period) > 1e-9:
            raise ValueError(
                f"the cluster's scheduler runs with period {self.scheduler.period}s, not {seconds}s"
            )

    def _settle(self, recorder: Recorder) -> None:
        quiet = self.settle_periods * self.scheduler.period
        deadline = time.monotonic() + self.settle_deadline
        while True:
            busy = recorder.unsettled_pods()
            since = time.monotonic() - recorder.last_change
            if not busy and since >= quiet:
                return
            if time.monotonic() > deadline:
                raise Unsettled(
                    f"e2e: the scenario did not settle in {self.settle_deadline:.0f}s: "
                    f"last change {since:.1f}s ago; pods: {', '.join(busy) or 'none pending'}"
                )
            time.sleep(0.1)

    def _await_job_pods(self, recorder: Recorder, objects: list[Json]) -> None:
        """The Job controller has made the pods of every Job created so far."""
        wanted = {}
        for obj in objects:
            if obj["kind"] == "Job":
                spec = obj.get("spec") or {}
                parallelism = spec.get("parallelism", 1)
                wanted[(obj["metadata"]["namespace"], obj["metadata"]["name"])] = min(
                    parallelism, spec.get("completions", parallelism)
                )

        def made() -> bool:
            counts: dict[tuple[str, str], int] = {}
            for pod in recorder.live_pods():
                job = (pod["metadata"].get("labels") or {}).get("job-name")
                key = (pod["metadata"]["namespace"], job or "")
                counts[key] = counts.get(key, 0) + 1
            return all(counts.get(key, 0) >= n for key, n in wanted.items())

        poll("the Job controller's pods", made, 30)

    # ------------------------------------------------------------------ the lease
    def _lease_path(self) -> str:
        s = self.scheduler
        return f"/apis/coordination.k8s.io/v1/namespaces/{s.lock_namespace}/leases/{s.lease_name}"

    def _write_lease(self, holder: str, duration: int, renew: float) -> None:
        s = self.scheduler
        spec = {
            "holderIdentity": holder,
            "leaseDurationSeconds": duration,
            "renewTime": rfc3339(renew).replace("Z", ".000000Z"),
        }
        while True:
            try:
                lease = request(self.api, "GET", self._lease_path())
            except ApiError as exc:
                if exc.status != 404:
                    raise
                body = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": s.lease_name, "namespace": s.lock_namespace},
                    "spec": spec,
                }
                path = f"/apis/coordination.k8s.io/v1/namespaces/{s.lock_namespace}/leases"
                method = "POST"
            else:
                lease["spec"].update(spec)
                body, path, method = lease, self._lease_path(), "PUT"
            try:
                request(self.api, method, path, body)
                return
            except ApiError as exc:
                if exc.status != 409:
                    raise  # 409: the scheduler renewed meanwhile; read again

    def take_lease(self) -> None:
        """Hold the lead (before ``kbatch run`` starts: it then never schedules unasked)."""
        self._write_lease(HOLDER, 3600, time.time())

    def hold(self) -> None:
        """Take the lead from ``kbatch run`` and wait until it has stopped scheduling."""
        if self._held:
            return
        if not self.scheduler.health_url:
            raise ValueError("ClusterBackend.hold: the Scheduler has no health_url")
        self.take_lease()
        # The elector reads the Lease every lease/5 s; then /healthz says it follows. A
        # session under way when it stepped down ends within a period: the count then
        # stays the same over one.
        seen: list[tuple[int, float]] = []

        def stopped() -> bool:
            said = health(self.scheduler.health_url)
            if said["leader"]:
                seen.clear()
                return False
            if not seen or seen[-1][0] != said["sessions"]:
                seen[:] = [(said["sessions"], time.monotonic())]
            return time.monotonic() - seen[-1][1] >= self.scheduler.period

        poll("kbatch run stepping down (/healthz leader false)", stopped, 60)
        self._held = True

    def release(self) -> None:
        self._held = False
        self._write_lease("", 1, 0.0)

    # ------------------------------------------------------------------ objects
    def apply(self, obj: Json) -> None:
        kind, meta = obj["kind"], obj["metadata"]
        body = {k: v for k, v in obj.items() if k != "status"}
        meta = {k: v for k, v in meta.items() if k not in ("resourceVersion", "uid")}
        body["metadata"] = meta
        path = collection(kind, meta.get("namespace", ""))
        if kind in CLUSTER_PATHS:
            self._cluster_objects.append((kind, meta["name"]))
        else:
            self._ensure_namespace(meta["namespace"])
        try:
            request(self.api, "POST", path, body)
        except ApiError as exc:
            if exc.status == 409 and kind == "Queue" and meta["name"] == "default":
                request(self.api, "PATCH", f"{path}/default", {"spec": obj.get("spec")}, MERGE)
            elif not (exc.status == 409 and kind == "Namespace"):
                raise ApiError(exc.status, f"creating {kind} {meta['name']}: {exc}") from exc
        status = obj.get("status")
        if kind == "Node":
            status = _node_status(status or {})
        if status and kind in ("Node", "PodGroup", "Queue"):
            request(self.api, "PATCH", f"{path}/{meta['name']}/status", {"status": status}, MERGE)

    def _ensure_namespace(self, namespace: str) -> None:
        try:
            request(self.api, "GET", f"/api/v1/namespaces/{namespace}")
        except ApiError as exc:
            if exc.status != 404:
                raise
            self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})

    def clean_up(self) -> None:
        """Delete what the last scenario made and wait until it is gone."""
        for ns in sorted(self._namespaces):
            request(self.api, "DELETE", collection("Job", ns), {"propagationPolicy": "Background"})
        deadline = time.monotonic() + GONE_DEADLINE
        while self._left_over():
            if time.monotonic() > deadline:
                raise AssertionError(f"e2e: clean-up: still there: {self._left_over()}")
            for ns in sorted(self._namespaces):
                for kind in NAMESPACED_PATHS:
                    body = {"gracePeriodSeconds": 0, "propagationPolicy": "Background"}
                    delete(self.api, collection(kind, ns), body)
            for kind, name in self._cluster_objects:
                if name != "default":
                    delete(self.api, f"{collection(kind)}/{name}")
            time.sleep(0.2)
        for ns in sorted(self._namespaces):  # after the scheduler stopped: no event comes later
            request(self.api, "DELETE", f"/api/v1/namespaces/{ns}/events", {})
        self._cluster_objects.clear()

    def _left_over(self) -> list[str]:
        left = []
        for ns in sorted(self._namespaces):
            for kind in NAMESPACED_PATHS:
                try:
                    items = request(self.api, "GET", collection(kind, ns))["items"]
                except ApiError as exc:
                    if exc.status == 404:
                        continue
                    raise
                left += [f"{kind} {ns}/{i['metadata']['name']}" for i in items]
        for kind, name in self._cluster_objects:
            if name != "default" and exists(self.api, f"{collection(kind)}/{name}"):
                left.append(f"{kind} {name}")
        return left

    # ------------------------------------------------------------------ read back
    def read_back(
        self, recorder: Recorder, start: float, start_wall: float, sessions_before: int
    ) -> Json:
        # /metrics as the scheduler saw the scenario, before it hands the lead back (a replica
        # that stops scheduling drops its cluster gauges): one scrape for all of it
        self.last_scrape = scrape(self.scheduler.metrics_url)
        self.last_metrics = samples_of(self.last_scrape)
        period = self.scheduler.period

        def at(moment: float) -> float:
            return max(0.0, round((moment - start) / period) * period)

        with recorder.lock:
            received = sorted(recorder.events.values(), key=lambda pair: pair[0])
            removed = dict(recorder.removed)
        events = [
            {
                "time": event_time(e, seen - start, start_wall, period),
                "kind": e["involvedObject"].get("kind"),
                "namespace": e["involvedObject"].get("namespace") or e["metadata"]["namespace"],
                "name": e["involvedObject"].get("name"),
                "type": e.get("type"),
                "reason": e.get("reason"),
                "message": e.get("message", ""),
            }
            for seen, e in received
        ]
        evictions: dict[tuple[str, str], int] = {}
        for e in events:
            if e["kind"] == "Pod" and e["reason"] == "Evict":
                key = (e["namespace"], e["name"])
                evictions[key] = evictions.get(key, 0) + 1
        live = [p for ns in recorder.namespaces for p in self._list(collection("Pod", ns))]
        self.last_pods = live
        live_uids = {p["metadata"]["uid"] for p in live}
        pods = [_pod_row(p, False, evictions) for p in live] + [
            _pod_row(p, True, evictions) for uid, p in removed.items() if uid not in live_uids
        ]
        groups = [g for ns in recorder.namespaces for g in self._list(collection("PodGroup", ns))]
        scheduled = sum(1 for e in events if e["kind"] == "Pod" and e["reason"] == "Scheduled")
        return {
            "time": at(time.monotonic()),
            "pods": sorted(pods, key=lambda r: (r["namespace"], r["name"])),
            "podGroups": sorted(
                map(output.pod_group_row, groups), key=lambda r: (r["namespace"], r["name"])
            ),
            "queues": sorted(map(output.queue_row, self._list(collection("Queue"))), key=_by_name),
            "events": events,
            "summary": {
                "sessions": int(self.last_metrics.get(SESSIONS, 0)) - sessions_before,
                "binds": scheduled,
                "evictions": sum(evictions.values()),
            },
        }

    def _list(self, path: str) -> list[Json]:
        try:
            return list(request(self.api, "GET", path)["items"])
        except ApiError as exc:
            if exc.status == 404:
                return []
            raise


def _later_session(scheduler: Scheduler, before: dict[str, float]) -> dict[str, float] | None:
    """/metrics once a session has run since ``before`` was scraped."""
    now = metrics(scheduler.metrics_url)
    return now if now.get(SESSIONS, 0) > before.get(SESSIONS, 0) else None


def event_time(event: Json, received: float, start_wall: float, period: float) -> float:
    """The session an event came from, in seconds since time 0: its eventTime (when kbatch
    decided) if it has one, else ``received`` (seconds since time 0), to the period."""
    stamped = parse_time(event.get("eventTime"))
    since = received if stamped is None else stamped - start_wall
    return max(0.0, round(since / period) * period)


def _by_name(row: Json) -> str:
    return str(row["name"])


def _pod_row(pod: Json, removed: bool, evictions: dict[tuple[str, str], int]) -> Json:
    meta, status = pod["metadata"], pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    if removed and phase not in ("Succeeded", "Failed"):
        phase = "Failed"
    return {
        "namespace": meta["namespace"],
        "name": meta["name"],
        "node": None if removed else ((pod.get("spec") or {}).get("nodeName") or None),
        "phase": phase,
        "podGroup": (meta.get("annotations") or {}).get(GROUP_NAME) or None,
        "evictions": evictions.get((meta["namespace"], meta["name"]), 0),
        **output.role_field(pod),
    }


def _node_status(status: Json) -> Json:
    """A manifest's node status made whole: capacity defaults to allocatable; Ready by default."""
    out = dict(status)
    if "allocatable" in out:
        out.setdefault("capacity", out["allocatable"])
    now = rfc3339()
    out["conditions"] = [
        {"lastHeartbeatTime": now, "lastTransitionTime": now, "reason": "E2E", **c}
        for c in out.get("conditions") or [{"type": "Ready", "status": "True"}]
    ]
    return out


def exists(api: Any, path: str) -> bool:
    try:
        request(api, "GET", path)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def delete(api: Any, path: str, body: Json | None = None) -> None:
    """DELETE, not minding what is gone already."""
    try:
        request(api, "DELETE", path, body)
    except ApiError as exc:
        if exc.status not in (404, 409):
            raise
