"""``kbatch bench --live``: kbatch, kube-scheduler and Volcano's scheduler side by side on
one API server with KWOK's fake nodes (``kbatch.bench.live_cluster``).

For each round, each scheduler in turn (the order turned by one each round, so none is
always first): the namespace wiped of every pod and group, the scheduler started and
ready, then the scenario's pods (and groups) created from a pool of 16 client threads
while a watch notes when each pod is first seen bound. A run ends when every pod is
bound or its time is up; then the scheduler's peak memory and CPU seconds are read
from /proc and it is stopped. The API server's ``apiserver_request_total`` by verb (and
by verb and resource), before and after, gives the requests of the run (everyone's: the
benchmark's creates and KWOK's status writes are the same in every run, the rest is the
scheduler's); the CPU seconds the cluster's programs and the benchmark used meanwhile,
what they cost.

In a restart scenario the scheduler is started on the empty namespace and killed
(SIGKILL), the pods are created while none runs, and a new one is started: the times to
the first and the last bind count from its start.

Each run prints one JSON line on stdout; the end prints the min/median/max table, in
markdown, on stderr.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbatch import kubeapi
from kbatch.api import crdgen
from kbatch.bench import live_cluster, live_figures, live_schedulers
from kbatch.bench import live_workload as workload
from kbatch.bench.live_api import (
    PODS,
    Watch,
    differences,
    ensure,
    ensure_served,
    ready_nodes,
    request_counts,
    settled,
    wait,
    wipe,
)

WORKERS = 16
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PARTLY_BOUND_GRACE = 1.0


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
    """Every round of every scheduler: a JSON line each through ``out``, then the table
    on stderr; 0 when every run bound every pod, 1 when one did not (its line says why),
    2 when the cluster's programs are not built."""
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
            prepare_volcano(api, binaries, options.scenario)
        for round_number in range(1, options.rounds + 1):
            for name in order(options.schedulers, round_number - 1):
                line = run_one(
                    api, cluster, options, name, round_number, workdir / f"{name}-{round_number}"
                )
                out(json.dumps(line))
                lines.append(line)
    print(live_figures.table(live_figures.summary(lines)), file=sys.stderr)
    return 0 if all(not line.get("error") for line in lines) else 1


def prepare(api: Any, cluster: live_cluster.LiveCluster, options: Options) -> None:
    """kbatch's CRDs and queues, the namespace, and the fake nodes, all Ready."""
    for resource in crdgen.RESOURCES:
        ensure(api, CRD_PATH, crdgen.custom_resource_definition(resource))
    for path, queue in workload.queues(options.scenario, "kbatch"):
        ensure_served(api, f"kbatch's queue {queue['metadata']['name']}", path, queue)
    ensure(api, "/api/v1/namespaces", {"metadata": {"name": workload.NAMESPACE}})
    with ThreadPoolExecutor(WORKERS) as pool:
        list(
            pool.map(
                lambda i: ensure(api, "/api/v1/nodes", workload.node(i)),
                range(options.scenario.nodes),
            )
        )
    wait("the fake nodes Ready", lambda: ready_nodes(api) >= options.scenario.nodes, 300)
    # KWOK lists each node's pods once as it takes the node on: thousands of lists that
    # would otherwise fall into the first scheduler's run
    settled(lambda: request_counts(api), ("LIST pods",), quiet=5.0, timeout=300)


def prepare_volcano(api: Any, binaries: live_cluster.Binaries, spec: workload.Scenario) -> None:
    """Volcano's CRDs (cached beside its binary), its default queue, which its PodGroups
    name (vc-scheduler also makes it at its start, but only once its CRD is served), and
    the scenario's queues, each Open. Nothing when it is not built: its runs say so."""
    crds = live_schedulers.volcano_crds(binaries.volcano_scheduler)
    if not crds:
        return
    for crd in crds:
        ensure(api, CRD_PATH, crd)
    default = {
        "apiVersion": workload.VOLCANO_QUEUES, "kind": "Queue",
        "metadata": {"name": workload.VOLCANO_QUEUE},
        "spec": {"weight": 1, "reclaimable": True},
    }  # fmt: skip
    queues = f"/apis/{workload.VOLCANO_QUEUES}/queues"
    for path, queue in [(queues, default), *workload.queues(spec, "volcano")]:
        name = queue["metadata"]["name"]
        ensure_served(api, f"Volcano's queue {name}", path, queue)
        open_volcano_queue(api, name)


