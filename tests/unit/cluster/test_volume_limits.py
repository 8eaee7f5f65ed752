"""A claim only one pod may use (ReadWriteOncePod) and the CSI attach limits of nodes
(``kbatch.cluster.volume_use``, ``plugins.volume_checks``): a pending pod waits while
another uses its claim, a gang that shares one waits whole, a node at its limit takes
no pod with a volume more; bad CSINodes and PVs are refused naming the field."""

import pytest

from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.volume_needs import (
    MAX_VOLUME_COUNT,
    SINGLE_POD_CONFLICT,
)
from unit.cluster.test_state import node, pod, pod_group
from unit.cluster.test_volumes import (
    bound_to,
    claim,
    session,
    storage_class,
    two_zones,
    volume,
    with_claims,
)

DRIVER = "disk.csi.example.com"


def csi_node(name: str, **limits: int | None) -> dict:
    """A CSINode of node ``name``: each driver (``_`` for ``.`` in its name) with its
    allocatable count (None: no count)."""
    drivers = []
    for driver, count in limits.items():
        entry: dict = {"name": driver.replace("_", "."), "nodeID": name}
        if count is not None:
            entry["allocatable"] = {"count": count}
        drivers.append(entry)
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": drivers},
    }


def csi_volume(name: str, claim_name: str, driver: str = DRIVER) -> dict:
    """A PV of ``driver`` (any node) bound to ``claim_name``."""
    found = volume(name, None, claimRef={"namespace": "default", "name": claim_name})
    found["spec"]["csi"] = {"driver": driver, "volumeHandle": f"handle-{name}"}
    found["status"] = {"phase": "Bound"}
    return found


def bound_claim(state: ClusterState, name: str, driver: str = DRIVER, **spec: object) -> None:
    state.apply(csi_volume(f"pv-{name}", name, driver))
    state.apply(claim(name, volumeName=f"pv-{name}", **spec))


def running_on(state: ClusterState, name: str, node_name: str, *claims: str) -> None:
    running = with_claims(name, *claims)
    running["spec"]["nodeName"] = node_name
    running["status"] = {"phase": "Running"}
    state.apply(running)


def events_of(outcome: object, *names: str) -> list[str]:
    return [e.message for e in outcome.events if e.ref.name in names]  # type: ignore[attr-defined]


RWOP = {"accessModes": ["ReadWriteOncePod"]}


# ---------------------------------------------------------------- ReadWriteOncePod


def test_a_claim_one_pod_uses_bars_every_node_to_another() -> None:
    state = two_zones()
    bound_claim(state, "data", **RWOP)
    running_on(state, "first", "a1", "data")
    state.apply(with_claims("p", "data"))
    outcome = session(state)
    assert not outcome.binds
    assert any(f"2 {SINGLE_POD_CONFLICT}" in m for m in events_of(outcome, "p"))
    state.delete("Pod", "default", "first")  # (once it is gone, the claim is free)
    assert set(bound_to(session(state))) == {"p"}


def test_a_finished_pod_holds_no_claim() -> None:
    state = two_zones()
    bound_claim(state, "data", **RWOP)
    running_on(state, "first", "a1", "data")
    done = with_claims("first", "data")
    done["spec"]["nodeName"] = "a1"
    done["status"] = {"phase": "Succeeded"}
    state.apply(done)
    state.apply(with_claims("p", "data"))
    assert set(bound_to(session(state))) == {"p"}


def test_a_claim_of_other_modes_is_shared() -> None:
    state = two_zones()
    bound_claim(state, "data", accessModes=["ReadWriteMany"])
    running_on(state, "first", "a1", "data")
    state.apply(with_claims("p", "data"))
    assert set(bound_to(session(state))) == {"p"}


def test_of_two_pending_pods_sharing_the_claim_one_is_bound() -> None:
    state = two_zones()
    bound_claim(state, "data", **RWOP)
    state.apply(with_claims("p0", "data"))
    state.apply(with_claims("p1", "data"))
    outcome = session(state)
    (placed,) = bound_to(outcome)
    other = "p1" if placed == "p0" else "p0"
    assert any(SINGLE_POD_CONFLICT in m for m in events_of(outcome, other))


