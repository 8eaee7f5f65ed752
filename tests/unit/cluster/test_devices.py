"""Dynamic Resource Allocation (``kbatch.cluster.devices``, ``plugins.device_checks``): a
pod with resource claims goes where its requests' devices are reached and free, a gang
sharing a node's devices is placed within them or waits whole, an allocated claim pins
its pods, a claim that cannot be allocated makes its pod wait saying why, and the bind
writes each claim's allocation and reservation first."""

import pytest

from kbatch.cluster import devices
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.device_needs import (
    CANNOT_ALLOCATE,
    NOT_ON_NODE,
    DeviceRequest,
    allocate,
)
from unit.cluster.test_dra_records import (
    DRIVER,
    device_class,
    gpu,
    resource_claim,
    resource_slice,
)
from unit.cluster.test_state import node, pod, pod_group
from unit.cluster.test_volumes import session


def claiming(name: str, *claims: str, group: str | None = None) -> dict:
    listed = [{"name": c, "resourceClaimName": c} for c in claims]
    return pod(name, group=group, resourceClaims=listed)


def cluster(*objects: dict) -> ClusterState:
    state = ClusterState()
    for obj in (node("n1"), node("n2"), device_class(), *objects):
        state.apply(obj)
    return state


def placed(state: ClusterState) -> dict[str, str]:
    return {bind.task.name: bind.node for bind in session(state).binds}


def why(state: ClusterState, name: str) -> str:
    outcome = session(state)
    assert name not in {bind.task.name for bind in outcome.binds}
    (event,) = [e for e in outcome.events if e.ref.name == name]
    return event.message


def test_a_pod_goes_to_the_node_whose_device_its_selectors_select() -> None:
    state = cluster(
        resource_slice("n1", gpu("gpu-0", model="t4")),
        resource_slice("n2", gpu("gpu-0")),
        resource_claim("c", 1, 'device.attributes["gpu.example.com"].model == "a100"'),
        claiming("p", "c"),
    )
    assert placed(state) == {"p": "n2"}


def test_capacity_is_compared_as_a_quantity() -> None:
    wanted = 'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0'
    state = cluster(
        resource_slice("n1", gpu("gpu-0", memory="24Gi")),
        resource_slice("n2", gpu("gpu-0", memory="80Gi")),
        resource_claim("c", 1, wanted),
        claiming("p", "c"),
    )
    assert placed(state) == {"p": "n2"}


def test_a_gang_is_placed_within_the_devices_and_never_on_a_device_twice() -> None:
    state = cluster(
        resource_slice("n1", gpu("gpu-0"), gpu("gpu-1")),
        resource_slice("n2", gpu("gpu-0")),
        pod_group("g", 3),
        *(resource_claim(f"c{i}") for i in range(3)),
        *(claiming(f"p{i}", f"c{i}", group="g") for i in range(3)),
    )
    found = placed(state)
    assert sorted(found.values()) == ["n1", "n1", "n2"]


def test_a_gang_that_wants_more_devices_than_there_are_waits_whole_saying_why() -> None:
    state = cluster(
        resource_slice("n1", gpu("gpu-0")),
        pod_group("g", 3),
        *(resource_claim(f"c{i}") for i in range(3)),
        *(claiming(f"p{i}", f"c{i}", group="g") for i in range(3)),
    )
    outcome = session(state)
    assert not outcome.binds
    messages = [e.message for e in outcome.events if e.ref.name.startswith("p")]
    assert any(CANNOT_ALLOCATE in m for m in messages)


def test_devices_held_by_allocated_claims_are_taken_and_an_allocated_claim_pins() -> None:
    held = resource_claim("held")
    held["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "gpus", "driver": DRIVER, "pool": "n1", "device": "gpu-0"}]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]
            },
        }
    }
    state = cluster(
        resource_slice("n1", gpu("gpu-0")),
        resource_slice("n2", gpu("gpu-0")),
        held,
        resource_claim("c"),
        claiming("p", "c"),
        claiming("q", "held"),
    )
    assert placed(state) == {"p": "n2", "q": "n1"}


def test_a_node_whose_claim_is_allocated_elsewhere_is_told_so() -> None:
    held = resource_claim("held")
    held["status"] = {
        "allocation": {
            "devices": {"results": []},
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n3"]}]}
                ]
            },
        }
    }
    state = cluster(held, claiming("q", "held"))
    assert f"2 {NOT_ON_NODE}" in why(state, "q")


def test_a_pod_sharing_a_claim_follows_the_pod_that_allocated_it() -> None:
    state = cluster(
        resource_slice("n1", gpu("gpu-0")),
        resource_slice("n2", gpu("gpu-0")),
        pod_group("g", 2),
        resource_claim("shared"),
        claiming("p0", "shared", group="g"),
        claiming("p1", "shared", group="g"),
    )
    found = placed(state)
    assert len(found) == 2 and found["p0"] == found["p1"]


