"""node_fit: a gang whose pods never fit on the nodes, even empty (sound: a gang that
fits is never said not to)."""

from builders import Cluster
from kbatch.operators.scheduler.core.framework import node_fit


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
        "2 pods of at least cpu 2, memory 1Gi never fit on the nodes, even empty: they hold 0 of them"
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
