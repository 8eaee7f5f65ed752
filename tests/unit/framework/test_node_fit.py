"""node_fit: a gang whose pods never fit on the nodes, even empty (sound: a gang that
fits is never said not to)."""

import itertools

import numpy as np
import pytest

from builders import Cluster
from kbatch.operators.scheduler.core.framework import node_fit
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    HostPort,
    LabelSelector,
    NodeSelectorTerm,
    Operator,
    PodAffinityTerm,
    Requirement,
    SpreadConstraint,
    Taint,
    Toleration,
)
from kbatch.operators.scheduler.core.framework.signatures import DomainSkew
from kbatch.operators.scheduler.core.framework.volume_needs import ClaimChoices, VolumeNeeds

GANG_ONLY = 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n'


def verdict(cluster: Cluster, job: str) -> str | None:
    session = cluster.open()
    return node_fit.never_fits(session, session.jobs[f"default/{job}"], {})


def test_pods_alike_are_counted_node_by_node() -> None:
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=8)
    cluster.job("four", min_member=4).tasks(4, cpu=3)
    cluster.job("three", min_member=3).tasks(3, cpu=3)
    assert verdict(cluster, "four") == (
        "4 pods of cpu 3, memory 1Gi never fit on the nodes, even empty: they hold 3 of them"
    )
    assert verdict(cluster, "three") is None


def test_pods_unlike_are_judged_by_their_smallest_request() -> None:
    """A 7-cpu pod and a 1-cpu pod fit nodes of 7 and 1 cpu: the check must not say
    otherwise (their mean, 4 cpu, fits neither node twice)."""
    cluster = Cluster().node("n1", cpu=7).node("n2", cpu=1)
    unlike = cluster.job("unlike", min_member=2)
    unlike.tasks(1, cpu=7).tasks(1, cpu=1)
    assert verdict(cluster, "unlike") is None
    cluster = Cluster().node("n1", cpu=1)
    cluster.job("unlike", min_member=2).tasks(1, cpu=7).tasks(1, cpu=2)
    assert verdict(cluster, "unlike") == (
        "2 of its 2 pods (at least cpu 2, memory 1Gi) fit on no node, even empty: 0 left of "
        "the 2 it needs at once"
    )
    # Sound, not exact, for pods unlike: 5 cpu asked of 4, but nodes of 2 cpu hold 2 + 2
    # pods of the smallest request (1 cpu), and the check cannot tell which pods go where.
    cluster = Cluster().node("n1", cpu=2).node("n2", cpu=2)
    cluster.job("unlike", min_member=3).tasks(1, cpu=1).tasks(2, cpu=2)
    assert verdict(cluster, "unlike") is None


def test_pods_unlike_that_fit_no_node_are_left_out_of_minimum_and_roles() -> None:
    """A 9-cpu pod and a 1-cpu pod on nodes of 4 and 8 cpu: judged by the smallest
    request alone, 12 pods of 1 cpu fit; but the 9-cpu pod fits no node, and the gang
    needs both (found by reading node_fit after the labels change: admitted, the gang
    held its room for ever). So for a role's minimum."""
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=8)
    cluster.job("both", min_member=2).tasks(1, cpu=9).tasks(1, cpu=1)
    cluster.job("either", min_member=1).tasks(1, cpu=9).tasks(1, cpu=1)
    roles = cluster.job("roles", min_member=2).tasks(1, cpu=9).tasks(2, cpu=1).job
    roles.min_task_member = {"ps": 1, "worker": 1}
    ps, *workers = roles.tasks.values()
    ps.role = "ps"
    for task in workers:
        task.role = "worker"
    assert verdict(cluster, "both") == (
        "1 of its 2 pods (cpu 9, memory 1Gi) fits on no node, even empty: 1 left of the 2 it "
        "needs at once"
    )
    assert verdict(cluster, "either") is None
    assert verdict(cluster, "roles") == (
        "role ps: 1 of its 1 pods (cpu 9, memory 1Gi) fits on no node, even empty: 0 left of "
        "the 1 it needs at once"
    )


def test_a_nodes_pod_count_is_counted_and_a_group_without_pods_is_not_judged() -> None:
    cluster = Cluster().node("n1", cpu=64, pods=2)
    cluster.job("three", min_member=3).tasks(3, cpu=1)
    cluster.job("wide").tasks(1, cpu=100)
    cluster.job("fits").tasks(1, cpu=64)
    cluster.job("held", min_member=5)  # (its Job's pods come once it is admitted)
    assert verdict(cluster, "three") == (
        "3 pods of cpu 1, memory 1Gi never fit on the nodes, even empty: they hold 2 of them"
    )
    assert verdict(cluster, "wide") == "a pod of cpu 100, memory 1Gi fits on no node, even empty"
    assert verdict(cluster, "fits") is None
    assert verdict(cluster, "held") is None


