"""``kbatch run``: the scheduler, the PodGroup, Queue and held-Job controllers and the
admission webhooks in one kopf process.

All kopf setup is assembled here, in one registry built by ``build_registry``: each
controller module registers its own handlers (``register(registry, runtime)``), none
by import side effects. ``run`` starts the watches, the leader election, the
scheduling loop and the health and metrics servers, and starts kopf once the first
session has ended (``Runtime.wait_before_kopf``); kopf's cleanup stops them. The
watches run on every replica, so a replica that takes the lead has warm caches; it
still relists everything before its first session (a fresh view from the API,
nothing assumed from before).

kopf, the controllers and the webhooks are imported only then too (``build_registry``):
their loading (half a second of the interpreter) does not compete with the parsing of a
large backlog's lists and the first session.
"""

import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from prometheus_client import start_http_server

from kbatch import kubeapi
from kbatch.api import DEFAULT_SCHEDULER_NAMES
from kbatch.cluster.state import ClusterState
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.queue import controller as queues
from kbatch.operators.scheduler.runtime.collector_schedule import CollectorSchedule
from kbatch.operators.scheduler.runtime.health import HealthServer
from kbatch.operators.scheduler.runtime.informer import Watches
from kbatch.operators.scheduler.runtime.kube_backend import KubeBackend
from kbatch.operators.scheduler.runtime.leader import LeaseElector
from kbatch.operators.scheduler.runtime.loop import ConfSource, SchedulerLoop
from kbatch.record.store.recorder import Recorder

if TYPE_CHECKING:
    import kopf

log = logging.getLogger("kbatch.operator")

# How long ``run`` waits for the first session before it starts kopf (``Runtime.
# wait_before_kopf``): past it kopf starts anyway.
KOPF_WAITS_AT_MOST = 30.0


@dataclass(frozen=True)
class RunSettings:
    """What ``kbatch run`` is told (see ``kbatch run --help``)."""

    kubeconfig: str | None = None
    scheduler_conf: Path | None = None
    period: float = 1.0
    scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES)
    metrics_address: str | None = "0.0.0.0:8080"
    health_address: str | None = "0.0.0.0:8081"
    leader_elect: bool = True
    lock_namespace: str = field(
        default_factory=lambda: os.environ.get("POD_NAMESPACE", "kube-system")
    )
    lease_seconds: int = 15
    # Admission webhooks (webhooks/README.md): no server when webhook_address is "".
    webhook_address: str = ""
    webhook_cert_dir: Path | None = None
    webhook_host: str | None = None
    manage_webhooks: bool = False


def connection_info(configuration: kubeapi.Configuration) -> "kopf.ConnectionInfo":
    """kopf's credentials from the kubernetes client's configuration."""
    import kopf

    header = configuration.get_api_key_with_prefix("BearerToken") or ""
    scheme, _, token = header.partition(" ") if " " in header else ("", "", header)
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        scheme=scheme or None,
        token=token or None,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )


