"""The predicates plugin: every check accepting and rejecting, through session.predicate."""

from typing import Any

import numpy as np
import pytest

from builders import (
    Cluster,
    assert_node_by_node,
    failing_nodes,
    passing_nodes,
    plugin_conf,
)
from kbatch.operators.scheduler.core.framework.info import TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    HostPort,
    LabelSelector,
    NodeSelectorTerm,
    Operator,
    PodAffinityTerm,
    Requirement,
    Taint,
    Toleration,
)
from kbatch.operators.scheduler.core.plugins import predicates
from kbatch.operators.scheduler.core.plugins.predicates import (
    DISK_PRESSURE,
    EXISTING_ANTI_AFFINITY,
    HOST_PORTS,
    MEMORY_PRESSURE,
    NETWORK_UNAVAILABLE,
    NODE_SELECTOR,
    NOT_READY,
    PID_PRESSURE,
    POD_AFFINITY,
    POD_ANTI_AFFINITY,
    TAINTS,
    TOO_MANY_PODS,
    UNSCHEDULABLE,
)

CONF = plugin_conf("predicates")
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def incoming(cluster: Cluster, namespace: str = "default", **spec: Any) -> TaskInfo:
    """The pending task the checks are asked about."""
    return cluster.job("incoming", namespace=namespace).task(
        cluster.template(namespace=namespace, **spec)
    )


def check(cluster: Cluster, task: TaskInfo, conf: str = CONF) -> dict[str, list[str]]:
    session = cluster.open(conf)
    assert_node_by_node(session, task)
    return failing_nodes(session, task)


# ---------------------------------------------------------------------- node state
@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ({"Ready": "True"}, {}),
        ({}, {}),  # no Ready condition reported: Kubernetes does not refuse the node
        ({"Ready": "False"}, {NOT_READY: ["n1"]}),
        ({"Ready": "Unknown"}, {NOT_READY: ["n1"]}),
        ({"Ready": "True", "NetworkUnavailable": "False"}, {}),
        ({"Ready": "True", "NetworkUnavailable": "True"}, {NETWORK_UNAVAILABLE: ["n1"]}),
        ({"Ready": "False", "NetworkUnavailable": "True"}, {NOT_READY: ["n1"]}),
    ],
)
def test_node_conditions(conditions: dict[str, str], expected: dict[str, list[str]]) -> None:
    cluster = Cluster().node("n1", conditions=conditions).node("n2")
    assert check(cluster, incoming(cluster)) == expected


CORDON_TAINT = Taint("node.kubernetes.io/unschedulable", effect="NoSchedule")


@pytest.mark.parametrize(
    ("tolerations", "expected"),
    [
        ((), {UNSCHEDULABLE: ["n1"]}),
        ((Toleration("node.kubernetes.io/unschedulable", "Exists"),), {}),
        ((Toleration("node.kubernetes.io/unschedulable", "Exists", effect="NoSchedule"),), {}),
        ((Toleration(operator="Exists"),), {}),
        (
            (Toleration("node.kubernetes.io/unschedulable", "Exists", effect="NoExecute"),),
            {UNSCHEDULABLE: ["n1"]},
        ),
        ((Toleration("dedicated", "Exists"),), {UNSCHEDULABLE: ["n1"]}),
    ],
)
def test_cordoned_node_admits_only_pods_tolerating_it(
    tolerations: tuple[Toleration, ...], expected: dict[str, list[str]]
) -> None:
    cluster = Cluster().node("n1", unschedulable=True).node("n2")
    assert check(cluster, incoming(cluster, tolerations=tolerations)) == expected


PRESSURED = {
    "Ready": "True",
    "MemoryPressure": "True",
    "DiskPressure": "True",
    "PIDPressure": "True",
}


