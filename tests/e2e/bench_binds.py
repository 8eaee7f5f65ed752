"""Bind throughput: ``kbatch run`` against a bare pods/binding loop, same server, same run.

    .venv/bin/python tests/e2e/bench_binds.py [--pods 2000] [--nodes 50] [--rounds 5]
    .venv/bin/python tests/e2e/bench_binds.py --cold-start [--rounds 3]

Starts a local control plane (as the e2e suite does, or uses KBATCH_E2E_KUBECONFIG),
then runs rounds. A round runs the bare loop and kbatch back to back, bare first in
even rounds and kbatch first in odd ones, each on a namespace cleared of every earlier
run's pods, and takes their ratio: the machine drifts between rounds far more than
within one (ratios of 0.77 to 1.02 from rounds run minutes apart). The bare loop
creates N pods no scheduler owns and binds them from a thread pool as fast as the
server takes it (the physical limit here). kbatch's side: (1) *cold*: creates N pods
for kbatch, starts ``kbatch run`` and times from its first bind to the last; (2)
*warm*: starts ``kbatch run`` while the benchmark holds its leader Lease, lets it
settle (kopf started, caches synced), creates N pods, gives the Lease up and times
kbatch's binds as it takes over that backlog (a failover with pods waiting).

``--cold-start`` measures the restart instead (1,000 nodes and 10,000 pods in gangs of
10 unless told otherwise): the wall time from starting ``kbatch run`` — which takes
the lead, lists the cluster and schedules its backlog — to its last bind, against the
wall time the bare loop needs for the same number of binds, from its first request to
its last bind. Volcano's tracker reports minutes for this at its sizes.

Each round prints a line on stderr as it ends (with the load average); the result is
one JSON line on stdout: each round's figures and ratios, the ratios' min/median/max.
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from e2e.controlplane import Cluster, discover
from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.kubeapi import ApiError, raw_get, refresh_tokens_at_most_every_second, request

WORKERS = 16
NAMESPACE = "default"
B = TypeVar("B")
K = TypeVar("K")


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def node_status() -> dict[str, Any]:
    return {
        "status": {
            "allocatable": {"cpu": "1000", "memory": "4000Gi", "pods": "10000"},
            "capacity": {"cpu": "1000", "memory": "4000Gi", "pods": "10000"},
            "conditions": [{"type": "Ready", "status": "True"}],
        }
    }


def pod(name: str, scheduler: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "10m"}}}],
        },
    }


def create_pods(api: Any, prefix: str, count: int, scheduler: str) -> None:
    with ThreadPoolExecutor(WORKERS) as pool:
        list(
            pool.map(
                lambda i: request(
                    api,
                    "POST",
                    f"/api/v1/namespaces/{NAMESPACE}/pods",
                    pod(f"{prefix}-{i}", scheduler),
                ),
                range(count),
            )
        )


def create_gangs(api: Any, prefix: str, count: int, size: int) -> None:
    """``count`` pods for kbatch in PodGroups of ``size`` (minMember ``size``)."""
    groups = f"{GROUPS}/namespaces/{NAMESPACE}/podgroups"
    with ThreadPoolExecutor(WORKERS) as pool:
        list(
            pool.map(
                lambda g: request(
                    api,
                    "POST",
                    groups,
                    {
                        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
                        "kind": "PodGroup",
                        "metadata": {"name": f"{prefix}-g{g}", "namespace": NAMESPACE},
                        "spec": {"minMember": size},
                    },
                ),
                range(count // size),
            )
        )

    def gang_pod(i: int) -> dict[str, Any]:
        body = pod(f"{prefix}-{i}", "kbatch")
        body["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: f"{prefix}-g{i // size}"}
        return body

    with ThreadPoolExecutor(WORKERS) as pool:
        list(
            pool.map(
                lambda i: request(api, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", gang_pod(i)),
                range(count),
            )
        )


def clear_pods(api: Any) -> None:
    """Delete every pod and PodGroup of the namespace at once (no kubelet confirms), and
    wait until none is listed: each round starts from the same cluster, not with every
    earlier round's pods on it too (a third cold start listed 60,000 pods, the first
    20,000)."""
    at_once = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
    while True:
        for path in (pods, f"{GROUPS}/namespaces/{NAMESPACE}/podgroups"):
            try:
                request(api, "DELETE", path, at_once, timeout=600)
            except ApiError as exc:  # 20,000 pods outlast the server's request timeout
                if exc.status < 500:  # (a 504, or a 500 "context deadline"): it goes on
                    raise
        if not request(api, "GET", f"{pods}?limit=1")["items"]:
            return
        time.sleep(1.0)


GROUPS = "/apis/scheduling.incubator.k8s.io/v1alpha1"


def bare_loop(api: Any, count: int, nodes: int, prefix: str = "bare") -> float:
    return bare_loop_timed(api, count, nodes, prefix)[0]


def bare_loop_seconds(api: Any, count: int, nodes: int, prefix: str = "bare") -> float:
    return bare_loop_timed(api, count, nodes, prefix)[1]


def bare_loop_timed(api: Any, count: int, nodes: int, prefix: str = "bare") -> tuple[float, float]:
    """Binds per second (first bind seen to last), and the wall seconds from the first
    bind request to the last bind seen."""
    create_pods(api, prefix, count, "nobody")

    def bind(i: int) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": f"{prefix}-{i}"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": f"node-{i % nodes}"},
        }
        request(api, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods/{prefix}-{i}/binding", body)

    version = current_version(api)
    with ThreadPoolExecutor(WORKERS + 1) as pool:
        watch = pool.submit(bind_times, api, prefix, count, version)
        started = time.perf_counter()
        list(pool.map(bind, range(count)))
        times = watch.result()
    # measured as kbatch's binds are: seen on a watch, from the first to the last
    return (count - 1) / max(times[-1] - times[0], 1e-9), times[-1] - started


def current_version(api: Any) -> str:
    listed = request(api, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1")
    return str(listed["metadata"]["resourceVersion"])


def pooled(api: Any) -> Any:
    """``api`` as kbatch's own client is: 32 connections, and its token refresh hook run
    at most once a second (the bare loop's requests cost what kbatch's binds do)."""
    api.configuration.connection_pool_maxsize = 32
    api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 32
    return refresh_tokens_at_most_every_second(api)


def bind_times(api: Any, prefix: str, count: int, version: str) -> list[float]:
    """Watch pods from ``version``: when each ``prefix`` pod was first seen bound.

    A watch costs the server next to nothing, unlike polling LISTs, which would
    slow the API server down during kbatch's run only."""
    seen: dict[str, float] = {}
    query = {"watch": "true", "resourceVersion": version, "timeoutSeconds": "600"}
    response = raw_get(api, f"/api/v1/namespaces/{NAMESPACE}/pods", query, None)
    buffer = b""
    try:
        for chunk in response.stream(65536):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                obj = json.loads(line)["object"]
                name = obj["metadata"]["name"]
                if name.startswith(prefix) and obj["spec"].get("nodeName") and name not in seen:
                    seen[name] = time.perf_counter()
            if len(seen) >= count:
                return sorted(seen.values())
    finally:
        response.release_conn()
    raise RuntimeError(f"the watch ended with {len(seen)} of {count} pods bound")