def test_nodes_whose_labels_or_lasting_taints_bar_the_pods_hold_none_of_them() -> None:
    """A gang's pods go on no node that their node selector or required node affinity
    does not match, nor on one with a taint an admin set that they do not tolerate."""
    gpu = Taint("nvidia.com/gpu", "present", "NoSchedule")
    cluster = Cluster().node("n1", cpu=8).node("n2", cpu=8, labels={"zone": "b"}, taints=(gpu,))
    cluster.job("zoned", min_member=2).tasks(2, cpu=4, node_selector={"zone": "a"})
    cluster.job("tainted", min_member=3).tasks(3, cpu=4, node_selector={"zone": "b"})
    tolerant = (Toleration("nvidia.com/gpu", "Exists"),)
    cluster.job("tolerant", min_member=2).tasks(2, cpu=4, tolerations=tolerant)
    zone_b = NodeSelectorTerm((Requirement("zone", Operator.IN, ("b",)),))
    required = Affinity(node_required=(zone_b,))
    cluster.job("affine", min_member=3).tasks(3, cpu=4, affinity=required, tolerations=tolerant)
    assert verdict(cluster, "zoned") == (
        "2 pods of cpu 4, memory 1Gi never fit on the nodes, even empty: they hold 0 of them "
        "(2 node(s) didn't match node selector)"
    )
    assert verdict(cluster, "tainted") == (
        "3 pods of cpu 4, memory 1Gi never fit on the nodes, even empty: they hold 0 of them "
        "(1 node(s) didn't match node selector; 1 node(s) had taints that the pod didn't "
        "tolerate)"
    )
    assert verdict(cluster, "tolerant") is None  # (4 pods' room on the two nodes)
    assert verdict(cluster, "affine") == (
        "3 pods of cpu 4, memory 1Gi never fit on the nodes, even empty: they hold 2 of them "
        "(1 node(s) didn't match node selector)"
    )


def test_what_comes_and_goes_is_not_held_against_a_gang() -> None:
    """A node not ready, cordoned, or with a taint Kubernetes or an autoscaler set
    (its conditions, a cloud provider not done with it, a node being taken away) may
    take the pods later: it counts."""
    passing = [
        Taint("node.kubernetes.io/not-ready", effect="NoSchedule"),
        Taint("node.cloudprovider.kubernetes.io/uninitialized", "true", "NoSchedule"),
        Taint("ToBeDeletedByClusterAutoscaler", "1700000000", "NoSchedule"),
    ]
    cluster = Cluster()
    for i, taint in enumerate(passing):
        cluster.node(f"n{i}", cpu=4, taints=(taint,))
    cluster.node("cordoned", cpu=4, unschedulable=True)
    cluster.node("down", cpu=4, conditions={"Ready": "False"})
    cluster.job("five", min_member=5).tasks(5, cpu=4)
    assert verdict(cluster, "five") is None
    cluster.job("six", min_member=6).tasks(6, cpu=4)
    assert verdict(cluster, "six") == (
        "6 pods of cpu 4, memory 1Gi never fit on the nodes, even empty: they hold 5 of them"
    )


def test_pods_unlike_count_a_node_some_of_them_may_go_on() -> None:
    """Pods of two templates, one for zone a and one for any zone: a node of zone b
    counts (the second may go there), a node barred to both does not."""
    cluster = Cluster().node("a", cpu=4, labels={"zone": "a"}).node("b", cpu=4)
    gang = cluster.job("mixed", min_member=2)
    gang.tasks(1, cpu=4, node_selector={"zone": "a"}).tasks(1, cpu=4)
    assert verdict(cluster, "mixed") is None
    cluster = (
        Cluster().node("a", cpu=4, labels={"zone": "a"}).node("c", cpu=4, labels={"zone": "c"})
    )
    gang = cluster.job("mixed", min_member=2)
    gang.tasks(1, cpu=4, node_selector={"zone": "a"}).tasks(1, cpu=4, node_selector={"zone": "b"})
    assert verdict(cluster, "mixed") == (
        "1 of its 2 pods (cpu 4, memory 1Gi; 2 node(s) didn't match node selector) fits on no "
        "node, even empty: 1 left of the 2 it needs at once"
    )


def test_without_the_predicates_plugin_labels_and_taints_bar_nothing() -> None:
    cluster = Cluster().node("n1", cpu=8)
    cluster.job("zoned", min_member=2).tasks(2, cpu=4, node_selector={"zone": "a"})
    session = cluster.open(GANG_ONLY)
    assert node_fit.never_fits(session, session.jobs["default/zoned"], {}) is None