@pytest.mark.parametrize(
    ("arguments", "cpu", "expected"),
    [
        ({}, 0, {}),  # off by default
        ({"predicate.MemoryPressureEnable": True}, 0, {MEMORY_PRESSURE: ["n1"]}),
        ({"predicate.MemoryPressureEnable": True}, 1, {}),  # only best-effort pods, as Kubernetes
        ({"predicate.MemoryPressureEnable": "false"}, 0, {}),
        ({"predicate.DiskPressureEnable": True}, 1, {DISK_PRESSURE: ["n1"]}),
        ({"predicate.PIDPressureEnable": True}, 1, {PID_PRESSURE: ["n1"]}),
        ({"predicate.DiskPressureEnable": False, "predicate.PIDPressureEnable": False}, 1, {}),
        # a node failing several checks is reported under the first only
        (
            {
                "predicate.MemoryPressureEnable": "true",
                "predicate.DiskPressureEnable": True,
                "predicate.PIDPressureEnable": True,
            },
            0,
            {MEMORY_PRESSURE: ["n1"]},
        ),
    ],
)
def test_pressure_conditions_only_when_enabled(
    arguments: dict[str, object], cpu: float, expected: dict[str, list[str]]
) -> None:
    cluster = Cluster().node("n1", conditions=PRESSURED).node("n2")
    task = incoming(cluster, cpu=cpu, memory=cpu)
    assert check(cluster, task, plugin_conf("predicates", arguments=arguments)) == expected


# ---------------------------------------------------------------------- node selection
@pytest.mark.parametrize(
    ("selector", "passing"),
    [
        ({}, ["n1", "n2", "n3"]),
        ({"disk": "ssd"}, ["n1"]),
        ({"disk": "hdd"}, ["n2"]),
        ({"disk": "ssd", "gpu": "yes"}, []),
        ({"disk": "nvme"}, []),
        ({HOSTNAME: "n3"}, ["n3"]),
    ],
)
def test_node_selector(selector: dict[str, str], passing: list[str]) -> None:
    cluster = (
        Cluster()
        .node("n1", labels={"disk": "ssd"})
        .node("n2", labels={"disk": "hdd", "gpu": "yes"})
        .node("n3")
    )
    task = incoming(cluster, node_selector=selector)
    failing = check(cluster, task)
    assert passing_nodes(cluster.open(CONF), task) == passing
    assert failing == (
        {NODE_SELECTOR: sorted({"n1", "n2", "n3"} - set(passing))} if len(passing) < 3 else {}
    )


def req(key: str, op: Operator, *values: str) -> Requirement:
    return Requirement(key, op, values)


def terms(*requirements: Requirement, fields: tuple[Requirement, ...] = ()) -> Affinity:
    return Affinity(node_required=(NodeSelectorTerm(requirements, fields),))


# n1: zone a, cores 8; n2: zone b, cores 16; n3: no zone, cores "many"
NODE_AFFINITY_CASES = [
    (Affinity(), ["n1", "n2", "n3"]),
    (terms(req("zone", Operator.IN, "a")), ["n1"]),
    (terms(req("zone", Operator.IN, "a", "b")), ["n1", "n2"]),
    (terms(req("zone", Operator.IN, "c")), []),
    (terms(req("zone", Operator.NOT_IN, "a")), ["n2", "n3"]),
    (terms(req("zone", Operator.NOT_IN, "a", "b")), ["n3"]),
    (terms(req("zone", Operator.EXISTS)), ["n1", "n2"]),
    (terms(req("zone", Operator.DOES_NOT_EXIST)), ["n3"]),
    (terms(req("cores", Operator.GT, "8")), ["n2"]),
    (terms(req("cores", Operator.GT, "4")), ["n1", "n2"]),
    (terms(req("cores", Operator.LT, "16")), ["n1"]),
    (terms(req("cores", Operator.LT, "4")), []),
    (terms(req("zone", Operator.GT, "1")), []),  # not numbers
    (terms(req("cores", Operator.GT, "x")), []),  # a malformed requirement matches nothing
    (terms(req("zone", Operator.IN)), []),
    (terms(req("zone", Operator.EXISTS, "a")), []),
    # requirements ANDed
    (terms(req("zone", Operator.EXISTS), req("cores", Operator.GT, "8")), ["n2"]),
    (terms(req("zone", Operator.IN, "a"), req("cores", Operator.GT, "8")), []),
    # terms ORed
    (
        Affinity(
            node_required=(
                NodeSelectorTerm((req("zone", Operator.IN, "a"),)),
                NodeSelectorTerm((req("zone", Operator.DOES_NOT_EXIST),)),
            )
        ),
        ["n1", "n3"],
    ),
    # no terms, or an empty term, match no node (Kubernetes)
    (Affinity(node_required=()), []),
    (Affinity(node_required=(NodeSelectorTerm(),)), []),
    # matchFields: metadata.name with In/NotIn and one value
    (terms(fields=(req("metadata.name", Operator.IN, "n2"),)), ["n2"]),
    (terms(fields=(req("metadata.name", Operator.IN, "n9"),)), []),
    (terms(fields=(req("metadata.name", Operator.NOT_IN, "n2"),)), ["n1", "n3"]),
    (terms(fields=(req("metadata.name", Operator.EXISTS),)), []),
    (terms(fields=(req("metadata.uid", Operator.IN, "n2"),)), []),
    (
        terms(req("zone", Operator.EXISTS), fields=(req("metadata.name", Operator.IN, "n2"),)),
        ["n2"],
    ),
]


