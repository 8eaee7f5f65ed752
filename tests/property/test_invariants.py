"""The scheduler's promises, checked after every simulated session on random workloads:
gangs in weighted queues at two priorities, of random sizes, minimums, runtimes and
arrival times, under the default conf and with ``preempt`` added.

- no node ever holds more than it can (cpu, memory, pods), deleting pods counted;
- a gang is never partly bound: its pods running or done are none or at least its
  minMember, whatever was bound, evicted or finished in between;
- every pod evicted is told why (the DisruptionTarget condition) before it goes;
- no deadlock: with Jobs (whose evicted pods come back) and every gang able to run on
  the empty cluster, all the work is done in the end.

Run with more examples (``KBATCH_PROPERTY_EXAMPLES=1000``, and under random seeds) it
found two deadlocks, each now a test of its own: a gang whose pods never fit the nodes held its promised room for
ever (tests/unit/actions/test_enqueue.py, tests/scenarios/test_admission.py), and
reserve kept room a preemptor had been promised that session, two nominations that did
not both fit then waiting on each other (tests/unit/actions/test_reserve.py).
"""

import os
from collections.abc import Iterable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kbatch.api.quantity import parse_quantity
from kbatch.config import DEFAULT_CONF
from kbatch.operators.scheduler.core.runner import load_conf
from kbatch.sim import manifests, output, runner

Obj = dict[str, Any]
# (KBATCH_PROPERTY_EXAMPLES, as for the other property tests, to look harder: the two
# bugs this found took hundreds of examples each)
SETTINGS = settings(
    max_examples=int(os.environ.get("KBATCH_PROPERTY_EXAMPLES", 40)),
    deadline=None,
    derandomize=True,
    database=None,
)
GROUPS = "scheduling.incubator.k8s.io/v1alpha1"
NODE_CPU = (4, 8)
WITH_PREEMPT = DEFAULT_CONF.replace("reclaim, allocate", "reclaim, allocate, preempt")
CONFS = {"default": DEFAULT_CONF, "preempt": WITH_PREEMPT}
DISRUPTION = "DisruptionTarget"


def _node(name: str, cpu: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": str(cpu), "memory": "32Gi", "pods": "8"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def _priority_class(name: str, value: int) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def _pod_spec(cpu: int, priority: str | None) -> Obj:
    spec: Obj = {
        "schedulerName": "kbatch",
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}},
            }
        ],
    }
    if priority is not None:
        spec["priorityClassName"] = priority
    return spec


@st.composite
def workloads(draw: st.DrawFn, jobs: bool) -> tuple[list[Obj], list[int], list[tuple[int, int]]]:
    """Nodes of 4 or 8 cpu, queues q0.. of weights 1-4, and gangs of 1-5 pods of 1-4 cpu
    (each fits the smallest node), arriving at 0-60 s and running 5-200 s; as PodGroups
    with bare pods, or (``jobs``) with a batch/v1 Job each. Also the nodes' cpus and each
    gang's (size, cpu per pod)."""
    node_cpus = draw(st.lists(st.sampled_from(NODE_CPU), min_size=1, max_size=3))
    docs: list[Obj] = [_node(f"n{i}", cpu) for i, cpu in enumerate(node_cpus)]
    docs += [_priority_class("low", 10), _priority_class("high", 1000)]
    queues = draw(st.integers(1, 3))
    for q in range(queues):
        weight = draw(st.integers(1, 4))
        docs.append(
            {"apiVersion": GROUPS, "kind": "Queue", "metadata": {"name": f"q{q}"},
             "spec": {"weight": weight}}
        )  # fmt: skip
    gangs: list[tuple[int, int]] = []
    for g in range(draw(st.integers(1, 8))):
        size = draw(st.integers(1, 5))
        minimums = st.one_of(st.just(size), st.integers(1, size))  # whole gangs, often
        cpu = draw(st.integers(1, min(node_cpus)))
        gangs.append((size, cpu))
        priority = draw(st.sampled_from([None, "low", "high"]))
        annotations = {
            manifests.SUBMIT_AT: f"{draw(st.integers(0, 60))}s",
        }
        group = {
            "apiVersion": GROUPS,
            "kind": "PodGroup",
            "metadata": {"name": f"g{g}", "namespace": "default", "annotations": annotations},
            "spec": {"minMember": draw(minimums), "queue": f"q{g % queues}"},
        }
        if priority is not None:
            group["spec"]["priorityClassName"] = priority
        docs.append(group)
        pod_annotations = {
            "scheduling.k8s.io/group-name": f"g{g}",
            manifests.DURATION: f"{draw(st.integers(5, 200))}s",
        }
        if jobs:
            docs.append(_job(f"g{g}", size, cpu, priority, {**annotations}, pod_annotations))
            continue
        for k in range(size):
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"g{g}-{k}",
                        "namespace": "default",
                        "annotations": {**annotations, **pod_annotations},
                    },
                    "spec": _pod_spec(cpu, priority),
                }
            )
    return docs, node_cpus, gangs


