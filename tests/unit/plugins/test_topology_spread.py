"""Pod topology spread (``plugins.topology_spread``) through the predicates and nodeorder
plugins: kube-scheduler's PodTopologySpread, node by node."""

from typing import Any

import pytest

from builders import Cluster, assert_node_by_node, failing_nodes, plugin_conf, scores_by_node
from kbatch.operators.scheduler.core.framework.info import TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    LabelSelector,
    NodeSelectorTerm,
    Operator,
    Requirement,
    SpreadConstraint,
    Taint,
    Toleration,
)
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.plugins.topology_spread import MISSING_LABEL, SKEWED
from tests.unit.plugins.test_predicates import zoned  # n1, n2 in zone a; n3 in b; n4 none

PREDICATES = plugin_conf("predicates")
ZONE = "topology.kubernetes.io/zone"
WEB = LabelSelector((("app", "web"),))
SCORE_ONLY = plugin_conf(
    "nodeorder",
    arguments={
        "leastrequested.weight": 0,
        "balancedresource.weight": 0,
        "tainttoleration.weight": 0,
        "nodeaffinity.weight": 0,
        "podaffinity.weight": 0,
        "podtopologyspread.weight": 1,
    },
)


def zone_spread(skew: int = 1, hard: bool = True, **more: Any) -> SpreadConstraint:
    return SpreadConstraint(max_skew=skew, topology_key=ZONE, hard=hard, selector=WEB, **more)


def web_on(cluster: Cluster, node: str, count: int = 1, **kw: Any) -> Cluster:
    """``count`` running pods labelled app=web on ``node``."""
    name = f"web-{len(cluster.jobs)}"
    cluster.job(name, namespace=kw.pop("namespace", "default")).tasks(
        count, status=kw.pop("status", TaskStatus.RUNNING), node=node, labels={"app": "web"}
    )
    return cluster


def incoming(cluster: Cluster, *spread: SpreadConstraint, **spec: Any) -> TaskInfo:
    labels = spec.pop("labels", {"app": "web"})
    template = cluster.template(labels=labels, spread=spread, **spec)
    return cluster.job("incoming").task(template)


def check(cluster: Cluster, task: TaskInfo) -> dict[str, list[str]]:
    session = cluster.open(PREDICATES)
    assert_node_by_node(session, task)
    return failing_nodes(session, task)


def test_a_domain_may_not_pass_the_skew_and_a_node_without_the_key_never_takes_it() -> None:
    cluster = web_on(zoned(), "n1")
    task = incoming(cluster, zone_spread())
    assert check(cluster, task) == {SKEWED: ["n1", "n2"], MISSING_LABEL: ["n4"]}


def test_a_pod_its_selector_does_not_select_adds_nothing_to_its_domain() -> None:
    cluster = web_on(zoned(), "n1")
    task = incoming(cluster, zone_spread(), labels={"app": "db"})
    assert check(cluster, task) == {MISSING_LABEL: ["n4"]}


def test_a_wider_skew_allows_more() -> None:
    cluster = web_on(zoned(), "n1")
    assert check(cluster, incoming(cluster, zone_spread(skew=2))) == {MISSING_LABEL: ["n4"]}


@pytest.mark.parametrize(
    "kw",
    [
        {"namespace": "other"},
        {"status": TaskStatus.RELEASING},  # (terminating: kube-scheduler skips them)
        {"status": TaskStatus.SUCCEEDED},
    ],
)
def test_pods_of_other_namespaces_terminating_or_finished_are_not_counted(
    kw: dict[str, Any],
) -> None:
    cluster = web_on(zoned(), "n1", **kw)
    assert check(cluster, incoming(cluster, zone_spread())) == {MISSING_LABEL: ["n4"]}


def test_min_domains_takes_the_minimum_as_zero_while_domains_are_fewer() -> None:
    cluster = web_on(web_on(zoned(), "n1"), "n3")
    assert check(cluster, incoming(cluster, zone_spread())) == {MISSING_LABEL: ["n4"]}
    cluster = web_on(web_on(zoned(), "n1"), "n3")
    assert check(cluster, incoming(cluster, zone_spread(min_domains=3))) == {
        SKEWED: ["n1", "n2", "n3"],
        MISSING_LABEL: ["n4"],
    }


ONLY_A = Affinity(
    node_required=(NodeSelectorTerm((Requirement(ZONE, Operator.IN, ("a",)),)),),
)


@pytest.mark.parametrize(("honor", "skewed"), [(True, []), (False, ["n1", "n2"])])
def test_node_affinity_policy_decides_whether_domains_the_pod_cannot_use_count(
    honor: bool, skewed: list[str]
) -> None:
    # Zone a holds one; b none. Honor: b is no domain of this pod, so the minimum is a's.
    cluster = web_on(zoned(), "n1")
    task = incoming(cluster, zone_spread(honor_node_affinity=honor), affinity=ONLY_A)
    session = cluster.open(PREDICATES)
    found = failing_nodes(session, task)
    assert found.get(SKEWED, []) == skewed