def test_allocation_mode_all_takes_every_device_and_none_held() -> None:
    state = cluster(
        resource_slice("n1", gpu("gpu-0"), gpu("gpu-1")),
        resource_claim("c", allocationMode="All"),
        claiming("p", "c"),
    )
    (found,) = devices_needs(state)["default/p"].requests
    assert found.count == 0
    assert placed(state) == {"p": "n1"}
    writes = state.device_writes("default", "p", "n1")
    assert [r[3] for r in writes[0].results] == ["gpu-0", "gpu-1"]


def test_only_the_newest_generation_of_a_pool_counts() -> None:
    state = cluster(
        resource_slice("n1", gpu("gpu-0"), generation=1),
        resource_slice("n1", gpu("gpu-1"), generation=2),
        resource_claim("c"),
        claiming("p", "c"),
    )
    (found,) = devices_needs(state)["default/p"].requests
    assert found.candidates == (f"{DRIVER}/n1/gpu-1",)


def test_a_slice_for_all_nodes_or_a_selector_reaches_those_nodes() -> None:
    zoned = node("n2")
    zoned["metadata"]["labels"] = {"zone": "b"}
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]}
        ]
    }
    state = ClusterState()
    for obj in (node("n1"), zoned, device_class()):
        state.apply(obj)
    state.apply(resource_slice("fabric", gpu("gpu-0"), nodeSelector=selector))
    state.apply(resource_claim("c"))
    state.apply(claiming("p", "c"))
    assert placed(state) == {"p": "n2"}


def devices_needs(state: ClusterState) -> dict:
    return dict(state._devices.of_state(state._parsed)[0])


@pytest.mark.parametrize(
    ("objects", "reason"),
    [
        ([claiming("p", "nope")], 'resourceclaim "nope" not found'),
        (
            [pod("p", resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}])],
            'waiting for resourceclaim of pod claim "g" to be created',
        ),
        (
            [resource_claim("c", deviceClassName="tpu"), claiming("p", "c")],
            'resourceclaim "c": request "gpus": deviceclass.resource.k8s.io "tpu" not found',
        ),
        (
            [
                resource_slice("n1", gpu("gpu-0")),
                resource_claim("c", 1, 'device.attributes["gpu.example.com"].nope == 1'),
                claiming("p", "c"),
            ],
            'resourceclaim "c": request "gpus": CEL expression'
            " 'device.attributes[\"gpu.example.com\"].nope == 1' failed on device 'gpu-0'"
            " of driver gpu.example.com: KeyError: 'nope'",
        ),
    ],
)
def test_a_pod_waits_while_a_claim_cannot_be_allocated_saying_why(
    objects: list[dict], reason: str
) -> None:
    message = why(cluster(*objects), "p")
    assert message.startswith("0/2 nodes are available: 2 ") and reason in message


def test_a_claim_made_from_a_template_is_read_from_the_pod_status() -> None:
    made = pod("p", resourceClaims=[{"name": "g", "resourceClaimTemplateName": "t"}])
    made["status"] = {"resourceClaimStatuses": [{"name": "g", "resourceClaimName": "p-g-x"}]}
    state = cluster(resource_slice("n1", gpu("gpu-0")), resource_claim("p-g-x"), made)
    assert placed(state) == {"p": "n1"}


def test_the_bind_allocates_and_reserves_and_holds_the_devices_until_shown() -> None:
    state = cluster(
        resource_slice("n1", gpu("gpu-0"), gpu("gpu-1")),
        resource_claim("c", 2),
        resource_claim("d"),
        claiming("p", "c"),
        claiming("q", "d"),
    )
    (write,) = state.device_writes("default", "p", "n1")
    assert write.claim.name == "c" and write.node == "n1"
    assert write.results == (
        ("gpus", DRIVER, "n1", "gpu-0"),
        ("gpus", DRIVER, "n1", "gpu-1"),
    )
    with pytest.raises(devices.NoDevice, match="cannot allocate all claims on n1"):
        state.device_writes("default", "q", "n1")  # (both are held now)
    state.forget_devices(write)
    assert state.device_writes("default", "q", "n1")[0].results[0][3] == "gpu-0"


def test_allocate_takes_the_first_free_candidates_and_no_device_twice() -> None:
    a = DeviceRequest("ns/c", "a", ("d0", "d1", "d2"), 1)
    b = DeviceRequest("ns/c", "b", ("d0", "d1"), 1)
    everywhere = lambda device: True  # noqa: E731
    assert allocate((a, b), everywhere, {"d0"}) is None  # (b has d1 only, which a took)
    assert allocate((a, b), everywhere, set()) == {("ns/c", "a"): ("d0",), ("ns/c", "b"): ("d1",)}