@pytest.mark.parametrize(("affinity", "passing"), NODE_AFFINITY_CASES)
def test_required_node_affinity(affinity: Affinity, passing: list[str]) -> None:
    cluster = (
        Cluster()
        .node("n1", labels={"zone": "a", "cores": "8"})
        .node("n2", labels={"zone": "b", "cores": "16"})
        .node("n3", labels={"cores": "many"})
    )
    task = incoming(cluster, affinity=affinity)
    failing = check(cluster, task)
    rejected = sorted({"n1", "n2", "n3"} - set(passing))
    assert failing == ({NODE_SELECTOR: rejected} if rejected else {})


def test_node_selector_and_affinity_must_both_match() -> None:
    cluster = Cluster().node("n1", labels={"zone": "a"}).node("n2", labels={"zone": "b"})
    task = incoming(
        cluster, node_selector={"zone": "a"}, affinity=terms(req("zone", Operator.IN, "b"))
    )
    assert check(cluster, task) == {NODE_SELECTOR: ["n1", "n2"]}


# ---------------------------------------------------------------------- taints
@pytest.mark.parametrize(
    ("taint", "tolerations", "tolerated"),
    [
        (Taint("dedicated", "gpu", "NoSchedule"), (), False),
        (Taint("dedicated", "gpu", "NoExecute"), (), False),
        (Taint("dedicated", "gpu", "PreferNoSchedule"), (), True),  # a preference only
        (Taint("dedicated", "gpu"), (Toleration("dedicated", "Equal", "gpu"),), True),
        (Taint("dedicated", "gpu"), (Toleration("dedicated", "Equal", "cpu"),), False),
        (Taint("dedicated", "gpu"), (Toleration("dedicated", "Exists"),), True),
        (Taint("dedicated", "gpu"), (Toleration("other", "Exists"),), False),
        (Taint("dedicated", "gpu"), (Toleration(operator="Exists"),), True),
        (Taint("dedicated", "gpu"), (Toleration(operator="Equal", value="gpu"),), False),
        (
            Taint("dedicated", "gpu", "NoExecute"),
            (Toleration("dedicated", "Exists", effect="NoExecute"),),
            True,
        ),
        (
            Taint("dedicated", "gpu", "NoExecute"),
            (Toleration("dedicated", "Exists", effect="NoSchedule"),),
            False,
        ),
        (
            Taint("dedicated", "gpu", "NoSchedule"),
            (Toleration("x", "Exists"), Toleration("dedicated", "Equal", "gpu", "NoSchedule")),
            True,
        ),
    ],
)
def test_taints_and_tolerations(
    taint: Taint, tolerations: tuple[Toleration, ...], tolerated: bool
) -> None:
    cluster = Cluster().node("n1", taints=(taint,)).node("n2")
    failing = check(cluster, incoming(cluster, tolerations=tolerations))
    assert failing == ({} if tolerated else {TAINTS: ["n1"]})


def test_every_taint_must_be_tolerated() -> None:
    both = (Taint("a", "1", "NoSchedule"), Taint("b", "2", "NoExecute"))
    cluster = Cluster().node("n1", taints=both).node("n2", taints=both[:1])
    task = incoming(cluster, tolerations=(Toleration("a", "Exists"),))
    assert check(cluster, task) == {TAINTS: ["n1"]}