@pytest.mark.parametrize(("honor", "skewed"), [(True, []), (False, ["n1", "n2"])])
def test_node_taints_policy_decides_whether_tainted_domains_count(
    honor: bool, skewed: list[str]
) -> None:
    cluster = (
        Cluster()
        .node("n1", labels={ZONE: "a"})
        .node("n2", labels={ZONE: "a"})
        .node("n3", labels={ZONE: "b"}, taints=(Taint("dedicated"),))
    )
    web_on(cluster, "n1")
    task = incoming(cluster, zone_spread(honor_taints=honor))
    found = failing_nodes(cluster.open(PREDICATES), task)
    assert found.get(SKEWED, []) == skewed


def test_match_label_keys_bind_the_selector_to_the_pod_s_own_values() -> None:
    cluster = zoned()
    cluster.job("old").tasks(
        2, status=TaskStatus.RUNNING, node="n1", labels={"app": "web", "v": "1"}
    )
    spread = zone_spread(match_label_keys=("v",))
    task = incoming(cluster, spread, labels={"app": "web", "v": "2"})
    assert check(cluster, task) == {MISSING_LABEL: ["n4"]}  # (v=1 pods are not counted)
    cluster = zoned()
    cluster.job("old").tasks(
        2, status=TaskStatus.RUNNING, node="n1", labels={"app": "web", "v": "2"}
    )
    task = incoming(cluster, spread, labels={"app": "web", "v": "2"})
    assert check(cluster, task) == {SKEWED: ["n1", "n2"], MISSING_LABEL: ["n4"]}


def two_of_a_gang() -> tuple[Session, TaskInfo, TaskInfo]:
    """A session on ``zoned`` with two pending pods of a gang spread over zones."""
    cluster = zoned()
    job = cluster.job("gang", min_member=3)
    template = cluster.template(labels={"app": "web"}, spread=(zone_spread(),))
    first, second = job.task(template), job.task(template)
    return cluster.open(PREDICATES), first, second


def test_a_gang_spreads_as_it_is_placed_and_a_placement_undone_counts_no_more() -> None:
    session, first, second = two_of_a_gang()
    session.set_status(first, TaskStatus.ALLOCATED, session.nodes.index["n1"])
    assert failing_nodes(session, second) == {SKEWED: ["n1", "n2"], MISSING_LABEL: ["n4"]}
    assert_node_by_node(session, second)
    session.set_status(first, TaskStatus.PENDING)
    assert failing_nodes(session, second) == {MISSING_LABEL: ["n4"]}


def test_an_action_s_planned_tasks_count_while_it_plans() -> None:
    session, first, second = two_of_a_gang()
    session.planned.append((first, session.nodes.index["n3"]))
    assert failing_nodes(session, second) == {SKEWED: ["n3"], MISSING_LABEL: ["n4"]}
    session.planned.clear()
    assert failing_nodes(session, second) == {MISSING_LABEL: ["n4"]}


def test_schedule_anyway_scores_the_emptier_domain_highest_and_never_filters() -> None:
    cluster = web_on(web_on(zoned(), "n1"), "n2")
    task = incoming(cluster, zone_spread(hard=False))
    assert check(cluster, task) == {}
    session = cluster.open(SCORE_ONLY)
    assert_node_by_node(session, task)
    scores = scores_by_node(session, task)
    # raw: a 2 × log(2 + 2) = 2.77 → 3, b 0: b scores 10, a 10 × (3 + 0 − 3) / 3 = 0.
    assert scores == {"n1": 0.0, "n2": 0.0, "n3": 10.0, "n4": 0.0}


def test_schedule_anyway_with_nothing_counted_scores_every_keyed_node_alike() -> None:
    cluster = zoned()
    scores = scores_by_node(cluster.open(SCORE_ONLY), incoming(cluster, zone_spread(hard=False)))
    assert scores == {"n1": 10.0, "n2": 10.0, "n3": 10.0, "n4": 0.0}


def test_a_tolerated_taint_keeps_its_domain_under_honor() -> None:
    cluster = (
        Cluster()
        .node("n1", labels={ZONE: "a"})
        .node("n3", labels={ZONE: "b"}, taints=(Taint("dedicated"),))
    )
    web_on(cluster, "n1")
    tolerates = (Toleration("dedicated", "Exists"),)
    task = incoming(cluster, zone_spread(honor_taints=True), tolerations=tolerates)
    assert check(cluster, task) == {SKEWED: ["n1"]}
