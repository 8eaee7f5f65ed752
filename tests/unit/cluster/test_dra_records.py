"""What kbatch reads of ResourceClaims, DeviceClasses and ResourceSlices
(``kbatch.cluster.dra_records``) and of a pod's resource claims, bad ones refused naming
the field; and the CEL selectors (``kbatch.cluster.device_match``), evaluated as
kube-scheduler does, a runtime error said in words."""

from typing import Any

import pytest

from kbatch.cluster import dra_records
from kbatch.cluster.device_match import DeviceContexts, SelectorError
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.records import parse_pod
from unit.cluster.test_state import pod

DRIVER = "gpu.example.com"


def device_class(name: str = "gpu", *selectors: str) -> dict:
    expressions = [f'device.driver == "{DRIVER}"', *selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in expressions]},
    }


def gpu(name: str, model: str = "a100", memory: str = "80Gi") -> dict:
    return {
        "name": name,
        "attributes": {"model": {"string": model}, "index": {"int": int(name[-1])}},
        "capacity": {"memory": {"value": memory}},
    }


def resource_slice(node_name: str, *gpus: dict, generation: int = 1, **where: Any) -> dict:
    spec: dict[str, Any] = {
        "driver": DRIVER,
        "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
        "devices": list(gpus),
    }
    spec.update(where or {"nodeName": node_name})
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{generation}"},
        "spec": spec,
    }


def resource_claim(name: str, count: int = 1, *selectors: str, **exactly: Any) -> dict:
    request: dict[str, Any] = {"deviceClassName": "gpu", "count": count, **exactly}
    if selectors:
        request["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": request}]}},
    }


def test_a_claim_is_read_with_its_requests_and_allocation() -> None:
    claim = resource_claim("c", 2, 'device.attributes["gpu.example.com"].model == "a100"')
    claim["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "gpus", "driver": DRIVER, "pool": "n1", "device": "g0"}]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}],
    }
    found = dra_records.parse_resource_claim(claim)
    (request,) = found.requests
    assert (request.name, request.device_class, request.count, request.all) == (
        "gpus",
        "gpu",
        2,
        False,
    )
    assert request.selectors == ('device.attributes["gpu.example.com"].model == "a100"',)
    assert found.allocated and found.node_terms is None
    assert [d.id for d in found.devices] == [f"{DRIVER}/n1/g0"]
    assert found.reserved_for == ("uid-p",)


def test_a_slice_qualifies_its_attributes_with_the_driver_s_domain() -> None:
    found = dra_records.parse_resource_slice(resource_slice("n1", gpu("gpu-0", memory="1Gi")))
    (device,) = found.devices
    assert (found.driver, found.pool, found.node_name) == (DRIVER, "n1", "n1")
    assert device.attributes == {f"{DRIVER}/model": "a100", f"{DRIVER}/index": 0}
    assert device.capacity == {f"{DRIVER}/memory": float(2**30)}


def _with(obj: dict, path: str, value: Any) -> dict:
    *parents, last = path.split(".")
    at: Any = obj
    for step in parents:
        at = at[int(step)] if isinstance(at, list) else at[step]
    if isinstance(at, list):
        at[int(last)] = value
    else:
        at[last] = value
    return obj


@pytest.mark.parametrize(
    ("path", "value", "field", "why"),
    [
        (
            "spec.devices.requests.0.exactly.count",
            0,
            "spec.devices.requests[0].exactly.count",
            "must be greater than zero",
        ),
        (
            "spec.devices.requests.0.exactly.allocationMode",
            "Some",
            "spec.devices.requests[0].exactly.allocationMode",
            "must be ExactCount or All, not 'Some'",
        ),
        (
            "spec.devices.requests.0.exactly.deviceClassName",
            "",
            "spec.devices.requests[0].exactly.deviceClassName",
            "required",
        ),
        ("spec.devices.requests.0.name", "", "spec.devices.requests[0].name", "required"),
    ],
)
def test_a_bad_claim_is_refused_naming_the_field(
    path: str, value: Any, field: str, why: str
) -> None:
    with pytest.raises(ObjectError) as caught:
        dra_records.parse_resource_claim(_with(resource_claim("c"), path, value))
    assert (caught.value.field, caught.value.why) == (field, why)
    assert "default/c" in str(caught.value)


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("spec.driver", "", "spec.driver"),
        ("spec.pool.name", "", "spec.pool.name"),
        ("spec.devices.0.name", "", "spec.devices[0].name"),
        ("spec.devices.0.attributes.model", {"float": 1.5}, "spec.devices[0].attributes.model"),
        ("spec.devices.0.attributes.model", {"int": "1"}, "spec.devices[0].attributes.model.int"),
        (
            "spec.devices.0.capacity.memory",
            {"value": "lots"},
            "spec.devices[0].capacity.memory.value",
        ),
        ("spec.allNodes", True, "spec.nodeName"),
    ],
)
def test_a_bad_slice_is_refused_naming_the_field(path: str, value: Any, field: str) -> None:
    with pytest.raises(ObjectError) as caught:
        dra_records.parse_resource_slice(_with(resource_slice("n1", gpu("gpu-0")), path, value))
    assert caught.value.field == field


def test_a_pod_s_claims_are_named_directly_or_by_its_status_once_made() -> None:
    claims = [
        {"name": "a", "resourceClaimName": "shared"},
        {"name": "b", "resourceClaimTemplateName": "t"},
    ]
    waiting = parse_pod(pod("p", resourceClaims=claims))
    assert waiting.device_claims == (("a", "shared"), ("b", ""))
    made = pod("p", resourceClaims=claims)
    made["status"] = {"resourceClaimStatuses": [{"name": "b", "resourceClaimName": "p-b-1"}]}
    assert parse_pod(made).device_claims == (("a", "shared"), ("b", "p-b-1"))


def test_a_pod_claim_naming_no_source_is_refused_naming_the_field() -> None:
    with pytest.raises(ObjectError) as caught:
        parse_pod(pod("p", resourceClaims=[{"name": "a"}]))
    assert caught.value.field == "spec.resourceClaims[0].resourceClaimName"


def test_cel_selectors_see_the_driver_attributes_and_quantities() -> None:
    (device,) = dra_records.parse_resource_slice(resource_slice("n1", gpu("gpu-3"))).devices
    contexts = DeviceContexts()
    attribute = f'device.attributes["{DRIVER}"]'
    memory = f'device.capacity["{DRIVER}"].memory'
    assert contexts.selects(DRIVER, device, (f'device.driver == "{DRIVER}"',))
    assert contexts.selects(DRIVER, device, (f"{attribute}.index == 3",))
    assert contexts.selects(DRIVER, device, (f'{memory}.isGreaterThan(quantity("40Gi"))',))
    assert not contexts.selects(DRIVER, device, (f'{memory}.isLessThan(quantity("40Gi"))',))
    assert not contexts.selects(DRIVER, device, (f'{attribute}.model == "t4"',))


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ('device.attributes["gpu.example.com"].nope == 1', "KeyError: 'nope'"),
        ("device.driver", "yields no bool"),
        ("device.driver ==", "does not compile"),
    ],
)
def test_a_selector_that_cannot_be_evaluated_says_why(expression: str, why: str) -> None:
    (device,) = dra_records.parse_resource_slice(resource_slice("n1", gpu("gpu-0"))).devices
    with pytest.raises(SelectorError, match=why.replace("(", r"\(")):
        DeviceContexts().selects(DRIVER, device, (expression,))
