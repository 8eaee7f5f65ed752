"""The nodeorder plugin: each score on its own (the others weighed 0), then together."""

from typing import Any

import pytest

from builders import Cluster, assert_node_by_node, plugin_conf, scores_by_node
from kbatch.operators.scheduler.core.framework.info import TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    LabelSelector,
    NodeSelectorTerm,
    Operator,
    PodAffinityTerm,
    PreferredNodeTerm,
    Requirement,
    Taint,
    Toleration,
    WeightedPodAffinityTerm,
)
from kbatch.operators.scheduler.core.plugins import nodeorder

ALL_OFF = {
    "leastrequested.weight": 0,
    "mostrequested.weight": 0,
    "balancedresource.weight": 0,
    "nodeaffinity.weight": 0,
    "podaffinity.weight": 0,
    "tainttoleration.weight": 0,
    "podtopologyspread.weight": 0,
    "imagelocality.weight": 0,
}
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"


def only(name: str, weight: float = 1) -> str:
    """A conf where nodeorder scores with ``name`` alone."""
    return plugin_conf("nodeorder", arguments={**ALL_OFF, f"{name}.weight": weight})


def incoming(cluster: Cluster, **spec: Any) -> TaskInfo:
    return cluster.job("incoming").task(cluster.template(**spec))


def scores(cluster: Cluster, task: TaskInfo, conf: str) -> dict[str, float]:
    session = cluster.open(conf)
    assert_node_by_node(session, task)
    return scores_by_node(session, task)


def best(found: dict[str, float]) -> str:
    return max(sorted(found), key=lambda name: found[name])


# ---------------------------------------------------------------------- resources
def loaded() -> Cluster:
    """n1 empty; n2 with 2 cpu / 8 GiB used; n3 with 3 cpu / 12 GiB used (4 cpu, 16 GiB each)."""
    return (
        Cluster()
        .node("n1")
        .node("n2")
        .node("n3")
        .pod("a", "n2", cpu=2, memory=8)
        .pod("b", "n3", cpu=3, memory=12)
    )


def test_least_and_most_requested_pick_opposite_nodes() -> None:
    cluster = loaded()
    task = incoming(cluster, cpu=1, memory=4)
    least = scores(cluster, task, only("leastrequested"))
    most = scores(cluster, task, only("mostrequested"))
    # the task counts as placed: (4 − 1)/4 and (16 − 4)/16 free on the empty node
    assert least == pytest.approx({"n1": 7.5, "n2": 2.5, "n3": 0.0})
    assert most == pytest.approx({"n1": 2.5, "n2": 7.5, "n3": 10.0})
    assert best(least) == "n1"
    assert best(most) == "n3"


def test_requested_scores_are_zero_where_the_task_does_not_fit() -> None:
    cluster = loaded()
    task = incoming(cluster, cpu=2, memory=1)
    least = scores(cluster, task, only("leastrequested"))
    most = scores(cluster, task, only("mostrequested"))
    # n3: cpu 5/4 is over, scores 0 for cpu; memory still counts
    assert least["n3"] == pytest.approx(10 * (0 + 3 / 16) / 2)
    assert most["n3"] == pytest.approx(10 * (0 + 13 / 16) / 2)


def test_balanced_allocation_prefers_even_use_of_cpu_and_memory() -> None:
    cluster = (
        Cluster()
        .node("cpu-heavy")
        .node("even")
        .node("full")
        .pod("a", "cpu-heavy", cpu=2, memory=0)
        .pod("b", "even", cpu=2, memory=8)
        .pod("c", "full", cpu=3, memory=4)
    )
    task = incoming(cluster, cpu=1, memory=4)
    found = scores(cluster, task, only("balancedresource"))
    # cpu 3/4 vs memory 4/16; 3/4 vs 12/16; a resource used up scores 0
    assert found == pytest.approx({"cpu-heavy": 5.0, "even": 10.0, "full": 0.0})


def test_a_node_without_a_resource_scores_zero_without_warnings() -> None:
    cluster = Cluster().node("no-memory", memory=0).node("n2")
    task = incoming(cluster, cpu=1, memory=1)
    conf = plugin_conf(
        "nodeorder",
        arguments={"mostrequested.weight": 1, "nodeaffinity.weight": 0, "podaffinity.weight": 0},
    )
    found = scores(cluster, task, conf)
    assert found["no-memory"] == pytest.approx(10 * (3 / 4) / 2 + 10 * (1 / 4) / 2 + 0 + 10)


