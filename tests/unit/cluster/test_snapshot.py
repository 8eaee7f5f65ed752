"""The snapshot: job priorities and resource dimensions as the scheduler sees them."""

import pytest

from kbatch.api.podgroup import PodGroupPhase
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.actions import enqueue
from kbatch.operators.scheduler.core.framework.interface import Snapshot


def node(name: str = "n1", cpu: str = "4") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def priority_class(name: str, value: int, global_default: bool = False) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "globalDefault": global_default,
    }


def pod(name: str, group: str | None = None, **spec: object) -> dict:
    meta: dict = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "schedulerName": "kbatch",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
            **spec,
        },
    }


def pod_group(name: str, **spec: object) -> dict:
    return {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": 1, **spec},
    }


def queue(name: str, **spec: object) -> dict:
    return {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, **spec},
    }


def snapshot_of(*objects: dict) -> Snapshot:
    state = ClusterState()
    for obj in (node(), queue("default"), *objects):
        state.apply(obj)
    return state.snapshot()


CLASSES = (priority_class("high", 1000), priority_class("zero", 0))


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        ((pod("p", priorityClassName="high"),), 1000),
        ((pod("p", priority=7),), 7),
        ((priority_class("usual", 50, global_default=True), pod("p")), 50),
        ((pod("p"),), 0),
    ],
    ids=["its class", "its spec.priority", "the global default", "nothing: 0"],
)
def test_a_pod_without_a_group_is_a_job_of_its_own_priority(
    objects: tuple[dict, ...], expected: int
) -> None:
    snap = snapshot_of(*CLASSES, *objects)
    assert snap.jobs["pod:default/p"].priority == expected


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        ((pod_group("g", priorityClassName="high"), pod("p", "g")), 1000),
        ((pod_group("g", priorityClassName="zero"), pod("p", "g", priorityClassName="high")), 0),
        ((pod_group("g"), pod("p", "g", priorityClassName="high")), 1000),
        ((pod_group("g"), priority_class("usual", 50, global_default=True)), 50),
        ((pod_group("g", priorityClassName="gone"), priority_class("usual", 50, True)), 50),
        ((pod_group("g"),), 0),
    ],
    ids=[
        "its class",
        "its class of value 0, whatever its pods say",
        "no class: its pods' highest",
        "no class, no pods: the global default",
        "an unknown class: the global default",
        "nothing: 0",
    ],
)
def test_a_pod_group_takes_its_class_priority_else_its_pods_else_the_default(
    objects: tuple[dict, ...], expected: int
) -> None:
    snap = snapshot_of(*CLASSES, *objects)
    assert snap.jobs["default/g"].priority == expected


def test_resource_names_only_min_resources_or_a_capability_name_are_dimensions() -> None:
    snap = snapshot_of(
        pod_group("g", minResources={"cpu": "1", "nvidia.com/gpu": "8"}),
        queue("capped", capability={"cpu": "2", "example.com/widget": "3"}),
        pod("p", "g"),
    )
    dims = snap.dims
    assert {"nvidia.com/gpu", "example.com/widget"} <= set(dims.names)
    min_resources = snap.jobs["default/g"].min_resources
    assert min_resources is not None
    assert dims.mapping(min_resources) == {"cpu": 1000.0, "nvidia.com/gpu": 8.0}
    capability = snap.queues["capped"].capability
    assert capability is not None
    assert capability[dims.index["example.com/widget"]] == 3.0
    assert snap.nodes.allocatable[0, dims.index["nvidia.com/gpu"]] == 0.0


def test_a_rewritten_object_names_its_resources_in_place_of_its_last_ones() -> None:
    """A write that changes which resources an object names (as many as before, or the
    same) counts its names in place of the last version's."""
    state = ClusterState()
    for obj in (node(), queue("default")):
        state.apply(obj)
    state.apply(queue("capped", capability={"cpu": "2", "example.com/a": "3"}))
    assert "example.com/a" in state.snapshot().dims.index
    state.apply(queue("capped", capability={"cpu": "2", "example.com/b": "3"}))
    names = set(state.snapshot().dims.names)
    assert "example.com/b" in names and "example.com/a" not in names
    state.apply(queue("capped", capability={"cpu": "4", "example.com/b": "1"}))
    names = set(state.snapshot().dims.names)
    assert "example.com/b" in names and "example.com/a" not in names
    state.delete("Queue", "", "capped")
    assert "example.com/b" not in state.snapshot().dims.names


def test_a_group_asking_a_resource_the_cluster_lacks_is_not_admitted() -> None:
    snap = snapshot_of(pod_group("g", minResources={"cpu": "1", "nvidia.com/gpu": "8"}))
    conf = runner.load_conf('actions: "enqueue"\ntiers:\n- plugins:\n  - name: proportion\n')
    session = runner.open_session(snap, conf, now=0.0, uid="s")
    enqueue.execute(session)
    assert session.jobs["default/g"].phase is PodGroupPhase.PENDING
    assert "nvidia.com/gpu" in (session.waiting_reason(session.jobs["default/g"]) or "")


def test_a_pending_pod_nominated_to_a_node_keeps_its_room_there() -> None:
    """status.nominatedNodeName (written when it evicted others): its request is kept on
    that node; a bound pod's nomination, or one naming no node we know, counts for nothing."""
    snap = snapshot_of(
        pod("waiting"),
        pod("bound", nodeName="n1"),
        pod("nowhere"),
    )
    assert snap.nodes.nominated.sum() == 0
    nominated = [
        {**pod("waiting"), "status": {"phase": "Pending", "nominatedNodeName": "n1"}},
        {**pod("bound", nodeName="n1"), "status": {"phase": "Running", "nominatedNodeName": "n1"}},
        {**pod("nowhere"), "status": {"phase": "Pending", "nominatedNodeName": "gone"}},
    ]
    snap = snapshot_of(*nominated)
    tasks = {t.name: t for job in snap.jobs.values() for t in job.tasks.values()}
    assert tasks["waiting"].nominated == snap.nodes.index["n1"]
    assert tasks["bound"].nominated == tasks["nowhere"].nominated == -1
    cpu = snap.dims.index["cpu"]
    assert snap.nodes.nominated[snap.nodes.index["n1"], cpu] == 1000  # millicores
    assert snap.nodes.free[snap.nodes.index["n1"], cpu] == 4000 - 1000 - 1000  # bound, kept