def test_a_gang_wanting_more_devices_than_a_node_has_keeps_no_node_to_drain() -> None:
    """One node, one GPU, its cpu taken by a filler: a gang of two (admitted), each
    wanting a GPU, could fit once it drains but for the devices; no node is kept for it
    (it was, for ever, its pods told they waited for the node to drain)."""
    filler = pod("filler", cpu="4", nodeName="n1")
    filler["status"] = {"phase": "Running"}
    state = ClusterState()
    for obj in (node("n1"), device_class(), resource_slice("n1", gpu("gpu-0")), filler):
        state.apply(obj)
    admitted = pod_group("g", 2)
    admitted["status"] = {"phase": "Inqueue"}
    state.apply(admitted)
    for i in range(2):
        state.apply(resource_claim(f"c{i}"))
        state.apply(claiming(f"p{i}", f"c{i}", group="g"))
    outcome = session(state)
    assert not outcome.binds
    assert not outcome.nominations


def test_a_discarded_gang_holds_no_device_for_the_pod_after_it() -> None:
    """Two GPUs, but n2's cpu is taken: the gang's first pod placed takes n1's GPU; the
    gang cannot be placed whole, its statement discarded, and the pod after it has the
    GPU."""
    filler = pod("filler", cpu="4", nodeName="n2")
    filler["status"] = {"phase": "Running"}
    state = cluster(resource_slice("n1", gpu("gpu-0")), resource_slice("n2", gpu("gpu-0")), filler)
    state.apply(pod_group("g", 2))
    for i in range(2):
        state.apply(resource_claim(f"c{i}"))
        state.apply(claiming(f"p{i}", f"c{i}", group="g"))
    state.apply(resource_claim("after"))
    later = claiming("after", "after")
    later["metadata"]["creationTimestamp"] = "2030-01-01T00:00:00Z"
    state.apply(later)
    assert placed(state) == {"after": "n1"}


def test_a_gang_wanting_more_devices_than_the_cluster_has_is_not_admitted() -> None:
    """Three pods of a GPU each, two GPUs in all: the gang never runs, so it is not
    admitted (it would hold its room for ever), told why; the pod after it runs."""
    state = cluster(
        resource_slice("n1", gpu("gpu-0")),
        resource_slice("n2", gpu("gpu-0")),
        pod_group("g", 3),
        pod("after"),
    )
    for i in range(3):
        state.apply(resource_claim(f"c{i}"))
        state.apply(claiming(f"p{i}", f"c{i}", group="g"))
    outcome = session(state)
    assert [bind.task.name for bind in outcome.binds] == ["after"]
    (update,) = [u for u in outcome.pod_groups if u.name == "g"]
    assert update.status.phase.value == "Pending"
    (told,) = [e.message for e in outcome.events if e.ref.name == "g"]
    assert "cannot allocate all claims: 3 of its pods want 3 devices of the 2" in told


def numa_gpu(name: str, numa: int) -> dict:
    found = gpu(name)
    found["attributes"]["numa"] = {"int": numa}
    return found


def test_a_match_attribute_constraint_takes_devices_of_one_value() -> None:
    """Two GPUs of one NUMA node: n1's are on two, n2's first is alone on its own and the
    next two share one, which the claim gets."""
    claim = resource_claim("c", 2)
    claim["spec"]["devices"]["constraints"] = [{"matchAttribute": f"{DRIVER}/numa"}]
    state = cluster(
        resource_slice("n1", numa_gpu("gpu-0", 0), numa_gpu("gpu-1", 1)),
        resource_slice("n2", numa_gpu("gpu-0", 0), numa_gpu("gpu-1", 1), numa_gpu("gpu-2", 1)),
        claim,
        claiming("p", "c"),
    )
    assert placed(state) == {"p": "n2"}
    (write,) = state.device_writes("default", "p", "n2")
    assert [result[3] for result in write.results] == ["gpu-1", "gpu-2"]
    with pytest.raises(devices.NoDevice):
        state.device_writes("default", "p", "n1")


def test_a_request_in_two_constraints_waits_saying_kbatch_does_not_allocate_it() -> None:
    claim = resource_claim("c", 2)
    claim["spec"]["devices"]["constraints"] = [
        {"matchAttribute": f"{DRIVER}/numa"},
        {"requests": ["gpus"], "matchAttribute": f"{DRIVER}/model"},
    ]
    state = cluster(resource_slice("n1", numa_gpu("gpu-0", 0)), claim, claiming("p", "c"))
    assert 'request "gpus" is in two constraints' in why(state, "p")


def test_allocate_tries_each_value_of_a_constraint_in_order() -> None:
    a = DeviceRequest(
        "ns/c", "a", ("d0", "d1", "d2"), 1, constraint="ns/c#0", values=("x", "y", "y")
    )
    b = DeviceRequest("ns/c", "b", ("e0", "e1"), 1, constraint="ns/c#0", values=("y", "z"))
    everywhere = lambda device: True  # noqa: E731
    assert allocate((a, b), everywhere, set()) == {("ns/c", "a"): ("d1",), ("ns/c", "b"): ("e0",)}
    assert allocate((a, b), everywhere, {"e0"}) is None