# ---------------------------------------------------------------------- preferences
def prefer(weight: int, key: str, op: Operator, *values: str) -> PreferredNodeTerm:
    return PreferredNodeTerm(weight, NodeSelectorTerm((Requirement(key, op, values),)))


@pytest.mark.parametrize(
    ("preferred", "expected"),
    [
        ((), {"n1": 0, "n2": 0, "n3": 0, "n4": 0}),
        (
            (prefer(2, "zone", Operator.IN, "a"), prefer(1, "disk", Operator.EXISTS)),
            {"n1": 10, "n2": 20 / 3, "n3": 10 / 3, "n4": 0},
        ),
        ((prefer(5, "zone", Operator.NOT_IN, "a"),), {"n1": 0, "n2": 0, "n3": 10, "n4": 10}),
        ((prefer(5, "cores", Operator.GT, "8"),), {"n1": 10, "n2": 0, "n3": 0, "n4": 0}),
        # an empty term prefers no node; a weight-0 term is ignored
        ((PreferredNodeTerm(1, NodeSelectorTerm()),), {"n1": 0, "n2": 0, "n3": 0, "n4": 0}),
        (
            (prefer(0, "zone", Operator.IN, "a"), prefer(1, "disk", Operator.EXISTS)),
            {"n1": 10, "n2": 0, "n3": 10, "n4": 0},
        ),
    ],
)
def test_preferred_node_affinity(
    preferred: tuple[PreferredNodeTerm, ...], expected: dict[str, float]
) -> None:
    cluster = (
        Cluster()
        .node("n1", labels={"zone": "a", "disk": "ssd", "cores": "16"})
        .node("n2", labels={"zone": "a"})
        .node("n3", labels={"disk": "hdd"})
        .node("n4")
    )
    task = incoming(cluster, affinity=Affinity(node_preferred=preferred))
    assert scores(cluster, task, only("nodeaffinity")) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ((), {"two": 0, "one-of-each": 0, "hard-only": 10, "clean": 10}),
        ((Toleration("a", "Exists"),), {"two": 5, "one-of-each": 10, "hard-only": 10, "clean": 10}),
        (
            (Toleration("a", "Exists", effect="PreferNoSchedule"), Toleration("b", "Equal", "2")),
            {"two": 10, "one-of-each": 10, "hard-only": 10, "clean": 10},
        ),
        # a toleration for another effect does not tolerate PreferNoSchedule
        (
            (Toleration("a", "Exists", effect="NoSchedule"),),
            {"two": 0, "one-of-each": 0, "hard-only": 10, "clean": 10},
        ),
        (
            (Toleration(operator="Exists"),),
            {"two": 10, "one-of-each": 10, "hard-only": 10, "clean": 10},
        ),
    ],
)
def test_taint_toleration_counts_prefer_no_schedule_taints(
    tolerations: tuple[Toleration, ...], expected: dict[str, float]
) -> None:
    soft_a = Taint("a", "1", "PreferNoSchedule")
    soft_b = Taint("b", "2", "PreferNoSchedule")
    cluster = (
        Cluster()
        .node("two", taints=(soft_a, soft_b))
        .node("one-of-each", taints=(soft_a, Taint("c", "3", "NoSchedule")))
        .node("hard-only", taints=(Taint("c", "3", "NoSchedule"),))
        .node("clean")
    )
    task = incoming(cluster, tolerations=tolerations)
    assert scores(cluster, task, only("tainttoleration")) == pytest.approx(expected)


def weighted(
    weight: int, app: str, key: str, namespaces: tuple[str, ...] = ()
) -> WeightedPodAffinityTerm:
    selector = LabelSelector(match_labels=(("app", app),))
    return WeightedPodAffinityTerm(weight, PodAffinityTerm(selector, key, namespaces))


