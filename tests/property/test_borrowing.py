"""Borrowing (DESIGN §14) on random clusters with the default conf: a queue never holds
more than its capability, a queue with borrowed groups is never further beyond its
deserved share than its borrowingLimit, and an idle queue's guarantee stays free."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kbatch.api.quantity import parse_quantity
from kbatch.sim import simulate

SETTINGS = settings(max_examples=60, deadline=None)


def queue(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def one_pod_job(name: str, queue_name: str, cpu: int) -> list[dict[str, Any]]:
    group = {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": 1, "queue": queue_name},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": {"scheduling.k8s.io/group-name": name}},
        "spec": {
            "schedulerName": "kbatch",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
        },
    }
    return [group, pod]


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]], int]:
    """Nodes of 8 cpu, queues a and b (random weights, capabilities, borrowingLimits, jobs
    of 1-6 cpu, all at once; maybe one of b's that fits no node, leaving its share for a
    to borrow) and, if drawn, an idle queue with a cpu guarantee."""
    nodes = draw(st.integers(1, 3))
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}"},
            "status": {
                "allocatable": {"cpu": "8", "memory": "64Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in range(nodes)
    ]
    specs: dict[str, dict[str, Any]] = {}
    for name in ("a", "b"):
        spec: dict[str, Any] = {"weight": draw(st.integers(1, 4))}
        if draw(st.booleans()):
            spec["capability"] = {"cpu": str(draw(st.integers(2, 8 * nodes)))}
        if draw(st.booleans()):
            spec["borrowingLimit"] = {"cpu": str(draw(st.integers(0, 6)))}
        specs[name] = spec
        docs.append(queue(name, spec))
        for j, cpu in enumerate(draw(st.lists(st.integers(1, 6), min_size=1, max_size=12))):
            docs += one_pod_job(f"{name}-{j}", name, cpu)
    if draw(st.booleans()):
        # a job of b's larger than any node: b's share stays unused, so a may borrow it
        docs += one_pod_job("b-huge", "b", draw(st.integers(9, 12)))
    guarantee = draw(st.integers(0, 4))
    if guarantee:
        docs.append(
            queue("idle", {"weight": 1, "guarantee": {"resource": {"cpu": str(guarantee)}}})
        )
    return docs, specs, guarantee * 1000 if guarantee else 0


def cpu_of(resources: dict[str, Any]) -> float:
    return float(parse_quantity(str(resources.get("cpu", "0")))) * 1000


@SETTINGS
@given(clusters())
def test_borrowing_stays_within_every_limit(
    cluster: tuple[list[dict[str, Any]], dict[str, dict[str, Any]], int],
) -> None:
    docs, specs, guarantee = cluster
    result = simulate(documents=docs, until="3s")
    queues = {q["name"]: q for q in result["queues"]}
    held = 0.0
    for name, spec in specs.items():
        status = queues[name]
        allocated, deserved = cpu_of(status["allocated"]), cpu_of(status["deserved"])
        held += allocated
        if "capability" in spec:
            assert allocated <= cpu_of(spec["capability"]) + 1e-6, (name, status)
        borrowing = [
            g
            for g in result["podGroups"]
            if g["queue"] == name
            and any(
                c["type"] == "kbatch.io/Borrowing" and c["status"] == "True"
                for c in g.get("conditions", [])
            )
        ]
        if borrowing and "borrowingLimit" in spec:
            assert allocated - deserved <= cpu_of(spec["borrowingLimit"]) + 1e-6, (name, status)
    total = 8000.0 * sum(1 for d in docs if d["kind"] == "Node")
    assert total - held >= guarantee - 1e-6  # the idle queue's guarantee stays free
