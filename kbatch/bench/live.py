"""``kbatch bench --live``: kbatch, kube-scheduler and Volcano's scheduler side by side on
one API server with KWOK's fake nodes (``kbatch.bench.live_cluster``).

For each round, each scheduler in turn (the order turned by one each round, so none is
always first): the namespace wiped of every pod and group, the scheduler started and
ready, then the scenario's pods (and groups) created from a pool of 16 client threads
while a watch notes when each pod is first seen bound. A run ends when every pod is
bound or its time is up; then the scheduler's peak memory and CPU seconds are read
from /proc and it is stopped. The API server's ``apiserver_request_total`` by verb,
before and after, gives the requests of the run (everyone's: the benchmark's creates
and KWOK's status writes are the same in every run, the rest is the scheduler's).

Each run prints one JSON line; the end prints the min/median/max table on stderr.
"""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbatch import kubeapi
from kbatch.api import crdgen
from kbatch.bench import live_cluster, live_schedulers
from kbatch.bench import live_workload as workload

WORKERS = 16
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PODS = f"/api/v1/namespaces/{workload.NAMESPACE}/pods"
PARTLY_BOUND_GRACE = 1.0
WATCH_RETRIES = 5
GROUP_APIS = (workload.KBATCH_GROUPS, workload.UPSTREAM_GROUPS, workload.VOLCANO_GROUPS)


@dataclass(frozen=True)
class Options:
    scenario: workload.Scenario
    rounds: int
    schedulers: tuple[str, ...]
    client_qps: float | None
    timeout: float
    pod_seconds: float
    backlog: bool = False
    kbatch_conf: Path | None = None
    volcano_conf: str = "default"  # as live_schedulers.volcano_conf_text takes it
    workdir: Path | None = None


def order(schedulers: Sequence[str], round_number: int) -> list[str]:
    """The schedulers in round ``round_number``'s order: turned by one each round."""
    turn = round_number % len(schedulers)
    return [*schedulers[turn:], *schedulers[:turn]]


def main(options: Options, out: Callable[[str], None] = print) -> int:
    binaries = live_cluster.Binaries.find()
    missing = binaries.missing(("etcd", "kube_apiserver", "kube_controller_manager", "kwok"))
    if missing:
        print(
            f"kbatch bench --live: missing {', '.join(missing)}: build the control plane and "
            "run scripts/provision-bench-peers.sh",
            file=sys.stderr,
        )
        return 2
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="kbatch-bench-live-"))
    print(f"kbatch bench --live: logs in {workdir}", file=sys.stderr)
    lines = []
    with live_cluster.LiveCluster(binaries, workdir, options.pod_seconds) as cluster:
        api = kubeapi.api_client(str(cluster.kubeconfig))
        prepare(api, cluster, options)
        if "volcano" in options.schedulers:
            prepare_volcano(api, binaries)
        for round_number in range(1, options.rounds + 1):
            for name in order(options.schedulers, round_number - 1):
                line = run_one(
                    api, cluster, options, name, round_number, workdir / f"{name}-{round_number}"
                )
                out(json.dumps(line))
                lines.append(line)
    print(workload.table(workload.summary(lines)), file=sys.stderr)
    return 0 if all(not line.get("error") for line in lines) else 1


def prepare(api: Any, cluster: live_cluster.LiveCluster, options: Options) -> None:
    """kbatch's CRDs, the namespace, and the fake nodes, all Ready."""
    for resource in crdgen.RESOURCES:
        ensure(api, CRD_PATH, crdgen.custom_resource_definition(resource))
    ensure(api, "/api/v1/namespaces", {"metadata": {"name": workload.NAMESPACE}})
    with ThreadPoolExecutor(WORKERS) as pool:
        list(
            pool.map(
                lambda i: ensure(api, "/api/v1/nodes", workload.node(i)),
                range(options.scenario.nodes),
            )
        )
    wait("the fake nodes Ready", lambda: ready_nodes(api) >= options.scenario.nodes, 300)


