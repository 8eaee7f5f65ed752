"""The live binder's writes for a pod's claims bound on first use, before its bind: the
PV chosen is bound to the claim (against the version the choice read) or the node is
selected for the provisioner; a write that fails, or a claim that cannot be had on the
node, fails the bind with an event, never taken for bound."""

from typing import Any

import pytest

from kbatch.cluster.state import ClusterState
from kbatch.kubeapi import ApiError
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from tests.operator.test_kube import FakeApi, bind, node, task
from tests.unit.cluster.test_volumes import ZONE, claim, storage_class, volume, with_claims


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    return FakeApi.installed(monkeypatch)


def world(*objects: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    zoned = node("n1")
    zoned["metadata"]["labels"] = {ZONE: "a"}
    state.apply(zoned)
    for obj in objects:
        state.apply(obj)
    return state


def test_a_bind_first_selects_its_node_for_the_provisioner(api: FakeApi) -> None:
    state = world(storage_class(), claim("data"), with_claims("p", "data"))
    bind(state, "p")
    assert api.sent[:2] == [
        (
            "PATCH",
            "/api/v1/namespaces/default/persistentvolumeclaims/data",
            {"metadata": {"annotations": {"volume.kubernetes.io/selected-node": "n1"}}},
        ),
        ("POST", "/api/v1/namespaces/default/pods/p/binding", api.sent[1][2]),
    ]


def test_binds_take_free_volumes_one_each(api: FakeApi) -> None:
    """Two pods bound in one flush are given two PVs, not the same one twice; a third,
    with none left on the node, is not bound and says why."""
    local = storage_class(provisioner="kubernetes.io/no-provisioner")
    pvs = [volume("pv-1", "a"), volume("pv-2", "a", size="20Gi")]
    claims = [claim(f"c{i}") for i in range(3)]
    pods = [with_claims(f"p{i}", f"c{i}") for i in range(3)]
    state = world(local, *pvs, *claims, *pods)
    bind(state, "p0", "p1", "p2")
    patches = {p: b for m, p, b in api.sent if m == "PATCH"}
    chosen = {
        body["spec"]["claimRef"]["name"]: path.rpartition("/")[2] for path, body in patches.items()
    }
    assert sorted(chosen.values()) == ["pv-1", "pv-2"]
    assert all(b["metadata"]["resourceVersion"] == "7" for b in patches.values())
    bound = {p.split("/")[-2] for p in api.paths("POST") if p.endswith("/binding")}
    assert len(bound) == 2
    (left,) = {"p0", "p1", "p2"} - bound
    assert task(state, left).status is TaskStatus.PENDING
    (event,) = [e for e in api.events() if e["reason"] == "FailedScheduling"]
    assert "no persistent volume for claim" in event["message"]


def test_a_volume_write_refused_fails_the_bind_and_frees_the_volume(api: FakeApi) -> None:
    local = storage_class(provisioner="kubernetes.io/no-provisioner")
    state = world(local, volume("pv-1", "a"), claim("c0"), with_claims("p0", "c0"))
    api.answers[("PATCH", "/persistentvolumes/pv-1")] = ApiError(
        409, "the object has been modified"
    )
    bind(state, "p0")
    assert not [p for p in api.paths("POST") if p.endswith("/binding")]
    assert task(state, "p0").status is TaskStatus.PENDING  # not taken for bound on a 409
    (event,) = [e for e in api.events() if e["reason"] == "FailedScheduling"]
    assert 'claim "c0" on n1' in event["message"] and "modified" in event["message"]
    assert state._volumes.assumed == set()  # pv-1 is free again for the next session