def test_a_gang_sharing_the_claim_is_not_admitted_saying_why() -> None:
    state = two_zones()
    bound_claim(state, "data", **RWOP)
    state.apply(pod_group("g", min_member=2))
    state.apply(with_claims("p0", "data", group="g"))
    state.apply(with_claims("p1", "data", group="g"))
    outcome = session(state)
    assert not outcome.binds
    assert not outcome.nominations  # no node kept for a gang that can never start
    told = events_of(outcome, "p0", "p1", "g")
    # (not admitted: it could never start, and would hold the room admitted for it)
    assert any("one at a time: they share a ReadWriteOncePod claim" in m for m in told), told


def discarded_gang(state: ClusterState, claim_name: str) -> None:
    """A gang of two placed first (of a higher priority), one with the claim, the other
    fitting no node once it is placed (4 cpu, 3 left on each node): its statement is
    discarded."""
    for name in ("a1", "b1"):
        filler = pod(f"filler-{name}", nodeName=name)
        filler["status"] = {"phase": "Running"}
        state.apply(filler)
    state.apply(pod_group("g", min_member=2))
    for member in (with_claims("g0", claim_name, group="g"), pod("g1", cpu="4", group="g")):
        member["spec"]["priority"] = 1000
        state.apply(member)


def test_a_discarded_gang_frees_the_claim_for_the_next_pod() -> None:
    state = two_zones()
    bound_claim(state, "data", **RWOP)
    discarded_gang(state, "data")
    state.apply(with_claims("alone", "data"))
    assert set(bound_to(session(state))) == {"alone"}


def test_a_pod_bound_but_not_yet_shown_holds_its_claim() -> None:
    state = two_zones()
    bound_claim(state, "data", **RWOP)
    state.apply(with_claims("p0", "data"))
    state.assume_bound("default", "p0", "a1")  # (the bind sent; the watch lags)
    state.apply(with_claims("p1", "data"))
    outcome = session(state)
    assert not outcome.binds
    assert any(SINGLE_POD_CONFLICT in m for m in events_of(outcome, "p1"))


# ---------------------------------------------------------------- CSI attach limits


def limited_nodes(state: ClusterState, a1: int, b1: int | None) -> None:
    state.apply(csi_node("a1", disk_csi_example_com=a1))
    state.apply(csi_node("b1", disk_csi_example_com=b1))


def test_a_node_at_its_limit_takes_the_pod_to_another() -> None:
    state = two_zones()
    limited_nodes(state, 1, 1)
    bound_claim(state, "old")
    running_on(state, "old", "a1", "old")
    bound_claim(state, "new")
    state.apply(with_claims("p", "new"))
    assert bound_to(session(state)) == {"p": "b1"}


def test_a_pod_waits_while_every_node_is_at_its_limit() -> None:
    state = two_zones()
    limited_nodes(state, 1, 0)
    bound_claim(state, "old")
    running_on(state, "old", "a1", "old")
    bound_claim(state, "new")
    state.apply(with_claims("p", "new"))
    outcome = session(state)
    assert not outcome.binds
    assert any(f"2 {MAX_VOLUME_COUNT}" in m for m in events_of(outcome, "p"))


def test_a_volume_attached_already_counts_once() -> None:
    """a1 may attach one volume and has it: a pod sharing that very volume goes
    there (b1 may attach none)."""
    state = two_zones()
    limited_nodes(state, 1, 0)
    bound_claim(state, "shared", accessModes=["ReadWriteMany"])
    running_on(state, "old", "a1", "shared")
    state.apply(with_claims("p", "shared"))
    assert bound_to(session(state)) == {"p": "a1"}


def test_another_driver_and_a_node_without_a_count_are_not_limited() -> None:
    state = two_zones()
    state.apply(csi_node("a1", disk_csi_example_com=0, other_csi_example_com=None))
    state.apply(csi_node("b1", disk_csi_example_com=0))
    bound_claim(state, "other", driver="other.csi.example.com")
    state.apply(with_claims("p", "other"))
    assert set(bound_to(session(state))) == {"p"}


def test_pods_placed_in_one_session_count_against_the_limit() -> None:
    """Each node may attach one volume: a gang of two, a claim each, is placed one pod
    a node; a gang of three waits whole."""
    state = two_zones()
    limited_nodes(state, 1, 1)
    state.apply(pod_group("g", min_member=2))
    for i in range(2):
        bound_claim(state, f"d{i}")
        state.apply(with_claims(f"p{i}", f"d{i}", group="g"))
    assert sorted(bound_to(session(state)).values()) == ["a1", "b1"]
    state = two_zones()
    limited_nodes(state, 1, 1)
    state.apply(pod_group("g", min_member=3))
    for i in range(3):
        bound_claim(state, f"d{i}")
        state.apply(with_claims(f"p{i}", f"d{i}", group="g"))
    outcome = session(state)
    assert not outcome.binds
    assert any(MAX_VOLUME_COUNT in m for m in events_of(outcome, "p0", "p1", "p2", "g"))