def kbatch_run(
    api: Any, cluster: Cluster, count: int, prefix: str = "kb"
) -> tuple[float, list[int]]:
    """Binds per second from kbatch's first bind to its last, and binds per 250 ms: a
    ``kbatch run`` started with the pods already there."""
    create_pods(api, prefix, count, "kbatch")
    version = current_version(api)
    proc = start_kbatch(cluster, "--no-leader-elect")
    try:
        times = bind_times(api, prefix, count, version)
    finally:
        proc.send_signal(signal.SIGINT)  # py-spy, if profiling, writes its file on SIGINT
        proc.wait(timeout=30)
    return rate_and_buckets(times)


def start_kbatch(cluster: Cluster, *options: str) -> "subprocess.Popen[bytes]":
    kbatch = Path(sys.executable).with_name("kbatch")
    argv = [
        str(kbatch),
        "run",
        "--kubeconfig",
        str(cluster.kubeconfig),
        *options,
        "--metrics-address",
        "",
        "--health-address",
        "",
        "--log-level",
        "warning",
    ]
    if os.environ.get("KBATCH_BENCH_PROFILE"):  # e.g. a py-spy path, to see where kbatch spends
        argv = [
            os.environ["KBATCH_BENCH_PROFILE"],
            "record",
            "--format",
            "raw",
            "-o",
            "/tmp/kbatch-binds.txt",
            "--threads",
            "--gil",
            "--",
            *argv,
        ]
    return subprocess.Popen(argv)


LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
HOLDER = "bench-binds"
WARM_SETTLE_SECONDS = 5.0


def lease(holder: str, seconds: int, renewed: str) -> dict[str, Any]:
    return {"holderIdentity": holder, "leaseDurationSeconds": seconds, "renewTime": renewed}