def test_pods_alike_with_host_ports_or_anti_affinity_to_their_kind_spread_out() -> None:
    """Two 8-cpu nodes in one zone hold eight 1-cpu pods, but two only of those that
    ask for a host port (each conflicts with the next), or keep their own kind off
    their node, and one of those that keep it out of their zone."""
    host = "kubernetes.io/hostname"
    cluster = Cluster()
    for name in ("n1", "n2"):
        cluster.node(name, cpu=8, labels={host: name, "zone": "a"})
    mine = LabelSelector((("app", "mine"),))
    not_mine = LabelSelector((("app", "theirs"),))

    def shy(key: str, selector: LabelSelector = mine) -> Affinity:
        return Affinity(anti_required=(PodAffinityTerm(selector, key),))

    cluster.job("ports", min_member=3).tasks(3, host_ports=(HostPort(80),))
    labels = {"app": "mine"}
    cluster.job("by-node", min_member=3).tasks(3, labels=labels, affinity=shy(host))
    cluster.job("by-zone", min_member=2).tasks(2, labels=labels, affinity=shy("zone"))
    cluster.job("by-rack", min_member=3).tasks(3, labels=labels, affinity=shy("rack"))
    cluster.job("others", min_member=3).tasks(3, labels=labels, affinity=shy(host, not_mine))
    held = "never fit on the nodes, even empty: they hold"
    assert verdict(cluster, "ports") == (
        f"3 pods of cpu 1, memory 1Gi {held} 2 of them (at most one per node)"
    )
    assert verdict(cluster, "by-node") == (
        f"3 pods of cpu 1, memory 1Gi {held} 2 of them (at most one per {host})"
    )
    assert verdict(cluster, "by-zone") == (
        f"2 pods of cpu 1, memory 1Gi {held} 1 of them (at most one per zone)"
    )
    assert verdict(cluster, "by-rack") is None  # (no node has a rack: none keeps it out)
    assert verdict(cluster, "others") is None
    session = cluster.open(GANG_ONLY)  # (no predicates: nothing keeps them apart)
    assert node_fit.never_fits(session, session.jobs["default/ports"], {}) is None


ZONE = "topology.kubernetes.io/zone"


def test_pods_alike_that_must_spread_over_zones_count_as_they_can_spread() -> None:
    cluster = Cluster().node("a1", cpu=16, labels={ZONE: "a"}).node("b1", cpu=4, labels={ZONE: "b"})
    cluster.node("bare", cpu=64)  # (no zone: holds none of them)
    spread = (SpreadConstraint(1, ZONE, True, LabelSelector((("app", "g"),))),)
    cluster.job("four", min_member=4).tasks(4, cpu=4, labels={"app": "g"}, spread=spread)
    cluster.job("two", min_member=2).tasks(2, cpu=4, labels={"app": "g"}, spread=spread)
    cluster.job("other", min_member=4).tasks(4, cpu=4, labels={"app": "x"}, spread=spread)
    assert verdict(cluster, "four") == (
        "4 pods of cpu 4, memory 1Gi never fit on the nodes, even empty: they hold 3 of them"
        " (1 node(s) didn't match pod topology spread constraints (missing required label);"
        f" spread over {ZONE} with a skew of 1 at most)"
    )
    assert verdict(cluster, "two") is None
    assert verdict(cluster, "other") is None  # (its selector selects none of its pods)


@pytest.mark.parametrize("seed", range(40))
def test_the_spread_bound_is_what_the_best_spread_holds(seed: int) -> None:
    """``_skewed`` against every way of filling the domains (a brute force): the most
    pods that x_d <= room_d and max x - min x <= skew (min 0 under minDomains) allow."""
    rng = np.random.default_rng(seed)
    nodes = int(rng.integers(1, 7))
    per_node = rng.integers(0, 4, nodes).astype(float)
    ids = rng.integers(-1, 3, nodes)
    skew = DomainSkew("k", ids, int(rng.integers(1, 3)), int(rng.integers(1, 4)))
    rooms = [int(per_node[ids == d].sum()) for d in sorted(set(ids[ids >= 0].tolist()))]
    best = 0
    for counts in itertools.product(*(range(r + 1) for r in rooms)):
        least = min(counts) if counts and len(counts) >= skew.min_domains else 0
        if not counts or max(counts) - least <= skew.max_skew:
            best = max(best, sum(counts))
    free = int(per_node[ids < 0].sum())
    assert node_fit._skewed(per_node, (skew,)) == best + free


@pytest.mark.parametrize(
    ("needs", "verdict_says"),
    [
        # a claim bound on first use, shared: its volume is made for one node
        (VolumeNeeds(unbound=(ClaimChoices("default/c", provisioned=True),)), "all on one node"),
        # a ReadWriteOncePod claim, shared: one pod at a time
        (VolumeNeeds(single_pod=("default/c",)), "one at a time"),
        # a volume a node's limit counts, or a claim bound already: nothing of the kind
        (VolumeNeeds(attaches=(("csi.example.com", "pv-1"),)), None),
        (VolumeNeeds(), None),
    ],
)
def test_pods_alike_sharing_a_claim_count_as_their_claim_lets_them(
    needs: VolumeNeeds, verdict_says: str | None
) -> None:
    cluster = Cluster().node("n1", cpu=4).node("n2", cpu=4)
    cluster.job("g", min_member=2).tasks(2, cpu=3)
    (template,) = {task.template for task in cluster.jobs["default/g"].tasks.values()}
    template.volumes = needs
    found = verdict(cluster, "g")
    if verdict_says is None:
        assert found is None
    else:
        assert found is not None and verdict_says in found, found
