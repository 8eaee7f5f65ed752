"""Persistent volumes (``kbatch.cluster.volumes``): a pod goes where its claims' volumes
can follow it, waits while a claim cannot be used yet, and its bind first binds or
provisions the claims bound on first use; bad claims, PVs and classes are refused
naming the field."""

from typing import Any

import pytest

from kbatch.cluster import volumes
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.cluster.volume_records import SELECTED_NODE
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.interface import Outcome, Snapshot
from kbatch.operators.scheduler.core.framework.volume_needs import BIND_CONFLICT, NODE_CONFLICT
from unit.cluster.test_state import node, pod, pod_group

ZONE = "topology.kubernetes.io/zone"


class Deciding:
    """A cluster that lends a session its snapshot and keeps what the session decides."""

    def __init__(self, snap: Snapshot) -> None:
        self.snap = snap
        self.outcome = Outcome()

    def snapshot(self) -> Snapshot:
        return self.snap

    def apply(self, outcome: Outcome) -> None:
        self.outcome = outcome


QUEUE = {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}}


def session(state: ClusterState) -> Outcome:
    state.apply(QUEUE)
    cluster = Deciding(state.snapshot())
    runner.Scheduler(cluster, runner.default_conf(), lambda: 0.0, lambda: "s").run_once()
    return cluster.outcome


def zoned(name: str, zone: str) -> dict:
    found = node(name)
    found["metadata"]["labels"] = {ZONE: zone, "kubernetes.io/hostname": name}
    return found


def claim(name: str, storage_class: str | None = "fast", **spec: Any) -> dict:
    body: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "10Gi"}},
        **spec,
    }
    if storage_class is not None:
        body["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": body,
    }


def volume(
    name: str, zone: str | None, storage_class: str = "fast", size: str = "10Gi", **spec: Any
) -> dict:
    body: dict[str, Any] = {
        "storageClassName": storage_class,
        "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": size},
        **spec,
    }
    if zone is not None:
        body["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": [zone]}]}
                ]
            }
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "resourceVersion": "7"},
        "spec": body,
        "status": {"phase": "Available"},
    }


def storage_class(name: str = "fast", mode: str = "WaitForFirstConsumer", **extra: Any) -> dict:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "example.com/disks",
        "volumeBindingMode": mode,
        **extra,
    }


def with_claims(name: str, *claims: str, group: str | None = None) -> dict:
    return pod(
        name,
        group=group,
        volumes=[{"name": c, "persistentVolumeClaim": {"claimName": c}} for c in claims],
    )


def two_zones() -> ClusterState:
    state = ClusterState()
    state.apply(zoned("a1", "a"))
    state.apply(zoned("b1", "b"))
    return state


def needs_of(state: ClusterState) -> dict:
    """The needs the snapshot's pending tasks carry, by pod key."""
    return {
        task.key: task.template.volumes
        for job in state.snapshot().jobs.values()
        for task in job.tasks.values()
        if task.template.volumes is not None
    }


def bound_to(outcome: Outcome) -> dict[str, str]:
    return {bind.task.name: bind.node for bind in outcome.binds}


def test_a_pod_goes_where_its_bound_volume_is() -> None:
    state = two_zones()
    state.apply(volume("pv-b", "b", claimRef={"namespace": "default", "name": "data"}))
    state.apply(claim("data", volumeName="pv-b"))
    state.apply(with_claims("p", "data"))
    assert bound_to(session(state)) == {"p": "b1"}


def test_a_pod_whose_volume_no_ready_node_reaches_waits_saying_why() -> None:
    state = ClusterState()
    state.apply(zoned("a1", "a"))
    state.apply(volume("pv-b", "b"))
    state.apply(claim("data", volumeName="pv-b"))
    state.apply(with_claims("p", "data"))
    outcome = session(state)
    assert not outcome.binds
    (event,) = [e for e in outcome.events if e.ref.name == "p"]
    assert NODE_CONFLICT in event.message