def open_volcano_queue(api: Any, name: str) -> None:
    """Mark Volcano's Queue ``name`` Open in its status, as vc-controller-manager's queue
    controller does in a Volcano install: vc-scheduler's proportion plugin allocates
    nothing in a queue whose ``status.state`` is not Open, and this cluster runs no
    vc-controller-manager."""
    path = f"/apis/{workload.VOLCANO_QUEUES}/queues/{name}/status"
    kubeapi.request(api, "PATCH", path, {"status": {"state": "Open"}},
                    content_type="application/merge-patch+json")  # fmt: skip


def run_one(
    api: Any,
    cluster: live_cluster.LiveCluster,
    options: Options,
    name: str,
    round_number: int,
    workdir: Path,
) -> dict[str, Any]:
    """One scheduler's run of the scenario on a wiped namespace: its JSON line. With
    ``options.backlog`` the pods are all there before the scheduler starts, and the times
    count from its start (a cold start on a backlog); a restart scenario first starts
    one and kills it (a crash), then does the same."""
    spec = options.scenario
    cold = options.backlog or spec.restart
    workdir.mkdir(parents=True, exist_ok=True)
    wipe(api)
    watch = Watch(api, spec)
    watch.start()
    try:
        if spec.restart:
            killed = start(cluster, options, name, workdir)
            killed.proc.popen.kill()
            killed.proc.stop()
        created = submit(api, spec, name) if cold else {}
        before, cpu_before = request_counts(api), cluster_cpu(cluster)
        launched = time.monotonic()
        started = start(cluster, options, name, workdir)
    except RuntimeError as exc:
        watch.stop()
        return live_figures.run_line(
            spec, name, round_number, {}, {}, error=str(exc).splitlines()[0]
        )
    try:
        if not cold:
            before, cpu_before = request_counts(api), cluster_cpu(cluster)
            created = submit(api, spec, name)
        complete = watch.wait(options.timeout)
        peak, cpu = live_schedulers.usage(started.proc.popen.pid)
        after, cpu_after = request_counts(api), cluster_cpu(cluster)
    finally:
        watch.stop()
        started.proc.stop()
    error = watch.failure
    if not complete and error is None:
        error = f"timeout: {len(watch.bound)} of {spec.pods} bound after {options.timeout:.0f}s"
    return live_figures.run_line(
        spec, name, round_number, created, dict(watch.bound),
        since=launched if cold else None,
        peak_rss_bytes=peak, cpu_seconds=None if cpu is None else round(cpu, 2),
        max_partly_bound_pods=live_figures.partly_bound(spec, watch.bound, PARTLY_BOUND_GRACE),
        partly_bound_grace_seconds=PARTLY_BOUND_GRACE,
        create_seconds=round(max(created.values()) - min(created.values()), 3) if created else None,
        submitted=submitted(options),
        client=started.client,
        conf=conf_of(options, name),
        queues=spec.queues if name != "kube-scheduler" else 0,
        api_requests={
            verb: n - before["verb"].get(verb, 0) for verb, n in sorted(after["verb"].items())
        },
        api_requests_by_resource=differences(after["resource"], before["resource"]),
        cluster_cpu_seconds={
            program: round(seconds - cpu_before.get(program, 0.0), 2)
            for program, seconds in cpu_after.items()
        },
        error=error,
    )  # fmt: skip


def cluster_cpu(cluster: live_cluster.LiveCluster) -> dict[str, float]:
    """CPU seconds (user + system) each program of the cluster, and this benchmark (its
    creates and its watch), have used so far: what a scheduler's requests cost the API
    server, etcd and KWOK shows in a run's difference. On a machine of few cores they
    all share it with the scheduler."""
    used = {"benchmark": time.process_time()}
    for proc in cluster.procs:
        seconds = live_schedulers.usage(proc.popen.pid)[1]
        if seconds is not None:
            used[proc.name] = seconds
    return used


def start(
    cluster: live_cluster.LiveCluster, options: Options, name: str, workdir: Path
) -> live_schedulers.Started:
    return live_schedulers.start(
        name, cluster, options.client_qps, workdir, options.kbatch_conf, options.volcano_conf
    )


def submitted(options: Options) -> str:
    """What the JSON line says of when the pods were created."""
    if options.scenario.restart:
        return "after a scheduler was started and killed, before a new one started"
    return "before the scheduler started" if options.backlog else "while it ran"


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
        for i in spec.members(index):
            kubeapi.request(api, "POST", PODS, workload.pod(spec, i, scheduler))
            created[workload.pod_name(i)] = time.monotonic()

    with ThreadPoolExecutor(WORKERS) as pool:
        list(pool.map(gang, range(spec.gangs)))
    return created
