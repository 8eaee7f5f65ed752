"""A pod resized in place: its containers hold of a node what kube-scheduler counts
(each resource's largest of the spec's request, the status's and the allocated; for
an Infeasible resize, the status's and the allocated), so a pod is not bound where the
kubelet still holds the old, larger requests."""

from typing import Any

import pytest

from kbatch.cluster import records
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from tests.unit.cluster.test_state import node


def running(
    spec_cpu: str,
    status_cpu: str | None = None,
    allocated_cpu: str | None = None,
    pending: str | None = None,
    name: str = "p",
) -> dict[str, Any]:
    """A pod of one container ``c`` bound to n1, Running, whose kubelet reports
    ``status_cpu`` and ``allocated_cpu`` (None: not reported)."""
    cs: dict[str, Any] = {"name": "c", "ready": True}
    if status_cpu is not None:
        cs["resources"] = {"requests": {"cpu": status_cpu}}
    if allocated_cpu is not None:
        cs["allocatedResources"] = {"cpu": allocated_cpu}
    status: dict[str, Any] = {"phase": "Running", "containerStatuses": [cs]}
    if pending:
        status["conditions"] = [{"type": "PodResizePending", "status": "True", "reason": pending}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "nodeName": "n1",
            "schedulerName": "kbatch",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": spec_cpu}}}],
        },
        "status": status,
    }


def cpu(pod: dict[str, Any]) -> float:
    return dict(records.parse_pod(pod).spec.request)["cpu"]


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        (running("1", "1", "1"), 1000),  # (as asked: the usual case)
        (running("1"), 1000),  # (no resources reported: the spec's)
        (running("1", "3", "3"), 3000),  # lowered in the spec, not yet actuated
        (running("3", "1", "1", "Deferred"), 3000),  # raised, deferred: the spec's
        (running("3", "1", "1", "Infeasible"), 1000),  # raised, never to be: the status's
        (running("1", "2", "3"), 3000),  # allocated, not yet running with it
    ],
)
def test_a_resized_pod_counts_what_its_node_holds(pod: dict[str, Any], expected: float) -> None:
    assert cpu(pod) == pytest.approx(expected)


def test_a_pod_running_as_it_asks_shares_its_template_s_parse() -> None:
    plain = records.parse_pod(running("1")).spec
    assert records.parse_pod(running("1", "1", "1")).spec is plain
    assert records.parse_pod(running("1", "1000m", "1")).spec is plain  # (written otherwise)
    zero = running("1", "1", "1")
    zero["status"]["containerStatuses"][0]["resources"]["requests"]["memory"] = "0"
    assert records.parse_pod(zero).spec is plain


def test_a_sidecar_is_counted_as_resized_and_a_plain_init_container_is_not() -> None:
    pod = running("1", "1", "1")
    pod["spec"]["initContainers"] = [
        {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
        {"name": "init", "resources": {"requests": {"cpu": "1"}}},
    ]
    pod["status"]["initContainerStatuses"] = [
        {"name": "side", "resources": {"requests": {"cpu": "2"}}},
        {"name": "init", "resources": {"requests": {"cpu": "5"}}},
    ]
    assert cpu(pod) == pytest.approx(3000)  # c 1 + side 2; init (1 + 2) below that


def test_a_status_write_that_ends_a_resize_is_read() -> None:
    """The record of a status write keeps the last spec parse only while the status
    reports the same resources."""
    state = ClusterState()
    state.apply(node("n1"))
    state.apply(running("1", "3", "3"))
    assert _held(state) == pytest.approx(3000)
    state.apply(running("1", "1", "1"))  # (actuated: the kubelet reports 1)
    assert _held(state) == pytest.approx(1000)


def _held(state: ClusterState) -> float:
    snapshot = state.snapshot()
    nodes = snapshot.nodes
    return float(nodes.used[nodes.index["n1"], snapshot.dims.index["cpu"]])


def test_a_bad_allocated_amount_refuses_the_pod_naming_the_field() -> None:
    with pytest.raises(
        ObjectError, match=r"status\.containerStatuses\[0\]\.allocatedResources\.cpu"
    ):
        records.parse_pod(running("1", "1", "lots"))