def prepare_volcano(api: Any, binaries: live_cluster.Binaries) -> None:
    """Volcano's CRDs (cached beside its binary) and its default queue, which its
    PodGroups name (vc-scheduler also makes it at its start, but only once its CRD is
    served). Nothing when it is not built: its runs then say so."""
    crds = live_schedulers.volcano_crds(binaries.volcano_scheduler)
    if not crds:
        return
    for crd in crds:
        ensure(api, CRD_PATH, crd)
    queue = {
        "apiVersion": workload.VOLCANO_QUEUES, "kind": "Queue",
        "metadata": {"name": workload.VOLCANO_QUEUE},
        "spec": {"weight": 1, "reclaimable": True},
    }  # fmt: skip
    path = f"/apis/{workload.VOLCANO_QUEUES}/queues"
    wait("Volcano's default queue", lambda: ensured(api, path, queue), 60)
    open_volcano_queue(api, workload.VOLCANO_QUEUE)


def open_volcano_queue(api: Any, name: str) -> None:
    """Mark Volcano's Queue ``name`` Open in its status, as vc-controller-manager's queue
    controller does in a Volcano install: vc-scheduler's proportion plugin allocates
    nothing in a queue whose ``status.state`` is not Open, and this cluster runs no
    vc-controller-manager."""
    path = f"/apis/{workload.VOLCANO_QUEUES}/queues/{name}/status"
    kubeapi.request(api, "PATCH", path, {"status": {"state": "Open"}},
                    content_type="application/merge-patch+json")  # fmt: skip


def ensured(api: Any, path: str, body: dict[str, Any]) -> bool:
    """``ensure``, False (not an error) while ``path`` is not served yet (a CRD just
    made)."""
    try:
        ensure(api, path, body)
    except kubeapi.ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def ensure(api: Any, path: str, body: dict[str, Any]) -> None:
    try:
        kubeapi.request(api, "POST", path, body)
    except kubeapi.ApiError as exc:
        if exc.status != 409:
            raise


def ready_nodes(api: Any) -> int:
    selector = f"{workload.NODE_LABEL}={workload.NODE_LABEL_VALUE}"
    nodes = kubeapi.request(api, "GET", "/api/v1/nodes", query={"labelSelector": selector})
    return sum(
        1
        for n in nodes["items"]
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (n.get("status") or {}).get("conditions") or []
        )
        and (n["status"].get("allocatable") or {}).get("cpu")
    )


