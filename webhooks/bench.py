"""Admission latency: ``python -m kbatch.webhooks.bench [--groups N] [--rounds N]``.

A cluster state of N PodGroups over 50 namespaces (each with a ResourceQuota),
10 queues and a Job per group; then each admission, as ``kbatch run``'s kopf
handler runs it (the handler coroutine with its ClusterState view; no HTTP, no
TLS), ``--rounds`` times. One JSON line per admission: p50, p99 and max in
milliseconds, and whether p99 is under the target (issue 5: 5 ms). Queue deletion
reads every PodGroup (is the queue in use?): it grows with the cluster, and is rare.
"""

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import kopf

from kbatch.api import API_VERSION, GROUP_NAME_ANNOTATION
from kbatch.cluster.state import ClusterState
from kbatch.webhooks import configuration, server

NAMESPACES = 50
QUEUES = 10
TARGET_MS = 5.0
Handler = Callable[..., Awaitable[Any]]


class Runtime:
    """What the handlers read of ``kbatch run``'s Runtime."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.api = None  # never called: every read below is found in the state
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
        template = {"spec": {"template": {"spec": pod_spec("1")}}}
        index[(namespace, name)] = [template]
    index[("ns-0", "new")] = [{"spec": {"template": {"spec": pod_spec("500m")}}}]
    return state, index


def handlers(runtime: Runtime) -> dict[str, Handler]:
    """The admission handlers ``kbatch run`` registers, by id (kopf's webhook path)."""
    registry = kopf.OperatorRegistry()
    server.register(registry, runtime)  # type: ignore[arg-type]
    return {h.id: cast(Handler, h.fn) for h in registry._webhooks.get_all_handlers()}


def cases(index: dict[tuple[str, str], list[Any]]) -> dict[str, tuple[str, dict[str, Any]]]:
    """name -> (handler id, keyword arguments)"""
    new_group: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": "new", "namespace": "ns-0"},
        "spec": {"minMember": 8, "queue": "q3"},
    }
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "ns-0"},
        "spec": {
            "template": {
                "metadata": {"annotations": {GROUP_NAME_ANNOTATION: "g-0"}},
                "spec": pod_spec("1"),
            }
        },
    }
    queue: dict[str, Any] = {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": "q3"}}
    common: dict[str, Any] = {"jobs_by_group": index}
    return {
        "PodGroup create: fill minResources + quota": (
            configuration.MUTATE_POD_GROUP,
            {"body": _body(new_group), "operation": "CREATE", **common},
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
        "Job create: hold": (
            configuration.MUTATE_JOB,
            {"body": _body(job), "operation": "CREATE", **common},
        ),
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


async def run(groups: int, rounds: int) -> None:
    state, index = build_state(groups)
    fns = handlers(Runtime(state))
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