@pytest.mark.parametrize(
    ("objects", "why"),
    [
        ([], 'persistentvolumeclaim "data" not found'),
        ([claim("data", None)], volumes.UNBOUND_IMMEDIATE),
        ([claim("data"), storage_class(mode="Immediate")], volumes.UNBOUND_IMMEDIATE),
        ([claim("data", "slow")], 'storageclass.storage.k8s.io "slow" not found'),
        ([claim("data", volumeName="gone")], 'persistentvolume "gone" (of claim "data") not found'),
    ],
)
def test_a_pod_waits_while_a_claim_cannot_be_used(objects: list[dict], why: str) -> None:
    state = two_zones()
    for obj in objects:
        state.apply(obj)
    state.apply(with_claims("p", "data"))
    assert needs_of(state)["default/p"].waiting == why
    outcome = session(state)
    assert not outcome.binds
    (event,) = [e for e in outcome.events if e.ref.name == "p"]
    assert f"0/2 nodes are available: 2 {why}." in event.message


def test_the_claim_being_made_lets_the_pod_go() -> None:
    state = two_zones()
    state.apply(with_claims("p", "data"))
    assert not session(state).binds
    state.apply(storage_class())
    state.apply(claim("data"))
    assert bound_to(session(state)) in ({"p": "a1"}, {"p": "b1"})


def test_a_claim_bound_on_first_use_goes_where_a_free_volume_fits_it() -> None:
    state = two_zones()
    state.apply(storage_class(provisioner="kubernetes.io/no-provisioner"))
    state.apply(volume("small-a", "a", size="1Gi"))  # too small
    state.apply(volume("pv-b", "b"))
    state.apply(volume("other-class", "a", storage_class="slow"))
    state.apply(claim("data"))
    state.apply(with_claims("p", "data"))
    assert bound_to(session(state)) == {"p": "b1"}


def test_no_free_volume_and_no_provisioner_bars_every_node() -> None:
    state = two_zones()
    state.apply(storage_class(provisioner="kubernetes.io/no-provisioner"))
    state.apply(volume("taken", "a", claimRef={"namespace": "default", "name": "other"}))
    state.apply(claim("data"))
    state.apply(with_claims("p", "data"))
    outcome = session(state)
    assert not outcome.binds
    (event,) = [e for e in outcome.events if e.ref.name == "p"]
    assert f"2 {BIND_CONFLICT}" in event.message


def test_a_class_provisions_in_its_allowed_topologies() -> None:
    state = two_zones()
    topologies = [{"matchLabelExpressions": [{"key": ZONE, "values": ["a"]}]}]
    state.apply(storage_class(allowedTopologies=topologies))
    state.apply(claim("data"))
    state.apply(with_claims("p", "data"))
    assert bound_to(session(state)) == {"p": "a1"}


def test_a_provisioning_begun_for_a_node_keeps_the_pod_to_it() -> None:
    state = two_zones()
    state.apply(storage_class())
    made = claim("data")
    made["metadata"]["annotations"] = {SELECTED_NODE: "b1"}
    state.apply(made)
    state.apply(with_claims("p", "data"))
    assert bound_to(session(state)) == {"p": "b1"}


def test_a_gang_waits_whole_for_a_member_s_claim() -> None:
    state = two_zones()
    state.apply(storage_class())
    state.apply(pod_group("g", min_member=2))
    state.apply(with_claims("p0", "data-0", group="g"))
    state.apply(with_claims("p1", "data-1", group="g"))
    state.apply(claim("data-0"))
    assert not session(state).binds  # data-1 not yet made: neither is bound
    state.apply(claim("data-1"))
    assert set(bound_to(session(state))) == {"p0", "p1"}


def test_an_ephemeral_volume_names_the_claim_made_for_it() -> None:
    state = two_zones()
    state.apply(storage_class())
    ephemeral = {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}
    state.apply(pod("p", volumes=[{"name": "scratch", "ephemeral": ephemeral}]))
    assert needs_of(state)["default/p"].waiting == ('persistentvolumeclaim "p-scratch" not found')
    state.apply(claim("p-scratch"))
    assert needs_of(state)["default/p"].waiting == ""


def test_a_bound_pod_has_no_needs() -> None:
    state = two_zones()
    state.apply(with_claims("p", "data"))
    assert needs_of(state)
    bound = with_claims("p", "data")
    bound["spec"]["nodeName"] = "a1"
    state.apply(bound)
    assert needs_of(state) == {}