def kbatch_warm(
    api: Any, cluster: Cluster, count: int, prefix: str = "warm"
) -> tuple[float, list[int]]:
    """Binds per second of a settled ``kbatch run`` taking over a backlog of ``count``."""
    namespace = f"lock-{prefix}"
    request(api, "POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    path = LEASES.format(namespace=namespace)
    now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
    held = {"metadata": {"name": "kbatch"}, "spec": lease(HOLDER, 3600, now)}
    request(api, "POST", path, held)
    proc = start_kbatch(cluster, "--leader-elect", "--lock-namespace", namespace,
                        "--lease-duration", "5s")  # fmt: skip
    try:
        time.sleep(WARM_SETTLE_SECONDS)  # kopf's start, the informers' first lists
        create_pods(api, prefix, count, "kbatch")
        version = current_version(api)
        held = request(api, "GET", f"{path}/kbatch")
        held["spec"] = lease("", 1, "1970-01-01T00:00:00.000000Z")
        request(api, "PUT", f"{path}/kbatch", held)
        times = bind_times(api, prefix, count, version)
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
    return rate_and_buckets(times)


def kbatch_cold_start(api: Any, cluster: Cluster, count: int, gang: int, prefix: str) -> float:
    """Wall seconds from starting ``kbatch run`` (leader election on, no holder: it
    takes the lead at once) to its last bind, with ``count`` pods in gangs waiting."""
    create_gangs(api, prefix, count, gang)
    version = current_version(api)
    namespace = f"lock-{prefix}"
    request(api, "POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    with ThreadPoolExecutor(1) as pool:
        watch = pool.submit(bind_times, api, prefix, count, version)
        started = time.perf_counter()
        proc = start_kbatch(cluster, "--leader-elect", "--lock-namespace", namespace)
        try:
            times = watch.result()
        finally:
            stop(proc)
    return times[-1] - started


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT, as a rollout would; killed if it has not stopped within 30 s (a busy
    leader on a loaded machine may still be writing statuses), saying so."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        print("kbatch run did not stop within 30 s of SIGINT: killed", file=sys.stderr)
        proc.kill()
        proc.wait()


def rate_and_buckets(times: list[float]) -> tuple[float, list[int]]:
    buckets = [0] * (int((times[-1] - times[0]) * 4) + 1)
    for moment in times:
        buckets[int((moment - times[0]) * 4)] += 1
    return (len(times) - 1) / max(times[-1] - times[0], 1e-9), buckets


def prepare(api: Any, nodes: int) -> None:
    """kbatch's CRDs, the default queue, and ``nodes`` Ready nodes."""
    import yaml

    crds = Path(__file__).resolve().parents[2] / "crds"
    for path in sorted(crds.glob("*.yaml")):
        request(
            api,
            "POST",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            yaml.safe_load(path.read_text()),
        )
    for i in range(nodes):
        request(api, "POST", "/api/v1/nodes", node(f"node-{i}"))
        request(
            api,
            "PATCH",
            f"/api/v1/nodes/node-{i}/status",
            node_status(),
            "application/merge-patch+json",
        )


def rate_rounds(api: Any, cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    """Each round: the bare loop's binds per second and kbatch's (a cold ``kbatch run``,
    then a warm one taking over), back to back (see :func:`back_to_back`)."""
    bares, ours, ratios, warm_ratios, loads = [], [], [], [], []
    per_quarter_second: list[int] = []
    for round_ in range(args.rounds):
        bare, (rate, warm, per_quarter_second) = back_to_back(
            api,
            round_,
            partial(bare_loop, api, args.pods, args.nodes, f"bare{round_}"),
            partial(kbatch_cold_then_warm, api, cluster, args.pods, round_),
        )
        bares.append(bare)
        ours.append(rate)
        ratios.append(rate / bare)
        warm_ratios.append(warm / bare)
        loads.append(os.getloadavg()[0])
        report_round(round_, args.rounds, f"bare {bare:.0f}/s, kbatch {rate:.0f}/s, warm "
                     f"{warm:.0f}/s: ratio {ratios[-1]:.3f}, warm {warm_ratios[-1]:.3f}")  # fmt: skip
    return {
        "bare_binds_per_second": [round(b, 1) for b in bares],
        "kbatch_binds_per_second": [round(r, 1) for r in ours],
        "ratios": [round(r, 3) for r in ratios],
        "ratio_min_median_max": min_median_max(ratios),
        "warm_ratios": [round(r, 3) for r in warm_ratios],
        "warm_ratio_min_median_max": min_median_max(warm_ratios),
        "load_1min_after_each_round": [round(load, 2) for load in loads],
        "kbatch_binds_per_250ms_last_round": per_quarter_second,
    }


def kbatch_cold_then_warm(
    api: Any, cluster: Cluster, count: int, round_: int
) -> tuple[float, float, list[int]]:
    """kbatch's side of a round: binds per second of a ``kbatch run`` started with the
    pods there and of a warm one taking over, and the first one's binds per 250 ms."""
    rate, per_quarter_second = kbatch_run(api, cluster, count, f"kb{round_}")
    clear_pods(api)
    warm, _ = kbatch_warm(api, cluster, count, f"warm{round_}")
    return rate, warm, per_quarter_second


def cold_start_rounds(api: Any, cluster: Cluster, args: argparse.Namespace) -> dict[str, Any]:
    """Each round: the bare loop's wall time for the binds and a cold ``kbatch run``'s
    from its start to its last bind, back to back (see :func:`back_to_back`); the
    ratio is kbatch's over the bare loop's."""
    bares, colds, loads = [], [], []
    for round_ in range(args.rounds):
        bare, cold = back_to_back(
            api,
            round_,
            partial(bare_loop_seconds, api, args.pods, args.nodes, f"bare{round_}"),
            partial(kbatch_cold_start, api, cluster, args.pods, args.gang, f"cold{round_}"),
        )
        bares.append(bare)
        colds.append(cold)
        loads.append(os.getloadavg()[0])
        report_round(round_, args.rounds,
                     f"bare {bare:.2f} s, kbatch {cold:.2f} s: ratio {cold / bare:.3f}")  # fmt: skip
    ratios = [cold / bare for cold, bare in zip(colds, bares, strict=True)]
    return {
        "gang": args.gang,
        "bare_seconds": [round(b, 2) for b in bares],
        "kbatch_cold_start_seconds": [round(c, 2) for c in colds],
        "ratios": [round(r, 3) for r in ratios],
        "ratio_min_median_max": min_median_max(ratios),
        "load_1min_after_each_round": [round(load, 2) for load in loads],
    }


def back_to_back(
    api: Any, round_: int, bare: Callable[[], B], ours: Callable[[], K]
) -> tuple[B, K]:
    """The bare loop and kbatch, one right after the other, so that a round's ratio
    compares two runs made under the same machine state (a 2-core VM drifts over
    minutes: ratios of 0.77 to 1.02 between rounds). Which goes first alternates,
    bare first in even rounds (:func:`bare_first`), so that a drift within a round
    favours neither side; and each runs on a namespace cleared of the other's pods,
    so that going second does not mean sharing the cluster with the first's."""
    if bare_first(round_):
        bare_result = bare()
        clear_pods(api)
        ours_result = ours()
    else:
        ours_result = ours()
        clear_pods(api)
        bare_result = bare()
    clear_pods(api)
    return bare_result, ours_result


def bare_first(round_: int) -> bool:
    return round_ % 2 == 0


def min_median_max(values: list[float]) -> list[float]:
    """``[min, median, max]`` of ``values``, to three places."""
    return [round(min(values), 3), round(statistics.median(values), 3), round(max(values), 3)]


def report_round(round_: int, rounds: int, figures: str) -> None:
    """One line per round on stderr as it ends: a long benchmark shows its progress,
    and the machine's load beside each round's figures."""
    first = "bare" if bare_first(round_) else "kbatch"
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"round {round_ + 1}/{rounds} ({first} first; load {load}): {figures}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", type=int, help="2,000 (10,000 with --cold-start)")
    parser.add_argument("--nodes", type=int, help="50 (1,000 with --cold-start)")
    parser.add_argument("--rounds", type=int, default=1, help="alternate both this often; medians")
    parser.add_argument("--cold-start", action="store_true", help="time a restart with a backlog")
    parser.add_argument("--gang", type=int, default=10, help="pods per PodGroup (--cold-start)")
    args = parser.parse_args()
    args.pods = args.pods or (10_000 if args.cold_start else 2_000)
    args.nodes = args.nodes or (1_000 if args.cold_start else 50)
    source = discover()
    cluster = source if isinstance(source, Cluster) else source.start()
    try:
        api = pooled(cluster.api_client())
        prepare(api, args.nodes)
        rounds = cold_start_rounds if args.cold_start else rate_rounds
        result = {"pods": args.pods, "nodes": args.nodes, "workers": WORKERS,
                  "rounds": args.rounds, **rounds(api, cluster, args)}  # fmt: skip
        print(json.dumps(result))
    finally:
        if cluster is not source:
            source.stop()  # type: ignore[union-attr]
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