# ---------------------------------------------------------------------- host ports and max pods
@pytest.mark.parametrize(
    ("theirs", "ours", "conflict"),
    [
        (HostPort(8080), HostPort(8080), True),
        (HostPort(8080), HostPort(8081), False),
        (HostPort(8080, "TCP"), HostPort(8080, "UDP"), False),
        (HostPort(8080, host_ip="10.0.0.1"), HostPort(8080, host_ip="10.0.0.2"), False),
        (HostPort(8080, host_ip="10.0.0.1"), HostPort(8080, host_ip="10.0.0.1"), True),
        (HostPort(8080, host_ip="0.0.0.0"), HostPort(8080, host_ip="10.0.0.2"), True),
        (HostPort(8080, host_ip="10.0.0.1"), HostPort(8080), True),
    ],
)
def test_host_ports(theirs: HostPort, ours: HostPort, conflict: bool) -> None:
    cluster = Cluster().node("n1").node("n2").pod("daemon", "n1", host_ports=(theirs,))
    failing = check(cluster, incoming(cluster, host_ports=(ours,)))
    assert failing == ({HOST_PORTS: ["n1"]} if conflict else {})


def test_host_ports_of_finished_pods_are_free_and_placements_count() -> None:
    cluster = Cluster().node("n1").node("n2").node("n3")
    ports = (HostPort(9100),)
    cluster.job("done").tasks(1, status=TaskStatus.SUCCEEDED, node="n1", host_ports=ports)
    cluster.job("runs").tasks(1, status=TaskStatus.RUNNING, node="n2", host_ports=ports)
    task = incoming(cluster, host_ports=ports)
    session = cluster.open(CONF)
    assert failing_nodes(session, task) == {HOST_PORTS: ["n2"]}
    # placed during the session: the node changes and its ports count from then on
    other = cluster.job("other").task(cluster.template(host_ports=ports))
    session.jobs[other.job] = cluster.jobs[other.job]
    session.set_status(other, TaskStatus.ALLOCATED, session.nodes.index["n3"])
    assert failing_nodes(session, task) == {HOST_PORTS: ["n2", "n3"]}
    assert_node_by_node(session, task)


@pytest.mark.parametrize(("running", "fits"), [(0, True), (1, True), (2, False), (3, False)])
def test_max_pods(running: int, fits: bool) -> None:
    cluster = Cluster().node("n1", pods=2).node("n2", pods=2)
    for i in range(running):
        cluster.pod(f"p{i}", "n1", cpu=0, memory=0)
    failing = check(cluster, incoming(cluster))
    assert failing == ({} if fits else {TOO_MANY_PODS: ["n1"]})


# ---------------------------------------------------------------------- pod affinity
def selects(app: str) -> LabelSelector:
    return LabelSelector(match_labels=(("app", app),))


def pod_term(app: str, key: str = HOSTNAME, namespaces: tuple[str, ...] = ()) -> PodAffinityTerm:
    return PodAffinityTerm(selects(app), key, namespaces)


def zoned() -> Cluster:
    """n1, n2 in zone a; n3 in zone b; n4 with no zone label."""
    return (
        Cluster()
        .node("n1", labels={ZONE: "a"})
        .node("n2", labels={ZONE: "a"})
        .node("n3", labels={ZONE: "b"})
        .node("n4")
    )


def with_pod(cluster: Cluster, node: str, namespace: str = "default", **spec: Any) -> Cluster:
    """A running pod of another job on ``node``."""
    name = f"pod-{len(cluster.jobs)}"
    cluster.job(name, namespace=namespace).tasks(1, status=TaskStatus.RUNNING, node=node, **spec)
    return cluster


DB = {"labels": {"app": "db"}}