class Background(Protocol):
    """A worker the process runs beside the scheduling loop (the ETA publisher): started
    after the loop, stopped before it."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class Runtime:
    """Everything ``kbatch run`` starts besides kopf itself."""

    def __init__(
        self,
        settings: RunSettings,
        watches: Watches | None = None,
        recorder: Recorder | None = None,
        background: Sequence[Callable[["Runtime"], Background]] = (),
    ) -> None:
        """``watches``: started already (``start_watches``), or made here. ``recorder``:
        the flight recorder its state already tells (``kbatch run --record``), if any;
        ``background``: makers of the workers to run beside the loop, each handed this
        runtime."""
        self.settings = settings
        self.conf = ConfSource(settings.scheduler_conf)  # a bad file fails here, at start
        if watches is None:
            watches = Watches(kubeapi.api_client(settings.kubeconfig), settings.scheduler_names)
        self.watches = watches
        self.api = watches.api
        self.state: ClusterState = watches.state
        self.elector: LeaseElector | None = None
        # binds and evictions check the lead as they are sent: none after it is lost
        self.cluster = KubeBackend(
            self.api, self.state, may_write=self.leads, upstream=watches.upstream
        )
        self.metrics = SchedulerMetrics()
        self.informers = watches.informers
        watches.on_synced = self._caches_synced
        self.health_server: HealthServer | None = None
        if settings.leader_elect:
            self.elector = LeaseElector(
                self.api,
                settings.lock_namespace,
                lease_seconds=settings.lease_seconds,
                renew_seconds=max(settings.lease_seconds / 5, 0.5),
                on_change=self._lead_changed,
            )
        self.loop = SchedulerLoop(
            self.cluster,
            self.conf,
            settings.period,
            self.metrics,
            self.may_schedule,
            has_work=self.has_work,
            generation=lambda: self.state.generation,
            busy=self.cluster.binds_in_flight,
            recorder=recorder,
            committed_binds=self.cluster.committed,
            collector=CollectorSchedule(),
        )
        self.recorder = recorder
        self.background = [make(self) for make in background]
        self._started = False
        self._stopped = False

    def wait_before_kopf(self, most: float) -> None:
        """Wait until the first session has ended, or this replica is synced and does not
        lead (it runs no session), or the loop has died, or ``most`` seconds. kopf lists
        and handles every PodGroup when it starts: on a restart on a large backlog that
        work would compete for the interpreter with the first session, and delay its
        binds by seconds. Its controllers and webhooks may start that much later."""
        deadline = time.monotonic() + most
        loop = self.loop
        while time.monotonic() < deadline and loop.alive():
            if loop.first_session.wait(0.05) or (self.synced() and not self.leads()):
                return

    def has_work(self) -> bool:
        """Anything for a session, but the PodGroups a session decided whose statuses wait
        for its binds: during a burst, a session a period for them would only decide them
        again, competing with the binds for the interpreter."""
        return self.state.has_work(self.cluster.groups_being_written())

    def leads(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def synced(self) -> bool:
        return all(informer.synced.is_set() for informer in self.informers)

    def may_schedule(self) -> bool:
        return self.leads() and self.synced()

    def _caches_synced(self) -> None:
        """An informer has (re)listed: once all have, the first session need not wait."""
        if self.may_schedule():
            self.loop.wake()

    def _lead_changed(self, leader: bool) -> None:
        if not leader:
            self.metrics.forget_cluster_state()
        if leader:
            for informer in self.informers:
                informer.relist()
            queues.keep_default_queue(self.api, self.leads)

    def webhooks_serving(self) -> None:
        """The default queue may have been refused while kbatch's own Queue webhook did
        not answer yet: make it again now (while this replica leads)."""
        if self.leads():
            queues.keep_default_queue(self.api, self.leads)

    def health(self) -> tuple[bool, bool, dict[str, Any]]:
        """(alive, ready, details) for /healthz and /readyz."""
        synced = self.synced()
        details = {"leader": self.leads(), "synced": synced, "sessions": self.loop.sessions}
        return self.loop.alive(), synced, details

    def start(self) -> None:
        """Start serving health and metrics, the watches, the election, the loop and the
        background workers (once)."""
        if self._started:
            return
        self._started = True
        if self.settings.health_address:
            self.health_server = HealthServer(self.settings.health_address, self.health)
            self.health_server.start()
        if self.settings.metrics_address:
            host, _, port = self.settings.metrics_address.rpartition(":")
            start_http_server(int(port), addr=host or "0.0.0.0", registry=self.metrics.registry)
        self.start_watches()
        if self.elector is not None:
            self.elector.start()
        else:
            queues.keep_default_queue(self.api, self.leads)
        self.loop.start()
        for worker in self.background:
            worker.start()

    def start_watches(self) -> None:
        """Start the informers (once: ``kbatch run`` starts them before it imports this
        module, so that the lists overlap the loading of kopf and the scheduler)."""
        self.watches.start()

    def stop(self) -> None:
        """Stop scheduling, then settle what was sent, and only then give up the Lease: a
        peer that takes it at once must not race binds still queued here. (Once.)"""
        if self._stopped:
            return
        self._stopped = True
        if self.health_server is not None:
            self.health_server.stop()
        for worker in self.background:
            worker.stop()
        self.loop.stop()
        self.cluster.shutdown()
        if self.elector is not None:
            self.elector.stop()
        for informer in self.informers:
            informer.stop()
        if self.recorder is not None:
            self.recorder.close()


def build_registry(runtime: Runtime) -> "kopf.OperatorRegistry":
    """kopf's registry: the process's own hooks, then each controller's handlers (these
    modules, and kopf, first loaded here)."""
    import kopf

    from kbatch.operators.jobs import controller as held_jobs
    from kbatch.operators.jobs import jobsets as held_jobsets
    from kbatch.operators.podgroup import controller as podgroups
    from kbatch.webhooks import jobs as webhook_jobs
    from kbatch.webhooks import server as webhooks

    registry = kopf.OperatorRegistry()

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(runtime.api.configuration)  # the very credentials we use

    @kopf.on.startup(registry=registry)
    def startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False  # our events are our own, not kopf's log lines
        settings.persistence.finalizer = "kbatch.io/finalizer"
        runtime.start()  # (once: ``run`` has started it already)

    @kopf.on.cleanup(registry=registry)
    def cleanup(**_: Any) -> None:
        runtime.stop()

    podgroups.register(registry, runtime)
    queues.register(registry, runtime)
    if runtime.settings.webhook_address:  # with the webhooks only: no Job is held without
        delayed = webhook_jobs.DelayedPodCreation()
        webhooks.register(registry, runtime, delayed)
        held_jobs.register(registry, runtime, delayed)
        held_jobsets.register(registry, runtime, delayed)
    return registry


def run(
    settings: RunSettings,
    watches: Watches | None = None,
    recorder: Recorder | None = None,
    background: Sequence[Callable[[Runtime], Background]] = (),
) -> None:
    """Run until interrupted (with ``watches`` started already, if given; recorded by
    ``recorder``, if given; the ``background`` workers beside the loop)."""
    runtime = Runtime(settings, watches, recorder, background)
    runtime.start()
    try:
        runtime.wait_before_kopf(KOPF_WAITS_AT_MOST)
        registry = build_registry(runtime)
        import kopf

        kopf.run(registry=registry, clusterwide=True, standalone=True)
    finally:
        runtime.stop()