def test_a_gang_the_limits_never_let_start_keeps_no_node() -> None:
    """Three volumes, two nodes that may attach one each, and room for the gang only
    once the fillers are gone: no node is kept for it to drain, and it is told why."""
    state = two_zones()
    limited_nodes(state, 1, 1)
    for name in ("a1", "b1"):
        filler = pod(f"filler-{name}", nodeName=name)
        filler["status"] = {"phase": "Running"}
        state.apply(filler)
    state.apply(pod_group("g", min_member=3))
    for i in range(3):
        bound_claim(state, f"d{i}")
        member = with_claims(f"p{i}", f"d{i}", group="g")
        member["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
        state.apply(member)
    outcome = session(state)
    assert not outcome.binds
    assert not outcome.nominations
    assert any(MAX_VOLUME_COUNT in m for m in events_of(outcome, "p0", "p1", "p2", "g"))


def test_a_discarded_gang_attaches_nothing() -> None:
    """a1 may attach one volume, b1 none: the discarded gang's member placed on a1
    leaves its room to the pod after it."""
    state = two_zones()
    limited_nodes(state, 1, 0)
    bound_claim(state, "d0")
    discarded_gang(state, "d0")
    bound_claim(state, "d1")
    state.apply(with_claims("alone", "d1"))
    assert bound_to(session(state)) == {"alone": "a1"}


def test_a_claim_not_yet_bound_counts_against_its_class_provisioner() -> None:
    state = two_zones()
    state.apply(storage_class(provisioner=DRIVER))
    limited_nodes(state, 0, 1)
    state.apply(claim("fresh"))
    state.apply(with_claims("p", "fresh"))
    assert bound_to(session(state)) == {"p": "b1"}


def test_a_pod_without_volumes_ignores_the_limits() -> None:
    state = two_zones()
    limited_nodes(state, 0, 0)
    state.apply(pod("p"))
    assert set(bound_to(session(state))) == {"p"}
    assert state.snapshot().node_volumes is None  # (nothing worked out for it)


# ---------------------------------------------------------------- refused input


@pytest.mark.parametrize(
    ("drivers", "field"),
    [
        ([{"nodeID": "a1"}], "spec.drivers[0].name"),
        ([{"name": DRIVER, "allocatable": {"count": -1}}], "spec.drivers[0].allocatable.count"),
        ([{"name": DRIVER, "allocatable": {"count": "many"}}], "spec.drivers[0].allocatable.count"),
        ("all of them", "spec.drivers"),
    ],
)
def test_a_bad_csinode_is_refused_naming_the_field(drivers: object, field: str) -> None:
    state = two_zones()
    good = csi_node("a1", disk_csi_example_com=2)
    state.apply(good)
    bad = {**good, "spec": {"drivers": drivers}}
    with pytest.raises(ObjectError) as refused:
        state.apply(bad)
    assert refused.value.field == field
    assert "CSINode a1" in str(refused.value)
    assert state.refusal("CSINode", "", "a1") is not None
    assert state.get("CSINode", "", "a1") == good  # (the last good version stands)


@pytest.mark.parametrize(
    ("csi", "field"),
    [({"volumeHandle": "h"}, "spec.csi.driver"), ({"driver": DRIVER}, "spec.csi.volumeHandle")],
)
def test_a_pv_of_a_bad_csi_source_is_refused_naming_the_field(csi: dict, field: str) -> None:
    bad = volume("v", None)
    bad["spec"]["csi"] = csi
    with pytest.raises(ObjectError) as refused:
        ClusterState().apply(bad)
    assert refused.value.field == field
    assert "PersistentVolume v" in str(refused.value)


def test_a_csinode_of_a_node_not_in_the_snapshot_is_harmless() -> None:
    state = ClusterState()
    state.apply(node("a1"))
    state.apply(csi_node("gone", disk_csi_example_com=0))
    bound_claim(state, "d")
    state.apply(with_claims("p", "d"))
    assert bound_to(session(state)) == {"p": "a1"}