POD_AFFINITY_CASES = [
    # (pod on n1 in namespace, incoming labels, affinity, expected failures)
    ("default", {}, Affinity(pod_required=(pod_term("db"),)), {POD_AFFINITY: ["n2", "n3", "n4"]}),
    ("default", {}, Affinity(pod_required=(pod_term("db", ZONE),)), {POD_AFFINITY: ["n3", "n4"]}),
    (
        "default",
        {},
        Affinity(pod_required=(pod_term("web"),)),
        {POD_AFFINITY: ["n1", "n2", "n3", "n4"]},
    ),
    # a term without namespaces looks in the incoming pod's own namespace
    (
        "other",
        {},
        Affinity(pod_required=(pod_term("db"),)),
        {POD_AFFINITY: ["n1", "n2", "n3", "n4"]},
    ),
    (
        "other",
        {},
        Affinity(pod_required=(pod_term("db", namespaces=("other",)),)),
        {POD_AFFINITY: ["n2", "n3", "n4"]},
    ),
    # all terms must hold, each in its own topology
    (
        "default",
        {},
        Affinity(pod_required=(pod_term("db", ZONE), pod_term("db"))),
        {POD_AFFINITY: ["n2", "n3", "n4"]},
    ),
    # the first pod of a group with affinity to itself may go anywhere the topology exists
    (
        "default",
        {"app": "web"},
        Affinity(pod_required=(pod_term("web", ZONE),)),
        {POD_AFFINITY: ["n4"]},
    ),
    ("default", {"app": "web"}, Affinity(pod_required=(pod_term("web"),)), {}),
    (
        "default",
        {"app": "web"},
        Affinity(pod_required=(pod_term("web", namespaces=("x",)),)),
        {POD_AFFINITY: ["n1", "n2", "n3", "n4"]},
    ),
    # but not once a matching pod exists somewhere
    (
        "default",
        {"app": "db"},
        Affinity(pod_required=(pod_term("db"),)),
        {POD_AFFINITY: ["n2", "n3", "n4"]},
    ),
    # anti-affinity
    ("default", {}, Affinity(anti_required=(pod_term("db"),)), {POD_ANTI_AFFINITY: ["n1"]}),
    (
        "default",
        {},
        Affinity(anti_required=(pod_term("db", ZONE),)),
        {POD_ANTI_AFFINITY: ["n1", "n2"]},
    ),
    ("default", {}, Affinity(anti_required=(pod_term("web", ZONE),)), {}),
    ("other", {}, Affinity(anti_required=(pod_term("db", ZONE),)), {}),
    (
        "other",
        {},
        Affinity(anti_required=(pod_term("db", ZONE, ("other",)),)),
        {POD_ANTI_AFFINITY: ["n1", "n2"]},
    ),
    ("default", {}, Affinity(anti_required=(pod_term("db", "rack"),)), {}),  # no node has a rack
    # affinity checked before anti-affinity; each node reported once
    (
        "default",
        {},
        Affinity(pod_required=(pod_term("db", ZONE),), anti_required=(pod_term("db"),)),
        {POD_AFFINITY: ["n3", "n4"], POD_ANTI_AFFINITY: ["n1"]},
    ),
]


@pytest.mark.parametrize(("namespace", "labels", "affinity", "expected"), POD_AFFINITY_CASES)
def test_required_pod_affinity(
    namespace: str, labels: dict[str, str], affinity: Affinity, expected: dict[str, list[str]]
) -> None:
    cluster = with_pod(zoned(), "n1", namespace=namespace, **DB)
    assert check(cluster, incoming(cluster, labels=labels, affinity=affinity)) == expected


EXISTING_ANTI_CASES = [
    # (existing pod's namespace, its anti-affinity, incoming namespace, incoming labels, expected)
    ("default", (pod_term("web"),), "default", {"app": "web"}, ["n1"]),
    ("default", (pod_term("web", ZONE),), "default", {"app": "web"}, ["n1", "n2"]),
    ("default", (pod_term("web", ZONE),), "default", {"app": "api"}, []),
    ("other", (pod_term("web", ZONE),), "default", {"app": "web"}, []),
    ("other", (pod_term("web", ZONE, ("default",)),), "default", {"app": "web"}, ["n1", "n2"]),
    ("default", (pod_term("api"), pod_term("web", ZONE)), "default", {"app": "web"}, ["n1", "n2"]),
]


@pytest.mark.parametrize(
    ("their_namespace", "anti", "namespace", "labels", "rejected"), EXISTING_ANTI_CASES
)
def test_existing_pods_anti_affinity(
    their_namespace: str,
    anti: tuple[PodAffinityTerm, ...],
    namespace: str,
    labels: dict[str, str],
    rejected: list[str],
) -> None:
    cluster = with_pod(
        zoned(), "n1", namespace=their_namespace, affinity=Affinity(anti_required=anti)
    )
    failing = check(cluster, incoming(cluster, namespace=namespace, labels=labels))
    assert failing == ({EXISTING_ANTI_AFFINITY: rejected} if rejected else {})