def zoned_with_pods() -> Cluster:
    """db runs on n1 (zone a), web on n2 (zone a); n3 is zone b; n4 has no zone."""
    cluster = (
        Cluster()
        .node("n1", labels={ZONE: "a"})
        .node("n2", labels={ZONE: "a"})
        .node("n3", labels={ZONE: "b"})
        .node("n4")
    )
    cluster.job("db").tasks(1, status=TaskStatus.RUNNING, node="n1", labels={"app": "db"})
    cluster.job("web").tasks(1, status=TaskStatus.RUNNING, node="n2", labels={"app": "web"})
    return cluster


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        (Affinity(), {"n1": 0, "n2": 0, "n3": 0, "n4": 0}),
        (
            Affinity(pod_preferred=(weighted(3, "db", ZONE),)),
            {"n1": 10, "n2": 10, "n3": 0, "n4": 0},
        ),
        (
            Affinity(pod_preferred=(weighted(3, "db", HOSTNAME),)),
            {"n1": 10, "n2": 0, "n3": 0, "n4": 0},
        ),
        (
            Affinity(anti_preferred=(weighted(2, "web", ZONE),)),
            {"n1": -10, "n2": -10, "n3": 0, "n4": 0},
        ),
        (
            Affinity(
                pod_preferred=(weighted(3, "db", ZONE),),
                anti_preferred=(weighted(1, "web", HOSTNAME),),
            ),
            {"n1": 7.5, "n2": 5, "n3": 0, "n4": 0},
        ),
        # another namespace's pods are not selected unless named
        (
            Affinity(pod_preferred=(weighted(3, "db", ZONE, ("other",)),)),
            {"n1": 0, "n2": 0, "n3": 0, "n4": 0},
        ),
        (
            Affinity(
                pod_preferred=(weighted(3, "db", ZONE, ("default",)), weighted(1, "nope", ZONE))
            ),
            {"n1": 7.5, "n2": 7.5, "n3": 0, "n4": 0},
        ),
    ],
)
def test_preferred_pod_affinity(affinity: Affinity, expected: dict[str, float]) -> None:
    cluster = zoned_with_pods()
    task = incoming(cluster, affinity=affinity)
    assert scores(cluster, task, only("podaffinity")) == pytest.approx(expected)


def test_preferred_pod_affinity_follows_placements_in_the_session() -> None:
    cluster = zoned_with_pods()
    cache = cluster.job("cache").task(cluster.template(labels={"app": "cache"}))
    task = incoming(cluster, affinity=Affinity(pod_preferred=(weighted(1, "cache", ZONE),)))
    session = cluster.open(only("podaffinity"))
    assert scores_by_node(session, task) == {"n1": 0, "n2": 0, "n3": 0, "n4": 0}
    session.set_status(cache, TaskStatus.ALLOCATED, session.nodes.index["n3"])
    assert scores_by_node(session, task) == {"n1": 0, "n2": 0, "n3": 10, "n4": 0}
    assert_node_by_node(session, task)


# ---------------------------------------------------------------------- weights
def test_weights_scale_each_score_and_zero_switches_it_off() -> None:
    cluster = loaded()
    task = incoming(cluster, cpu=1, memory=4)
    single = scores(cluster, task, only("leastrequested"))
    assert scores(cluster, task, only("leastrequested", 3)) == pytest.approx(
        {name: 3 * score for name, score in single.items()}
    )
    off = scores(cluster, task, plugin_conf("nodeorder", arguments=ALL_OFF))
    assert off == {"n1": 0, "n2": 0, "n3": 0}


def test_default_weights_add_least_requested_balanced_and_taint_toleration() -> None:
    cluster = loaded()
    task = incoming(cluster, cpu=1, memory=4)
    total = scores(cluster, task, plugin_conf("nodeorder"))
    parts = [
        scores(cluster, task, only(name))
        for name in ("leastrequested", "balancedresource", "tainttoleration")
    ]
    assert total == pytest.approx({name: sum(p[name] for p in parts) for name in total})
    assert best(total) == "n1"