def records(state: ClusterState) -> tuple[dict, dict, volumes.FreeVolumes]:
    parsed = state._parsed  # (as the binders read it)
    free = volumes.FreeVolumes(parsed["PersistentVolume"].values())
    return parsed["PersistentVolumeClaim"], parsed["StorageClass"], free


def test_a_bind_binds_the_smallest_free_volume_on_the_node_first() -> None:
    state = two_zones()
    state.apply(storage_class(provisioner="kubernetes.io/no-provisioner"))
    state.apply(volume("big-a", "a", size="100Gi"))
    state.apply(volume("a-small", "a", size="20Gi"))
    state.apply(volume("pv-b", "b"))
    state.apply(claim("data"))
    state.apply(claim("more"))
    state.apply(with_claims("p", "data", "more"))
    claims, classes, free = records(state)
    p = state._parsed["Pod"]["default/p"]
    taken: set[str] = set()
    writes = volumes.bind_writes(p, "a1", {ZONE: "a"}, claims, classes, free, taken)
    assert [(w.claim.name, w.volume, w.resource_version) for w in writes] == [
        ("data", "a-small", "7"),
        ("more", "big-a", "7"),
    ]
    with pytest.raises(volumes.NoVolume, match='claim "data" may be bound on a1'):
        volumes.bind_writes(p, "a1", {ZONE: "a"}, claims, classes, free, taken)


def test_a_bind_selects_its_node_for_a_provisioned_claim() -> None:
    state = two_zones()
    state.apply(storage_class())
    state.apply(claim("data"))
    state.apply(with_claims("p", "data"))
    claims, classes, free = records(state)
    p = state._parsed["Pod"]["default/p"]
    (write,) = volumes.bind_writes(p, "b1", {ZONE: "b"}, claims, classes, free, set())
    assert (write.claim.name, write.node, write.volume) == ("data", "b1", "")


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (claim("c", accessModes="ReadWriteOnce"), "spec.accessModes"),
        (claim("c", volumeMode="Tape"), "spec.volumeMode"),
        (claim("c", resources={"requests": {"storage": "lots"}}), "spec.resources.requests.storage"),
        (volume("v", None, nodeAffinity={"required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Near"}]}]}}),
         "spec.nodeAffinity.required.nodeSelectorTerms[0].matchExpressions[0].operator"),
        (storage_class(volumeBindingMode="Later"), "volumeBindingMode"),
        ({**storage_class(), "provisioner": ""}, "provisioner"),
        (storage_class(allowedTopologies=[{"matchLabelExpressions": [{"values": ["a"]}]}]),
         "allowedTopologies[0].matchLabelExpressions[0].key"),
        (pod("p", volumes=[{"name": "v", "persistentVolumeClaim": {}}]),
         "spec.volumes[0].persistentVolumeClaim.claimName"),
    ],
)  # fmt: skip
def test_a_bad_object_is_refused_naming_the_field(obj: dict, field: str) -> None:
    state = ClusterState()
    with pytest.raises(ObjectError) as refused:
        state.apply(obj)
    assert refused.value.field == field


def local_disk(name: str, host: str) -> dict:
    disk = volume(name, None)
    disk["spec"]["nodeAffinity"] = {
        "required": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}
                    ]
                }
            ]
        }
    }
    return disk


def local_gang(state: ClusterState, size: int) -> None:
    state.apply(storage_class(provisioner="kubernetes.io/no-provisioner"))
    state.apply(pod_group("g", min_member=size))
    for i in range(size):
        state.apply(claim(f"scratch-{i}"))
        state.apply(with_claims(f"p{i}", f"scratch-{i}", group="g"))


def test_pods_placed_in_one_session_take_a_local_disk_each() -> None:
    """Each node has one local disk and room for every pod, b1 less: a gang of two is
    placed one pod per node (as its binds will bind the disks), not both where one disk
    is."""
    state = two_zones()
    filler = pod("filler", cpu="2")
    filler["spec"]["nodeName"] = "b1"
    state.apply(filler)
    state.apply(local_disk("disk-a1", "a1"))
    state.apply(local_disk("disk-b1", "b1"))
    local_gang(state, 2)
    assert sorted(bound_to(session(state)).values()) == ["a1", "b1"]