def test_anti_affinity_spreads_a_gang_as_it_is_placed() -> None:
    spread = Affinity(anti_required=(pod_term("worker", ZONE),))
    cluster = zoned()
    job = cluster.job("gang", min_member=2)
    template = cluster.template(labels={"app": "worker"}, affinity=spread)
    first, second = job.task(template), job.task(template)
    session = cluster.open(CONF)
    assert failing_nodes(session, first) == {}
    session.set_status(first, TaskStatus.ALLOCATED, session.nodes.index["n2"])
    assert failing_nodes(session, second) == {
        EXISTING_ANTI_AFFINITY: ["n1", "n2"],
    }
    assert_node_by_node(session, second)
    # and it goes away with the placement
    session.set_status(first, TaskStatus.PENDING)
    assert failing_nodes(session, second) == {}


def test_affinity_follows_placements_in_the_session() -> None:
    cluster = zoned()
    db = cluster.job("db").task(cluster.template(labels={"app": "db"}))
    task = incoming(cluster, affinity=Affinity(pod_required=(pod_term("db", ZONE),)))
    session = cluster.open(CONF)
    assert failing_nodes(session, task) == {POD_AFFINITY: ["n1", "n2", "n3", "n4"]}
    session.set_status(db, TaskStatus.ALLOCATED, session.nodes.index["n3"])
    assert failing_nodes(session, task) == {POD_AFFINITY: ["n1", "n2", "n4"]}


def test_finished_pods_do_not_count_for_affinity() -> None:
    cluster = zoned()
    cluster.job("db").tasks(1, status=TaskStatus.FAILED, node="n1", labels={"app": "db"})
    task = incoming(cluster, affinity=Affinity(anti_required=(pod_term("db", ZONE),)))
    assert check(cluster, task) == {}


# ---------------------------------------------------------------------- combination
def test_each_node_is_reported_under_its_first_failing_check() -> None:
    cluster = (
        Cluster()
        .node("n1", conditions={"Ready": "False"}, taints=(Taint("x"),), labels={"disk": "hdd"})
        .node("n2", taints=(Taint("x"),), labels={"disk": "hdd"})
        .node("n3", taints=(Taint("x"),), labels={"disk": "ssd"}, pods=0)
        .node("n4", labels={"disk": "ssd"}, pods=0)
        .node("n5", labels={"disk": "ssd"})
    )
    task = incoming(cluster, node_selector={"disk": "ssd"})
    assert check(cluster, task) == {
        NOT_READY: ["n1"],
        NODE_SELECTOR: ["n2"],
        TAINTS: ["n3"],
        TOO_MANY_PODS: ["n4"],
    }
    assert passing_nodes(cluster.open(CONF), task) == ["n5"]


def test_a_mixed_cluster_answers_the_same_node_by_node() -> None:
    cluster = (
        zoned()
        .node("n5", labels={ZONE: "b", "disk": "ssd"}, taints=(Taint("gpu"),))
        .node("n6", conditions={"Ready": "True", "DiskPressure": "True"}, unschedulable=True)
        .node("n7", pods=1)
        .pod("daemon", "n3", host_ports=(HostPort(80),))
        .pod("filler", "n7")
    )
    with_pod(cluster, "n1", **DB)
    with_pod(
        cluster, "n2", labels={"app": "web"}, affinity=Affinity(anti_required=(pod_term("api"),))
    )
    task = incoming(
        cluster,
        labels={"app": "api"},
        host_ports=(HostPort(80),),
        affinity=Affinity(
            pod_required=(pod_term("db", ZONE),),
            anti_required=(pod_term("web", HOSTNAME),),
            node_required=(NodeSelectorTerm((req(ZONE, Operator.EXISTS),)),),
        ),
    )
    conf = plugin_conf("predicates", arguments={"predicate.DiskPressureEnable": True})
    session = cluster.open(conf)
    assert_node_by_node(session, task)
    assert passing_nodes(session, task) == ["n1"]