def wait(what: str, done: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not within {timeout:.0f}s")
        time.sleep(0.5)


def run_one(
    api: Any,
    cluster: live_cluster.LiveCluster,
    options: Options,
    name: str,
    round_number: int,
    workdir: Path,
) -> dict[str, Any]:
    """One scheduler's run of the scenario on a wiped namespace: its JSON line. With
    ``options.backlog`` the pods are all there before the scheduler starts, and the time
    to all bound counts from its start (a cold start on a backlog)."""
    spec = options.scenario
    workdir.mkdir(parents=True, exist_ok=True)
    wipe(api)
    watch = Watch(api, spec)
    watch.start()
    created = submit(api, spec, name) if options.backlog else {}
    before = request_counts(api)
    launched = time.monotonic()
    try:
        started = live_schedulers.start(
            name, cluster, options.client_qps, workdir, options.kbatch_conf, options.volcano_conf
        )
    except RuntimeError as exc:
        watch.stop()
        return workload.run_line(spec, name, round_number, {}, {}, error=str(exc).splitlines()[0])
    try:
        if not options.backlog:
            before = request_counts(api)
            created = submit(api, spec, name)
        complete = watch.wait(options.timeout)
        peak, cpu = live_schedulers.usage(started.proc.popen.pid)
        after = request_counts(api)
    finally:
        watch.stop()
        started.proc.stop()
    error = watch.failure
    if not complete and error is None:
        error = f"timeout: {len(watch.bound)} of {spec.pods} bound after {options.timeout:.0f}s"
    binds = [
        (t, workload.gang_name(int(p.split("-")[1]) // spec.gang)) for p, t in watch.bound.items()
    ]
    sizes = {workload.gang_name(g): spec.gang for g in range(spec.gangs)}
    partly = workload.max_partly_bound(binds, sizes, PARTLY_BOUND_GRACE) if spec.gang > 1 else 0
    return workload.run_line(
        spec, name, round_number, created, dict(watch.bound),
        since=launched if options.backlog else None,
        peak_rss_bytes=peak, cpu_seconds=None if cpu is None else round(cpu, 2),
        max_partly_bound_pods=partly, partly_bound_grace_seconds=PARTLY_BOUND_GRACE,
        create_seconds=round(max(created.values()) - min(created.values()), 3) if created else None,
        submitted="before the scheduler started" if options.backlog else "while it ran",
        client=started.client,
        conf=conf_of(options, name),
        api_requests={verb: after.get(verb, 0) - before.get(verb, 0) for verb in sorted(after)},
        error=error,
    )  # fmt: skip


def conf_of(options: Options, name: str) -> str:
    """What the JSON line says of scheduler ``name``'s conf."""
    if name == "kbatch" and options.kbatch_conf:
        return str(options.kbatch_conf)
    if name == "volcano" and options.volcano_conf != "default":
        return "kbatch's default" if options.volcano_conf == "kbatch" else options.volcano_conf
    return "default"


def submit(api: Any, spec: workload.Scenario, scheduler: str) -> dict[str, float]:
    """Create the scenario's groups and pods, gang by gang from ``WORKERS`` threads;
    when each pod's create was answered (``time.monotonic``)."""
    created: dict[str, float] = {}

    def gang(index: int) -> None:
        group = workload.group(spec, index, scheduler)
        if group is not None:
            kubeapi.request(api, "POST", group[0], group[1])
        for i in range(index * spec.gang, (index + 1) * spec.gang):
            kubeapi.request(api, "POST", PODS, workload.pod(spec, i, scheduler))
            created[workload.pod_name(i)] = time.monotonic()

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(gang, range(spec.gangs)))
    return created


class Watch(threading.Thread):
    """Watches the namespace's pods: when each was first seen bound; ``done`` is set
    once all ``spec.pods`` are."""

    def __init__(self, api: Any, spec: workload.Scenario) -> None:
        super().__init__(daemon=True)
        self.api, self.spec = api, spec
        self.bound: dict[str, float] = {}
        self.done = threading.Event()
        self.failure: str | None = None
        self._stopping = threading.Event()
        listed = kubeapi.request(api, "GET", PODS, query={"limit": "1"})
        self.version = str(listed["metadata"]["resourceVersion"])

    def stop(self) -> None:
        self._stopping.set()

    def wait(self, timeout: float) -> bool:
        """Until every pod is bound (True), the watch fails, or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while not self.done.wait(0.5):
            if self.failure is not None or time.monotonic() > deadline:
                return False
        return True

    def run(self) -> None:
        cuts = 0
        while not self._stopping.is_set() and not self.done.is_set():
            query = {"watch": "true", "resourceVersion": self.version, "timeoutSeconds": "30",
                     "allowWatchBookmarks": "true"}  # fmt: skip
            try:
                response = kubeapi.raw_get(self.api, PODS, query, None)
            except kubeapi.Gone:  # the version left etcd's window: list again, go on from there
                self._relist()
                continue
            try:
                self._read(response)
                cuts = 0
            except Exception as exc:  # a stream cut short (urllib3's ProtocolError): again
                cuts += 1
                if cuts > WATCH_RETRIES:
                    self.failure = f"the watch of pods failed {cuts} times in a row: {exc}"
                    return
                time.sleep(0.2)
            finally:
                response.release_conn()

    def _relist(self) -> None:
        """Note the pods a list shows bound (late: the watch missed when) and its version."""
        listed = kubeapi.request(self.api, "GET", PODS)
        now = time.monotonic()
        for obj in listed["items"]:
            if obj["spec"].get("nodeName"):
                self.bound.setdefault(obj["metadata"]["name"], now)
        self.version = str(listed["metadata"]["resourceVersion"])
        if len(self.bound) >= self.spec.pods:
            self.done.set()

    def _read(self, response: Any) -> None:
        buffer = b""
        for chunk in response.stream(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                event = json.loads(line)
                if event["type"] == "ERROR":  # e.g. 410: the version is too old
                    self._relist()
                    return
                obj = event["object"]
                self.version = obj["metadata"].get("resourceVersion", self.version)
                if event["type"] in ("ADDED", "MODIFIED") and obj["spec"].get("nodeName"):
                    self.bound.setdefault(obj["metadata"]["name"], time.monotonic())
            if len(self.bound) >= self.spec.pods:
                self.done.set()
            if self.done.is_set() or self._stopping.is_set():
                return


def wipe(api: Any) -> None:
    """Delete every pod and group of the namespace at once and wait until none is left (a
    group still held by a finalizer after 30 s has its finalizers dropped: no controller
    of this cluster may be there to clear them)."""
    groups = [f"/apis/{g}/namespaces/{workload.NAMESPACE}/podgroups" for g in GROUP_APIS]
    for path in [PODS, *groups]:
        delete_all(api, path)
    wait("the namespace's pods deleted", lambda: delete_all(api, PODS), 600)
    try:
        wait("the namespace's groups deleted", lambda: not any(listed(api, g) for g in groups), 30)
    except RuntimeError:
        for path in groups:
            for obj in listed(api, path):
                name = obj["metadata"]["name"]
                kubeapi.request(api, "PATCH", f"{path}/{name}", {"metadata": {"finalizers": None}},
                                content_type="application/merge-patch+json")  # fmt: skip
        wait("the namespace's groups deleted", lambda: not any(listed(api, g) for g in groups), 60)


def delete_all(api: Any, path: str) -> bool:
    """One collection DELETE of ``path`` (at once, no grace); True once nothing is left.
    The server ends a DELETE of 10,000 pods at its request timeout with a part deleted
    (a 504, or a 500 "context deadline"), so a caller repeats it until this says so."""
    at_once = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    try:
        kubeapi.request(api, "DELETE", path, at_once, timeout=600)
    except kubeapi.ApiError as exc:
        if exc.status == 404:
            return True
        if exc.status < 500:
            raise
    return not listed(api, path, limit=1)


def listed(api: Any, path: str, limit: int = 0) -> list[dict[str, Any]]:
    """The objects at ``path`` (none where its API is not served)."""
    try:
        query = {"limit": str(limit)} if limit else None
        items: list[dict[str, Any]] = kubeapi.request(api, "GET", path, query=query)["items"]
    except kubeapi.ApiError as exc:
        if exc.status == 404:
            return []
        raise
    return items


def request_counts(api: Any) -> dict[str, int]:
    """``apiserver_request_total`` summed by verb, from the API server's /metrics."""
    response = kubeapi.raw_get(api, "/metrics", {}, 30)
    try:
        text = response.data.decode()
    finally:
        response.release_conn()
    return parse_request_counts(text)


def parse_request_counts(text: str) -> dict[str, int]:
    """Prometheus text: the ``apiserver_request_total`` samples summed by their verb."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels, _, value = line.rpartition("} ")
        verb = next(
            (p.split("=", 1)[1].strip('"') for p in labels.split(",") if p.startswith("verb=")), "?"
        )
        counts[verb] = counts.get(verb, 0) + int(float(value))
    return counts
