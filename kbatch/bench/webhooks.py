"""Admission latency: ``python -m kbatch.bench.webhooks [--groups N] [--rounds N]``.

A cluster state of N PodGroups over 50 namespaces (each with a ResourceQuota),
10 queues and a Job per group (held while its group is Pending); then each
admission, as ``kbatch run``'s kopf handler runs it (the handler coroutine with
its ClusterState view and Job index; no webhook HTTP, no TLS), ``--rounds``
times. One JSON line per admission: p50, p99 and max in milliseconds, and
whether p99 is under the target (5 ms: ``TARGET_MS``).

Two paths for a new PodGroup: its Job is in the index, or it is not (the Job
the watch has not brought yet: the handler lists the namespace's Jobs by label
from the API server — here a local HTTP stub answering an empty list at once,
so the figure is kbatch's side of that call, not an API server's). Queue
deletion reads every PodGroup (is the queue in use?): it grows with the
cluster, and is rare.
"""

import argparse
import asyncio
import contextlib
import http.server
import json
import statistics
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, cast

import kopf

from kbatch import kubeapi
from kbatch.api import API_VERSION, GROUP_NAME_ANNOTATION
from kbatch.cluster.state import ClusterState
from kbatch.webhooks import configuration, jobs, server
from kbatch.webhooks.admission import job as job_admission

NAMESPACES = 50
QUEUES = 10
TARGET_MS = 5.0
Handler = Callable[..., Awaitable[Any]]


class Runtime:
    """What the handlers read of ``kbatch run``'s Runtime."""

    def webhooks_serving(self) -> None:
        pass

    def __init__(self, state: ClusterState, api: kubeapi.ApiClient) -> None:
        self.state = state
        self.api = api  # read only on the no-Job path: an empty Job list
        self.settings = argparse.Namespace(
            webhook_address="127.0.0.1:9443",
            webhook_cert_dir=None,
            webhook_host=None,
            manage_webhooks=False,
            lock_namespace="kbatch",
        )

    def synced(self) -> bool:
        return True

    def leads(self) -> bool:
        return True


def pod_spec(cpu: str) -> dict[str, Any]:
    return {
        "schedulerName": "kbatch",
        "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}],
    }


def build_state(groups: int) -> tuple[ClusterState, dict[tuple[str, str], list[Any]]]:
    state = ClusterState()
    for q in range(QUEUES):
        meta = {"name": "default" if q == 0 else f"q{q}"}
        state.apply({"apiVersion": API_VERSION, "kind": "Queue", "metadata": meta})
    for n in range(NAMESPACES):
        hard = {"requests.cpu": "100000", "requests.memory": "100000Gi", "pods": "100000"}
        state.apply(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": "compute", "namespace": f"ns-{n}"},
                "spec": {"hard": hard},
            }
        )
    index: dict[tuple[str, str], list[Any]] = {}
    for g in range(groups):
        namespace, name = f"ns-{g % NAMESPACES}", f"g-{g}"
        state.apply(
            {
                "apiVersion": API_VERSION,
                "kind": "PodGroup",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "minMember": 4,
                    "queue": f"q{1 + g % (QUEUES - 1)}",
                    "minResources": {"cpu": "4", "memory": "4Gi", "pods": "4"},
                },
                "status": {"phase": "Running" if g % 2 else "Pending"},
            }
        )
        index[(namespace, name)] = [indexed_job(f"{name}-job", namespace, held=g % 2 == 0)]
    index[("ns-0", "new")] = [indexed_job("new-job", "ns-0", held=True, cpu="500m")]
    return state, index


def indexed_job(name: str, namespace: str, held: bool, cpu: str = "1") -> dict[str, Any]:
    """A Job as the index keeps it (``server``'s slim Job)."""
    annotations = {job_admission.HELD_ANNOTATION: "PodGroup is Pending"} if held else {}
    return {
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {"suspend": held, "parallelism": 4, "template": {"spec": pod_spec(cpu)}},
    }


def handlers(runtime: Runtime) -> dict[str, Handler]:
    """The admission handlers ``kbatch run`` registers, by id (kopf's webhook path)."""
    registry = kopf.OperatorRegistry()
    delayed = jobs.DelayedPodCreation()
    delayed.supported = True  # an API server with Job suspend: Jobs are held
    server.register(registry, runtime, delayed)
    return {h.id: cast(Handler, h.fn) for h in registry._webhooks.get_all_handlers()}