def test_only_checks_failing_some_of_the_nodes_asked_about_are_reported() -> None:
    cluster = (
        Cluster()
        .node("n1", labels={"disk": "ssd"})
        .node("n2", conditions={"Ready": "False"})
        .node("n3", pods=0)
    )
    task = incoming(cluster, node_selector={"disk": "ssd"})
    session = cluster.open(CONF)
    ok, failures = session.predicate(task, np.array([0]))
    assert ok.tolist() == [True]
    assert failures == []
    ok, failures = session.predicate(task, np.array([2, 1]))
    assert ok.tolist() == [False, False]
    assert [(reason, failed.tolist()) for reason, failed in failures] == [
        (NOT_READY, [False, True]),
        (NODE_SELECTOR, [True, False]),
    ]


# ---------------------------------------------------------------------- arguments
def test_parse_arguments_defaults_and_kube_batch_strings() -> None:
    assert predicates.parse_arguments({}) == predicates.PredicatesArguments()
    parsed = predicates.parse_arguments(
        {
            "predicate.MemoryPressureEnable": "true",
            "predicate.DiskPressureEnable": True,
            "predicate.PIDPressureEnable": "False",
        }
    )
    assert parsed == predicates.PredicatesArguments(True, True, False)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (
            {"predicate.MemoryPressureEnable": "yes"},
            "predicate.MemoryPressureEnable must be true or false, not 'yes'",
        ),
        ({"predicate.DiskPressureEnable": 1}, "predicate.DiskPressureEnable must be true or false"),
        (
            {"predicate.PIDPressureEnable": None},
            "predicate.PIDPressureEnable must be true or false",
        ),
        (
            {"predicate.MemoryPressureEnabled": True},
            "unknown argument 'predicate.MemoryPressureEnabled'",
        ),
    ],
)
def test_bad_arguments_are_refused(arguments: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        predicates.parse_arguments(arguments)
    with pytest.raises(ValueError, match=message):
        Cluster().node("n1").open(plugin_conf("predicates", arguments=arguments))


# ---------------------------------------------------------------------- namespaceSelector
EVERY_NAMESPACE = LabelSelector()
TEAM_RED = LabelSelector((("team", "red"),))


@pytest.mark.parametrize(
    ("namespaces", "namespace_selector", "rejected"),
    [
        ((), None, []),  # (the pod's own namespace only: the db pod is elsewhere)
        (("red",), None, ["n1"]),
        ((), EVERY_NAMESPACE, ["n1"]),  # {}: every namespace
        ((), TEAM_RED, ["n1"]),  # by the namespace's labels
        ((), LabelSelector((("team", "blue"),)), []),
        (("blue",), TEAM_RED, ["n1"]),  # the list and the selector, together
        (("blue",), LabelSelector((("team", "green"),)), []),
    ],
)
def test_a_term_s_namespaces_and_namespace_selector_pick_whose_pods_count(
    namespaces: tuple[str, ...], namespace_selector: LabelSelector | None, rejected: list[str]
) -> None:
    cluster = with_pod(zoned(), "n1", namespace="red", labels={"app": "db"})
    cluster.namespace_labels = {"red": {"team": "red"}, "blue": {"team": "blue"}}
    term = PodAffinityTerm(selects("db"), HOSTNAME, namespaces, namespace_selector)
    task = incoming(cluster, namespace="blue", affinity=Affinity(anti_required=(term,)))
    assert check(cluster, task) == ({POD_ANTI_AFFINITY: rejected} if rejected else {})


def test_an_existing_pod_s_namespace_selector_reaches_the_incoming_pod_s_namespace() -> None:
    term = PodAffinityTerm(selects("web"), HOSTNAME, (), TEAM_RED)
    cluster = with_pod(zoned(), "n2", namespace="blue", affinity=Affinity(anti_required=(term,)))
    cluster.namespace_labels = {"red": {"team": "red"}}
    task = incoming(cluster, namespace="red", labels={"app": "web"})
    assert check(cluster, task) == {EXISTING_ANTI_AFFINITY: ["n2"]}
    task = incoming(cluster, namespace="green", labels={"app": "web"})
    assert check(cluster, task) == {}
