"""A real Prometheus scrapes a real ``kbatch run``; every dashboard query returns data.

Debian's ``prometheus`` (scripts/install-tools.sh) scrapes ``kbatch run`` every
second while it schedules a small cluster: one Node, a queue with a
capability, a gang of three that fits (cpu and a GPU each) and a gang that
never fits (its pods must join pods that do not exist). Then every query of every panel of the chart's dashboards goes
through Prometheus's HTTP API (/api/v1/query, with Grafana's variables filled
in as Grafana would) and must parse and return data.

Isolation on the shared control plane: kbatch here serves its own scheduler
name and leads on a Lease in its own namespace; the Node is tainted so that no
other test's pods land on it; everything is deleted afterwards.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml
from chart import dashboards, kube
from chart.tools import ROOT, require_control_plane, require_tool

from e2e.controlplane import Cluster, free_ports
from kbatch.api import GROUP, VERSION

pytestmark = pytest.mark.e2e
PROMETHEUS = require_tool("prometheus", module=True)
require_control_plane()

NAMESPACE = "kbatch-prometheus"
SCHEDULER = "kbatch-prometheus"
NODE = "kbatch-prometheus-node"
NODE_KEY = "kubernetes.io/hostname"
QUEUE = "prometheus-q"
TAINT = {"key": "kbatch.io/prometheus-test", "value": "true", "effect": "NoSchedule"}
PG_PATH = f"/apis/{GROUP}/{VERSION}"
# Grafana's $__rate_interval is at least four scrape intervals; 1s scrapes here.
RATE_INTERVAL = "10s"
DEADLINE = 90.0


def gang(
    name: str, members: int, cpu: str, gpu: int, queue: str = QUEUE, node: str = NODE
) -> list[tuple[str, dict[str, Any]]]:
    """A PodGroup of ``members`` and its pods on ``node``, as (collection path, object)."""
    group = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": members, "queue": queue},
    }
    objects = [(f"{PG_PATH}/namespaces/{NAMESPACE}/podgroups", group)]
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": "1Gi"}}
    if gpu:
        resources["requests"]["nvidia.com/gpu"] = str(gpu)
        resources["limits"] = {"nvidia.com/gpu": str(gpu)}
    for i in range(members):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{i}",
                "namespace": NAMESPACE,
                "annotations": {"scheduling.k8s.io/group-name": name},
            },
            "spec": {
                "schedulerName": SCHEDULER,
                "nodeSelector": {"kubernetes.io/hostname": node},
                "tolerations": [{**TAINT, "operator": "Equal"}],
                "containers": [{"name": "work", "image": "busybox", "resources": resources}],
            },
        }
        objects.append((f"/api/v1/namespaces/{NAMESPACE}/pods", pod))
    return objects


def create_cluster(api: Any) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    kube.ensure(api, "/api/v1/namespaces", namespace)
    allocatable = {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "4"}
    kube.ready_node(api, NODE, allocatable, [TAINT])
    queue = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": QUEUE},
        "spec": {"weight": 2, "capability": {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "3"}},
    }
    kube.ensure(api, f"{PG_PATH}/queues", queue)
    # the gang that never fits is admitted (its 2 cpu are free, on a node it may go on)
    # and then fits no node: its pods must join pods that do not exist. The unschedulable
    # counts need a gang that allocate tries (one for a node the cluster lacks is not
    # even admitted).
    nowhere = gang("never-fits", 2, "1", 0, "default")
    alone = {"labelSelector": {"matchLabels": {"app": "absent"}}, "topologyKey": NODE_KEY}
    for _, obj in nowhere[1:]:
        obj["spec"]["affinity"] = {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [alone]}
        }
    for path, obj in gang("fits", 3, "1", gpu=1) + nowhere:
        kube.ensure(api, path, obj)


def delete_cluster(api: Any) -> None:
    kube.delete(
        api,
        *(
            f"/api/v1/namespaces/{NAMESPACE}/pods/{name}"
            for name in ("fits-0", "fits-1", "fits-2", "never-fits-0", "never-fits-1")
        ),
        f"{PG_PATH}/namespaces/{NAMESPACE}/podgroups/fits",
        f"{PG_PATH}/namespaces/{NAMESPACE}/podgroups/never-fits",
        f"{PG_PATH}/queues/{QUEUE}",
        f"/api/v1/nodes/{NODE}",
        f"/api/v1/namespaces/{NAMESPACE}",
    )


# ----------------------------------------------------------------------------- fixtures
@dataclass
class Stack:
    kbatch_metrics: str
    prometheus: str  # base URL

    def query(self, expr: str) -> dict[str, Any]:
        url = f"{self.prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                return dict(json.loads(response.read()))
        except urllib.error.HTTPError as exc:  # 400: a query that does not parse
            return dict(json.loads(exc.read()))


@pytest.fixture(scope="module")
def stack(control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    work = tmp_path_factory.mktemp("prometheus-e2e")
    processes: list[kube.Process] = []
    with control_plane.api_client() as api:
        try:
            kube.ensure_crds(api, ROOT / "crds")
            create_cluster(api)
            metrics_port, health_port, prometheus_port = free_ports(3)
            kbatch = kube.Process.start(
                "kbatch run",
                [
                    str(kube.KBATCH), "run",
                    "--kubeconfig", str(control_plane.kubeconfig),
                    "--scheduler-name", SCHEDULER,
                    "--schedule-period", "1s",
                    "--metrics-address", f"127.0.0.1:{metrics_port}",
                    "--health-address", f"127.0.0.1:{health_port}",
                    "--lock-namespace", NAMESPACE,
                    "--lease-duration", "5s",
                ],
                work / "kbatch-run.log",
            )  # fmt: skip
            processes.append(kbatch)
            metrics = f"http://127.0.0.1:{metrics_port}/metrics"
            kbatch.wait_until("serving /metrics", lambda: kube.http_ok(metrics))
            config = {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": [
                    {
                        "job_name": "kbatch",
                        "scrape_interval": "1s",
                        "scrape_timeout": "1s",
                        "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}],
                    }
                ],
            }
            (work / "prometheus.yml").write_text(yaml.safe_dump(config))
            prometheus = kube.Process.start(
                "prometheus",
                [
                    str(PROMETHEUS),
                    f"--config.file={work / 'prometheus.yml'}",
                    f"--storage.tsdb.path={work / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{prometheus_port}",
                    "--log.level=warn",
                ],
                work / "prometheus.log",
            )
            processes.append(prometheus)
            base = f"http://127.0.0.1:{prometheus_port}"
            prometheus.wait_until("ready", lambda: kube.http_ok(f"{base}/-/ready"))
            kbatch.wait_until(
                "the gang of three bound and running",
                lambda: kube.mark_bound_pods_running(api, NAMESPACE) == 3,
                DEADLINE,
            )
            yield Stack(metrics, base)
        finally:
            for process in reversed(processes):
                process.stop()
            delete_cluster(api)


# ----------------------------------------------------------------------------- tests
def samples(result: dict[str, Any]) -> list[float]:
    assert result["status"] == "success", result
    data = result["data"]
    if data["resultType"] == "scalar":
        return [float(data["result"][1])]
    return [float(item["value"][1]) for item in data["result"]]


def value(stack: Stack, expr: str) -> float | None:
    found = samples(stack.query(expr))
    return found[0] if len(found) == 1 else None


def test_prometheus_scrapes_kbatch(stack: Stack) -> None:
    kube.poll("Prometheus's scrape of kbatch up", lambda: value(stack, 'up{job="kbatch"}') == 1.0)
    kube.poll(
        "the gang's 3 cpu allocated to its queue, in Prometheus",
        lambda: value(stack, f'kbatch_queue_allocated_milli_cpu{{queue_name="{QUEUE}"}}') == 3000,
    )
    kube.poll(
        "the PodGroup running, in Prometheus",
        lambda: value(stack, f'kbatch_queue_pod_group_running_count{{queue_name="{QUEUE}"}}') == 1,
    )


CORE = {
    ("kbatch scheduler", "E2E scheduling latency"),
    ("kbatch scheduler", "Schedule attempts by result"),
    ("kbatch queues", "CPU (millicores): deserved vs allocated vs request"),
}


def test_every_dashboard_query_returns_data(stack: Stack) -> None:
    queries = list(dashboards.queries())
    assert {(q.dashboard, q.panel) for q in queries} >= CORE

    def empty_queries() -> list[str]:
        empty = []
        for q in queries:
            result = stack.query(dashboards.concrete(q.expr, RATE_INTERVAL))
            assert result["status"] == "success", f"{q.dashboard} / {q.panel}: {result}"
            if not samples(result):
                empty.append(f"{q.dashboard} / {q.panel} / {q.ref}: {q.expr}")
        return empty

    # Every panel has data once a few sessions have been scraped.
    last: list[str] = []

    def all_answer() -> bool:
        nonlocal last
        last = empty_queries()
        return not last

    deadline = time.monotonic() + DEADLINE
    while not all_answer():
        if time.monotonic() > deadline:
            pytest.fail("queries without data:\n" + "\n".join(last))
        time.sleep(1.0)

    # Latencies, once Prometheus has scraped a session: the cluster settles (a gang that
    # never fits, nothing else to do), after which kbatch runs one session every 5
    # periods, so the first scrapes may all come after the first sessions.
    e2e: list[float] = []

    def latencies() -> bool:
        nonlocal e2e
        e2e = samples(stack.query(dashboards.concrete(_expr("E2E scheduling latency"), "30s")))
        return bool(e2e) and all(v > 0 and not math.isnan(v) for v in e2e)

    deadline = time.monotonic() + DEADLINE
    while not latencies():
        if time.monotonic() > deadline:
            pytest.fail(f"no E2E scheduling latency over 30s: {e2e}")
        time.sleep(1.0)
    attempts = stack.query("sum by (result) (kbatch_schedule_attempts_total)")
    results = {
        item["metric"]["result"]: float(item["value"][1]) for item in attempts["data"]["result"]
    }
    assert results.get("scheduled", 0) >= 3, results
    assert results.get("unschedulable", 0) >= 2, results
    deserved = value(stack, f'kbatch_queue_deserved_milli_cpu{{queue_name="{QUEUE}"}}')
    assert deserved is not None and deserved >= 3000


def test_every_query_variable_has_values(stack: Stack) -> None:
    for variable in dashboards.variable_queries():
        metric = dashboards.variable_metric(variable.expr)
        url = f"{stack.prometheus}/api/v1/label/queue_name/values?" + urllib.parse.urlencode(
            {"match[]": metric}
        )
        with urllib.request.urlopen(url, timeout=10) as response:
            values = json.loads(response.read())["data"]
        assert {QUEUE, "default"} <= set(values), variable


def _expr(panel: str) -> str:
    return next(q.expr for q in dashboards.queries() if q.panel == panel)
