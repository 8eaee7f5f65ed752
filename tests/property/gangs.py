"""Random gangs for the property tests that run the simulator: nodes, weighted queues,
two priority classes, and gangs of random sizes, minimums, runtimes and arrivals."""

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from kbatch.sim import manifests

Obj = dict[str, Any]
GROUPS = "scheduling.incubator.k8s.io/v1alpha1"
GROUP_NAME = "scheduling.k8s.io/group-name"
NODE_CPU = (4, 8)
NODE_PODS = 8


@dataclass(frozen=True)
class Workload:
    docs: list[Obj]
    node_cpus: list[int]
    gangs: list[tuple[int, int]]  # each gang's size and cpu per pod, in order (g0, g1, ...)

    def fits_empty(self, gang: int) -> bool:
        """Can gang ``gang``'s pods all run at once on the empty nodes?"""
        size, cpu = self.gangs[gang]
        return sum(min(free // cpu, NODE_PODS) for free in self.node_cpus) >= size


def node(name: str, cpu: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": str(cpu), "memory": "32Gi", "pods": str(NODE_PODS)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def priority_class(name: str, value: int) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def pod_spec(cpu: int, priority: str | None, deadline: int | None = None) -> Obj:
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
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return spec


def job(
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
                "spec": {**pod_spec(cpu, priority), "restartPolicy": "Never"},
            },
        },
    }


@st.composite
def workloads(
    draw: st.DrawFn, jobs: bool = False, arrive_by: int = 60, deadlines: bool = False
) -> Workload:
    """Nodes of 4 or 8 cpu, queues q0.. of weights 1-4, and gangs of 1-5 pods of 1-4 cpu
    (each fits the smallest node), arriving by ``arrive_by`` s and running 5-200 s; as
    PodGroups with bare pods, or (``jobs``) with a batch/v1 Job each; ``deadlines``: each
    bare pod's activeDeadlineSeconds its runtime (a runtime known ahead)."""
    node_cpus = draw(st.lists(st.sampled_from(NODE_CPU), min_size=1, max_size=3))
    docs: list[Obj] = [node(f"n{i}", cpu) for i, cpu in enumerate(node_cpus)]
    docs += [priority_class("low", 10), priority_class("high", 1000)]
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
        annotations = {manifests.SUBMIT_AT: f"{draw(st.integers(0, arrive_by))}s"}
        group = {
            "apiVersion": GROUPS,
            "kind": "PodGroup",
            "metadata": {"name": f"g{g}", "namespace": "default", "annotations": annotations},
            "spec": {"minMember": draw(minimums), "queue": f"q{g % queues}"},
        }
        if priority is not None:
            group["spec"]["priorityClassName"] = priority
        docs.append(group)
        runtime = draw(st.integers(5, 200))
        pod_annotations = {GROUP_NAME: f"g{g}", manifests.DURATION: f"{runtime}s"}
        if jobs:
            docs.append(job(f"g{g}", size, cpu, priority, {**annotations}, pod_annotations))
            continue
        for k in range(size):
            metadata = {
                "name": f"g{g}-{k}",
                "namespace": "default",
                "annotations": {**annotations, **pod_annotations},
            }
            spec = pod_spec(cpu, priority, runtime if deadlines else None)
            docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    return Workload(docs, node_cpus, gangs)