def cases(index: dict[tuple[str, str], list[Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (handler id, keyword arguments)"""
    new_group = pod_group("new")
    unknown_group = pod_group("no-job-yet")
    queue: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": "q3"}}
    common: dict[str, Any] = {"jobs_by_group": index}
    return {
        "PodGroup create: fill minResources + quota": (
            configuration.MUTATE_POD_GROUP,
            {"body": _body(new_group), "operation": "CREATE", **common},
        ),
        "PodGroup create: no Job known (lists Jobs)": (
            configuration.MUTATE_POD_GROUP,
            {"body": _body(unknown_group), "operation": "CREATE", **common},
        ),
        "PodGroup create: validate": (
            configuration.VALIDATE_POD_GROUP,
            {"body": _body(new_group), "operation": "CREATE", **common},
        ),
        "Queue update: validate": (
            configuration.VALIDATE_QUEUE,
            {"body": _body(queue), "operation": "UPDATE", **common},
        ),
        "Queue delete: in use": (
            configuration.VALIDATE_QUEUE,
            {"body": _body(queue), "operation": "DELETE", **common},
        ),
        "Job create: hold (group Pending, a held sibling)": (
            configuration.MUTATE_JOB,
            {"body": _body(new_job("g-0")), "operation": "CREATE", **common},
        ),
        "Job create: hold (no group yet, no Job known)": (
            configuration.MUTATE_JOB,
            {"body": _body(new_job("no-group-yet")), "operation": "CREATE", **common},
        ),
    }


def pod_group(name: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns-0"},
        "spec": {"minMember": 8, "queue": "q3"},
    }


def new_job(group: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ns-0"},
        "spec": {
            "parallelism": 4,
            "template": {
                "metadata": {"annotations": {GROUP_NAME_ANNOTATION: group}},
                "spec": pod_spec("1"),
            },
        },
    }


def _body(obj: dict[str, Any]) -> kopf.Body:
    return kopf.Body(cast(kopf.RawBody, obj))


async def measure(fn: Handler, kwargs: dict[str, Any], rounds: int) -> list[float]:
    seconds = []
    for _ in range(rounds):
        patch = kopf.Patch(body=kwargs["body"])
        started = time.perf_counter()
        with contextlib.suppress(kopf.AdmissionError):  # a refusal is an answer too
            await fn(patch=patch, warnings=[], **kwargs)
        seconds.append(time.perf_counter() - started)
    return seconds


class EmptyJobLists(http.server.BaseHTTPRequestHandler):
    """The API server's answer to a Job list by label, when no such Job exists yet."""

    lists = 0  # Job lists answered

    def do_GET(self) -> None:
        EmptyJobLists.lists += "/jobs?" in self.path
        body = b'{"kind": "JobList", "apiVersion": "batch/v1", "items": []}'
        self.send_response(200 if "/jobs?" in self.path else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def stub_api() -> Iterator[kubeapi.ApiClient]:
    stub = http.server.ThreadingHTTPServer(("127.0.0.1", 0), EmptyJobLists)
    thread = threading.Thread(target=stub.serve_forever, daemon=True)
    thread.start()
    try:
        api = kubeapi.client_for(f"http://127.0.0.1:{stub.server_port}")
        with api:
            yield api
    finally:
        stub.shutdown()
        stub.server_close()


async def run(groups: int, rounds: int) -> None:
    state, index = build_state(groups)
    with stub_api() as api:
        await _run(Runtime(state, api), index, groups, rounds)


async def _run(
    runtime: Runtime, index: dict[tuple[str, str], list[Any]], groups: int, rounds: int
) -> None:
    fns = handlers(runtime)
    for name, (hook, kwargs) in cases(index).items():
        await measure(fns[hook], kwargs, 20)  # warm caches
        seconds = sorted(await measure(fns[hook], kwargs, rounds))
        p99 = seconds[min(len(seconds) - 1, int(len(seconds) * 0.99))] * 1000
        line = {
            "admission": name,
            "pod_groups": groups,
            "rounds": rounds,
            "p50_ms": round(statistics.median(seconds) * 1000, 3),
            "p99_ms": round(p99, 3),
            "max_ms": round(seconds[-1] * 1000, 3),
            "p99_under_target": p99 < TARGET_MS,
        }
        print(json.dumps(line), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m kbatch.webhooks.{Path(__file__).stem}")
    parser.add_argument("--groups", type=int, default=5000, help="PodGroups in the cluster")
    parser.add_argument("--rounds", type=int, default=5000, help="admissions timed per case")
    args = parser.parse_args(argv)
    asyncio.run(run(args.groups, args.rounds))
    return 0


if __name__ == "__main__":
    sys.exit(main())