def test_a_gang_short_of_local_disks_waits_whole() -> None:
    state = two_zones()
    state.apply(local_disk("disk-a1", "a1"))
    local_gang(state, 2)
    outcome = session(state)
    assert not outcome.binds
    assert not outcome.nominations  # no node kept for it to drain: it would not fit
    assert any(BIND_CONFLICT in e.message for e in outcome.events if e.ref.name in ("p0", "p1"))


def shared_claim_pods(state: ClusterState, cpu: str, group: str | None) -> None:
    state.apply(storage_class())
    state.apply(claim("shared", accessModes=["ReadWriteMany"]))
    if group:
        state.apply(pod_group(group, min_member=2))
    for name in ("p0", "p1"):
        sharing = with_claims(name, "shared", group=group)
        sharing["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
        state.apply(sharing)


def test_pods_that_share_a_claim_bound_on_first_use_go_to_one_node() -> None:
    """Its volume is made for the first pod's node: a gang's pods that share it are
    placed together, not spread as the nodes' scores would have them."""
    state = two_zones()
    shared_claim_pods(state, "1", "g")
    placed = bound_to(session(state))
    assert set(placed) == {"p0", "p1"} and len(set(placed.values())) == 1


def test_a_pod_that_cannot_follow_its_shared_claim_waits() -> None:
    state = two_zones()
    shared_claim_pods(state, "3", None)  # no node holds both
    outcome = session(state)
    assert len(outcome.binds) == 1
    (event,) = [e for e in outcome.events if e.ref.kind == "Pod"]
    assert BIND_CONFLICT in event.message


def test_a_claim_a_bind_selected_a_node_for_holds_the_next_pods_there() -> None:
    """Until the watch shows the claim's selected node, what the bind wrote stands for
    it: another pod sharing the claim may go to that node alone, and its bind elsewhere
    is refused."""
    state = two_zones()
    shared_claim_pods(state, "1", None)
    assert [w.node for w in state.volume_writes("default", "p0", "a1")] == ["a1"]
    (needs,) = set(needs_of(state).values())
    assert needs.unbound[0].topologies == (volumes._node_named("a1"),)
    with pytest.raises(volumes.NoVolume, match='"shared" is being bound for a1, not b1'):
        state.volume_writes("default", "p1", "b1")
    assert state.volume_writes("default", "p1", "a1") == []  # written already
    shown = claim("shared", accessModes=["ReadWriteMany"])
    shown["metadata"]["annotations"] = {SELECTED_NODE: "a1"}
    state.apply(shown)
    assert state._volumes.claimed == {}  # the watch shows it: assumed no longer


def test_a_volume_kept_for_a_claim_goes_to_it_alone() -> None:
    """A PV whose claimRef names a claim not yet bound to it (a user's pre-binding) is
    that claim's choice, the only one, and no other claim's."""
    state = two_zones()
    state.apply(storage_class(provisioner="kubernetes.io/no-provisioner"))
    state.apply(volume("kept-b", "b", claimRef={"namespace": "default", "name": "mine"}))
    for name in ("mine", "other"):
        state.apply(claim(name))
        state.apply(with_claims(f"p-{name}", name))
    needs = needs_of(state)
    assert [v for v, _ in needs["default/p-mine"].unbound[0].volumes] == ["kept-b"]
    assert needs["default/p-other"].unbound[0].volumes == ()


def test_the_volumes_fitting_on_a_node_are_those_matching_it_smallest_first() -> None:
    """Local disks are looked up by hostname (``FreeVolumes.fitting_on``): the same
    answer as matching every fitting PV against the node, whatever their affinity."""
    state = two_zones()
    state.apply(storage_class(provisioner="kubernetes.io/no-provisioner"))
    for i, host in enumerate(("a1", "b1", "a1")):
        state.apply(local_disk(f"disk-{i}", host))
    state.apply(volume("zonal-a", "a", size="50Gi"))
    state.apply(volume("anywhere", None, size="20Gi"))
    state.apply(claim("data"))
    claims, _, free = records(state)
    data = claims["default/data"]
    for host, zone in (("a1", "a"), ("b1", "b")):
        labels = {ZONE: zone, "kubernetes.io/hostname": host}
        walked = [
            v.name for v in free.fitting(data) if volumes.matches_node(v.node_terms, host, labels)
        ]
        assert [v.name for v in free.fitting_on(data, host, labels)] == walked
    assert walked == ["disk-1", "anywhere"]