def _job(
    name: str, size: int, cpu: int, priority: str | None, annotations: Obj, pod_annotations: Obj
) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "parallelism": size,
            "completions": size,
            "template": {
                "metadata": {"annotations": pod_annotations},
                "spec": {**_pod_spec(cpu, priority), "restartPolicy": "Never"},
            },
        },
    }


class CheckedSimulation(runner.Simulation):
    """The simulator, its state checked after every tick (``violations``)."""

    def __init__(self, docs: list[Obj], conf: str, until: float) -> None:
        loaded = manifests.load_documents(docs)
        super().__init__(loaded, load_conf(conf, "<conf>"), runner.Options(until=until))
        self.violations: list[str] = []

    def tick(self, now: float) -> bool:
        changed = super().tick(now)
        pods = list(self.cluster.state.list("Pod"))
        self.violations += _overcommitted(now, self.cluster.state.list("Node"), pods)
        self.violations += _partly_bound(now, self.cluster.state.list("PodGroup"), pods)
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
                if not _has_condition(pod, DISRUPTION):
                    self.violations.append(f"at {now}: {key} deleted without {DISRUPTION}")
        return changed


def _cpu(pod: Obj) -> float:
    total = 0.0
    for container in pod["spec"]["containers"]:
        requests = (container.get("resources") or {}).get("requests") or {}
        total += float(parse_quantity(str(requests.get("cpu", "0"))))
    return total


def _holds_room(pod: Obj) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return bool(pod["spec"].get("nodeName")) and phase not in ("Succeeded", "Failed")


def _overcommitted(now: float, nodes: Iterable[Obj], pods: list[Obj]) -> list[str]:
    out = []
    for node in nodes:
        name = node["metadata"]["name"]
        on_it = [p for p in pods if p["spec"].get("nodeName") == name and _holds_room(p)]
        cpu = float(parse_quantity(node["status"]["allocatable"]["cpu"]))
        slots = int(node["status"]["allocatable"]["pods"])
        used = sum(_cpu(p) for p in on_it)
        if used > cpu + 1e-9 or len(on_it) > slots:
            out.append(f"at {now}: node {name} holds {used} cpu in {len(on_it)} pods")
    return out


def _partly_bound(now: float, groups: Iterable[Obj], pods: list[Obj]) -> list[str]:
    out = []
    for group in groups:
        meta = group["metadata"]
        members = [
            p
            for p in pods
            if p["metadata"]["namespace"] == meta["namespace"]
            and (p["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name")
            == meta["name"]
        ]
        running = sum(
            1 for p in members if _holds_room(p) and not p["metadata"].get("deletionTimestamp")
        )
        done = sum(1 for p in members if (p.get("status") or {}).get("phase") == "Succeeded")
        minimum = group["spec"].get("minMember", 1)
        if 0 < running + done < minimum:
            out.append(
                f"at {now}: PodGroup {meta['name']} has {running} running and {done} done "
                f"of minMember {minimum}"
            )
    return out


def _has_condition(pod: Obj, kind: str) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == kind and c.get("status") == "True" for c in conditions)


def _fits_empty(node_cpus: list[int], size: int, cpu: int) -> bool:
    """Can ``size`` pods of ``cpu`` each run at once on the empty nodes (8 pods a node)?"""
    return sum(min(free // cpu, 8) for free in node_cpus) >= size


@SETTINGS
@given(workloads(jobs=False), st.sampled_from(sorted(CONFS)))
def test_no_node_overcommitted_no_gang_partly_bound_every_eviction_told(
    workload: tuple[list[Obj], list[int], list[tuple[int, int]]], conf: str
) -> None:
    docs, _, _ = workload
    simulation = CheckedSimulation(docs, CONFS[conf], until=900.0)
    simulation.run()
    assert simulation.violations == []


@SETTINGS
@given(workloads(jobs=True), st.sampled_from(sorted(CONFS)))
def test_every_gang_that_fits_the_empty_cluster_runs_to_the_end(
    workload: tuple[list[Obj], list[int], list[tuple[int, int]]], conf: str
) -> None:
    docs, node_cpus, gangs = workload
    simulation = CheckedSimulation(docs, CONFS[conf], until=6 * 3600.0)
    outcome = simulation.run()
    assert simulation.violations == []
    groups = {g["name"]: g for g in output.to_json(outcome)["podGroups"]}
    for g, (size, cpu) in enumerate(gangs):
        if _fits_empty(node_cpus, size, cpu):
            assert groups[f"g{g}"]["phase"] == "Completed", (g, size, cpu, node_cpus, groups)
    assert outcome.settled