def test_a_mixed_cluster_scores_the_same_node_by_node() -> None:
    cluster = zoned_with_pods().node(
        "n5", labels={"zone": "a"}, taints=(Taint("x", effect="PreferNoSchedule"),)
    )
    cluster.pod("busy", "n3", cpu=3, memory=2)
    task = incoming(
        cluster,
        cpu=1,
        memory=2,
        affinity=Affinity(
            node_preferred=(prefer(4, ZONE, Operator.IN, "a"),),
            pod_preferred=(weighted(2, "db", ZONE),),
            anti_preferred=(weighted(1, "web", HOSTNAME),),
        ),
    )
    conf = plugin_conf("nodeorder", arguments={"mostrequested.weight": 2, "podaffinity.weight": 2})
    session = cluster.open(conf)
    assert_node_by_node(session, task)


# ---------------------------------------------------------------------- arguments
def test_parse_arguments() -> None:
    assert nodeorder.parse_arguments({}) == nodeorder.NodeOrderArguments()
    parsed = nodeorder.parse_arguments({"nodeaffinity.weight": "2", "mostrequested.weight": 1.5})
    assert parsed.node_affinity == 2.0
    assert parsed.most_requested == 1.5
    assert parsed.least_requested == 1.0


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"leastrequested.weight": "heavy"}, "leastrequested.weight must be a number, not 'heavy'"),
        ({"podaffinity.weight": True}, "podaffinity.weight must be a number, not True"),
        ({"tainttoleration.weight": -1}, "tainttoleration.weight must not be negative"),
        ({"balancedresource.weight": float("nan")}, "balancedresource.weight must be a number"),
        ({"imagelocality.weight": -2}, "imagelocality.weight must not be negative"),
        (
            {"selectorspread.weight": 1},
            "unknown argument 'selectorspread.weight' for plugin nodeorder",
        ),
    ],
)
def test_bad_arguments_are_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        nodeorder.parse_arguments(arguments)


# ---------------------------------------------------------------------- image locality
MIB = 1024 * 1024


def image_score(summed: float, containers: int) -> float:
    """kube-scheduler's ImageLocality score (0..100, whole), over 10."""
    top = 1000 * MIB * containers
    clamped = min(max(summed, 23 * MIB), top)
    return (100 * (clamped - 23 * MIB) // (top - 23 * MIB)) / 10


def test_image_locality_counts_the_images_a_node_holds_scaled_by_their_spread() -> None:
    cluster = Cluster().node("n1").node("n2").node("n3")
    cluster.node_images = {
        "n1": {"train:v1": 600 * MIB},
        "n2": {"train:v1": 600 * MIB, "docker.io/sidecar:latest": 90 * MIB},
    }
    task = incoming(cluster, images=("train:v1", "docker.io/sidecar:latest"))
    found = scores(cluster, task, only("imagelocality"))
    train, sidecar = 600 * MIB * 2 // 3, 90 * MIB // 3  # two nodes of three hold it; one
    assert found == pytest.approx(
        {"n1": image_score(train, 2), "n2": image_score(train + sidecar, 2), "n3": 0}
    )
    assert found["n2"] > found["n1"] > 0


def test_image_locality_scores_an_image_every_node_holds_in_full_and_small_ones_zero() -> None:
    cluster = Cluster().node("n1").node("n2")
    cluster.node_images = {"n1": {"big:1": 1500 * MIB, "tiny:1": 5 * MIB}, "n2": {"big:1": 1}}
    assert scores(cluster, incoming(cluster, images=("big:1",)), only("imagelocality")) == {
        "n1": 10.0,  # (clamped to 1000 MiB: the most)
        "n2": 0.0,  # (under 23 MiB: the least)
    }
    tiny = incoming(cluster, images=("tiny:1",))
    assert scores(cluster, tiny, only("imagelocality")) == {"n1": 0.0, "n2": 0.0}


def test_image_locality_is_on_by_default_and_nothing_without_images() -> None:
    cluster = Cluster().node("n1").node("n2")
    cluster.node_images = {"n2": {"train:v1": 900 * MIB}}
    with_image = incoming(cluster, images=("train:v1",))
    without = incoming(cluster, images=("other:v1",))
    assert best(scores(cluster, with_image, plugin_conf("nodeorder"))) == "n2"
    plain = scores(cluster, without, plugin_conf("nodeorder"))
    assert plain["n1"] == plain["n2"]
    assert scores(cluster, with_image, only("imagelocality", 0)) == {"n1": 0, "n2": 0}
