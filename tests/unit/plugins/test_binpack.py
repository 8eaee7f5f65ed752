"""The binpack plugin: fill the nodes already in use, weighed per resource."""

from typing import Any

import pytest

from builders import Cluster, assert_node_by_node, plugin_conf, scores_by_node
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.plugins import binpack


def incoming(cluster: Cluster, **spec: Any) -> TaskInfo:
    return cluster.job("incoming").task(cluster.template(**spec))


def scores(
    cluster: Cluster, task: TaskInfo, arguments: dict[str, object] | None = None
) -> dict[str, float]:
    session = cluster.open(plugin_conf("binpack", arguments=arguments))
    assert_node_by_node(session, task)
    return scores_by_node(session, task)


def loaded() -> Cluster:
    """4 cpu, 16 GiB, 4 gpu nodes: n1 empty; n2 with 2 cpu, 4 GiB; n3 with 3 cpu, 15 GiB used."""
    return (
        Cluster()
        .node("n1", gpu=4)
        .node("n2", gpu=4)
        .node("n3", gpu=4)
        .pod("a", "n2", cpu=2, memory=4)
        .pod("b", "n3", cpu=3, memory=15)
    )


def test_binpack_prefers_the_fullest_node_that_fits() -> None:
    cluster = loaded()
    found = scores(cluster, incoming(cluster, cpu=1, memory=1))
    assert found == pytest.approx(
        {
            "n1": 10 * (1 / 4 + 1 / 16) / 2,
            "n2": 10 * (3 / 4 + 5 / 16) / 2,
            "n3": 10 * (4 / 4 + 16 / 16) / 2,
        }
    )
    assert max(found, key=lambda name: found[name]) == "n3"


def test_a_node_the_task_does_not_fit_scores_zero() -> None:
    cluster = loaded()
    found = scores(cluster, incoming(cluster, cpu=2, memory=1))
    assert found["n3"] == 0
    assert found["n2"] == pytest.approx(10 * (4 / 4 + 5 / 16) / 2)


@pytest.mark.parametrize(
    ("arguments", "cpu", "memory", "gpu", "expected_n2"),
    [
        # weights per resource
        ({"binpack.cpu": 3, "binpack.memory": 1}, 1, 1, 0, 10 * (3 * 3 / 4 + 5 / 16) / 4),
        ({"binpack.memory": 0}, 1, 1, 0, 10 * (3 / 4) / 1),
        # a resource the task does not request counts for nothing
        ({}, 1, 0, 0, 10 * (3 / 4)),
        ({"binpack.cpu": 0}, 1, 0, 0, 0.0),
        # other resources only when listed, with their weight
        ({}, 1, 1, 2, 10 * (3 / 4 + 5 / 16) / 2),
        ({"binpack.resources": "nvidia.com/gpu"}, 1, 1, 2, 10 * (3 / 4 + 5 / 16 + 2 / 4) / 3),
        (
            {
                "binpack.resources": "nvidia.com/gpu, example.com/foo",
                "binpack.resources.nvidia.com/gpu": 4,
            },
            1,
            1,
            2,
            10 * (3 / 4 + 5 / 16 + 4 * 2 / 4) / 6,
        ),
        # the plugin's own weight scales the whole score
        ({"binpack.weight": 2}, 1, 1, 0, 2 * 10 * (3 / 4 + 5 / 16) / 2),
        ({"binpack.weight": 0}, 1, 1, 0, 0.0),
    ],
)
def test_weights(
    arguments: dict[str, object], cpu: float, memory: float, gpu: float, expected_n2: float
) -> None:
    cluster = loaded()
    found = scores(cluster, incoming(cluster, cpu=cpu, memory=memory, gpu=gpu), arguments)
    assert found["n2"] == pytest.approx(expected_n2)


def test_a_best_effort_task_scores_zero_everywhere() -> None:
    cluster = loaded()
    assert scores(cluster, incoming(cluster, cpu=0, memory=0)) == {"n1": 0, "n2": 0, "n3": 0}


def test_a_node_without_the_resource_scores_zero() -> None:
    cluster = Cluster().node("plain").node("gpu", gpu=2)
    task = incoming(cluster, cpu=1, memory=1, gpu=1)
    found = scores(cluster, task, {"binpack.resources": "nvidia.com/gpu"})
    assert found["plain"] == 0
    assert found["gpu"] == pytest.approx(10 * (1 / 4 + 1 / 16 + 1 / 2) / 3)


def test_binpack_and_nodeorder_scores_add_across_tiers() -> None:
    cluster = loaded()
    task = incoming(cluster, cpu=1, memory=1)
    two_tiers = """
actions: allocate
tiers:
- plugins: [{name: binpack}]
- plugins:
  - name: nodeorder
    arguments: {balancedresource.weight: 0, tainttoleration.weight: 0}
"""
    both = cluster.open(two_tiers)
    least_only = {"balancedresource.weight": 0, "tainttoleration.weight": 0}
    least = scores_by_node(cluster.open(plugin_conf("nodeorder", arguments=least_only)), task)
    packed = scores(cluster, task)
    assert scores_by_node(both, task) == pytest.approx({n: least[n] + packed[n] for n in least})


# ---------------------------------------------------------------------- arguments
def test_parse_arguments() -> None:
    assert binpack.parse_arguments({}) == binpack.BinpackArguments()
    parsed = binpack.parse_arguments(
        {
            "binpack.weight": 10,
            "binpack.cpu": "2",
            "binpack.resources": " nvidia.com/gpu ,example.com/foo,",
            "binpack.resources.example.com/foo": 3,
        }
    )
    assert parsed == binpack.BinpackArguments(
        weight=10, cpu=2, memory=1, resources=(("nvidia.com/gpu", 1.0), ("example.com/foo", 3.0))
    )


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"binpack.weight": "lots"}, "binpack.weight must be a number, not 'lots'"),
        ({"binpack.cpu": -1}, "binpack.cpu must not be negative"),
        ({"binpack.memory": False}, "binpack.memory must be a number, not False"),
        ({"binpack.resources": ["nvidia.com/gpu"]}, "binpack.resources must be a string"),
        ({"binpack.resources": "cpu"}, "binpack.resources lists 'cpu'"),
        (
            {"binpack.resources.nvidia.com/gpu": 2},
            "binpack.resources.nvidia.com/gpu is set but 'nvidia.com/gpu' is not listed",
        ),
        (
            {"binpack.resources": "nvidia.com/gpu", "binpack.resources.nvidia.com/gpu": "x"},
            "binpack.resources.nvidia.com/gpu must be a number",
        ),
        ({"binpack.gpu": 1}, "unknown argument 'binpack.gpu' for plugin binpack"),
    ],
)
def test_bad_arguments_are_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        binpack.parse_arguments(arguments)
