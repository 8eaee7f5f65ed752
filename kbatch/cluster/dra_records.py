"""What kbatch reads of the kinds of Dynamic Resource Allocation (resource.k8s.io/v1,
structured parameters): ResourceClaims, DeviceClasses and ResourceSlices, and of a pod,
the claims its ``spec.resourceClaims`` name. Where they let a pod go, and what its bind
writes, is ``kbatch.cluster.devices``'s. A bad object raises ObjectError naming it and
the field, as the API server's validation would.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from kbatch.cluster import fields
from kbatch.cluster.placement_spec import node_term
from kbatch.cluster.quantity import parse_quantity
from kbatch.cluster.record_parsing import naming, object_name, ref_of
from kbatch.operators.scheduler.core.framework.volume_needs import Terms

EXACT_COUNT = "ExactCount"
ALL = "All"
ALLOCATION_MODES = (EXACT_COUNT, ALL)
# An attribute's value is one of these (a version is kept as its text).
ATTRIBUTE_TYPES = ("int", "bool", "string", "version")

Scalar = int | bool | str


@dataclass(frozen=True, slots=True)
class DeviceRequestRecord:
    """One of a claim's ``spec.devices.requests``: ``count`` devices (``all``: every one
    on the node) of class ``device_class`` that its selectors (CEL) select.
    ``first_available``: the request lists subrequests instead, which kbatch does not
    allocate (``devices``: the pod is told so)."""

    name: str
    device_class: str = ""
    selectors: tuple[str, ...] = ()
    all: bool = False
    count: int = 1
    admin_access: bool = False
    first_available: bool = False


@dataclass(frozen=True, slots=True)
class AllocatedDevice:
    """One of ``status.allocation.devices.results``."""

    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool = False

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class ResourceClaimRecord:
    """A ResourceClaim: what it asks for (``requests``; ``constraints``: the requests
    whose devices must share the value of an attribute, as (requests, attribute)), and,
    once allocated, its devices and the nodes they are reached from (``node_terms``:
    ``allocation.nodeSelector``, None: any node), and the pods it is reserved for (uids)."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    requests: tuple[DeviceRequestRecord, ...]
    constraints: tuple[tuple[tuple[str, ...], str], ...] = ()
    allocated: bool = False
    devices: tuple[AllocatedDevice, ...] = ()
    node_terms: Terms | None = None
    reserved_for: tuple[str, ...] = ()
    deleting: bool = False


@dataclass(frozen=True, slots=True)
class DeviceClassRecord:
    name: str
    selectors: tuple[str, ...] = ()  # spec.selectors[].cel.expression


@dataclass(frozen=True, slots=True)
class DeviceRecord:
    """A device of a ResourceSlice: its attributes and capacities by qualified name
    (domain/name; an unqualified one is of the driver's domain), a capacity as a number."""

    name: str
    attributes: Mapping[str, Scalar]
    capacity: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class ResourceSliceRecord:
    """A ResourceSlice: devices of ``driver``'s ``pool`` (of ``generation``; only a
    pool's newest counts), reached from the node ``node_name``, or the nodes
    ``node_terms`` select, or every node (``all_nodes``)."""

    name: str
    driver: str
    pool: str
    generation: int
    devices: tuple[DeviceRecord, ...]
    node_name: str = ""
    node_terms: Terms | None = None
    all_nodes: bool = False


def parse_resource_claim(obj: Mapping[str, Any]) -> ResourceClaimRecord:
    with naming(ref_of(obj)):
        namespace, name = object_name(obj, namespaced=True)
        at = "spec.devices.requests"
        requests = tuple(
            _request(request, f"{at}[{i}]") for i, request in enumerate(fields.mappings(obj, at))
        )
        allocation = fields.mapping(obj, "status.allocation")
        return ResourceClaimRecord(
            namespace=namespace,
            name=name,
            uid=fields.string(obj, "metadata.uid") or "",
            resource_version=fields.string(obj, "metadata.resourceVersion") or "",
            requests=requests,
            constraints=_constraints(obj, {r.name for r in requests}),
            allocated=fields.value(obj, "status.allocation") is not None,
            devices=_results(allocation),
            node_terms=_selector(allocation, "nodeSelector", "status.allocation"),
            reserved_for=tuple(
                fields.string(ref, "uid", at=f"status.reservedFor[{i}]") or ""
                for i, ref in enumerate(fields.mappings(obj, "status.reservedFor"))
            ),
            deleting=bool(fields.value(obj, "metadata.deletionTimestamp")),
        )


def _request(request: Mapping[str, Any], at: str) -> DeviceRequestRecord:
    name = fields.string(request, "name", at=at)
    if not name:
        raise fields.FieldError(f"{at}.name", "required")
    if request.get("firstAvailable") is not None:
        fields.mappings(request, "firstAvailable", at=at)
        return DeviceRequestRecord(name, first_available=True)
    if request.get("exactly") is None:
        raise fields.FieldError(f"{at}.exactly", "required (or firstAvailable)")
    at = f"{at}.exactly"
    exactly = fields.mapping(request, "exactly", at=at.rsplit(".", 1)[0])
    device_class = fields.string(exactly, "deviceClassName", at=at)
    if not device_class:
        raise fields.FieldError(f"{at}.deviceClassName", "required")
    mode = fields.string(exactly, "allocationMode", at=at) or EXACT_COUNT
    if mode not in ALLOCATION_MODES:
        why = f"must be {' or '.join(ALLOCATION_MODES)}, not {mode!r}"
        raise fields.FieldError(f"{at}.allocationMode", why)
    count = fields.integer(exactly, "count", at=at)
    if count is not None and count <= 0:
        raise fields.FieldError(f"{at}.count", "must be greater than zero")
    admin = fields.value(exactly, "adminAccess", at=at)
    if admin is not None and not isinstance(admin, bool):
        raise fields.FieldError(f"{at}.adminAccess", f"not {fields.shown(admin)}")
    return DeviceRequestRecord(
        name,
        device_class,
        _cel_selectors(exactly, at),
        all=mode == ALL,
        count=1 if count is None else count,
        admin_access=bool(admin),
    )


def _cel_selectors(parent: Mapping[str, Any], at: str) -> tuple[str, ...]:
    found = []
    for i, selector in enumerate(fields.mappings(parent, "selectors", at=at)):
        where = f"{at}.selectors[{i}]"
        expression = fields.string(selector, "cel.expression", at=where)
        if not expression:
            raise fields.FieldError(f"{where}.cel.expression", "required")
        found.append(expression)
    return tuple(found)


def _constraints(
    obj: Mapping[str, Any], requests: set[str]
) -> tuple[tuple[tuple[str, ...], str], ...]:
    found = []
    for i, item in enumerate(fields.mappings(obj, "spec.devices.constraints")):
        at = f"spec.devices.constraints[{i}]"
        names = fields.sequence(item, "requests", at=at)
        for j, name in enumerate(names):
            if name not in requests:
                raise fields.FieldError(f"{at}.requests[{j}]", f"no request named {name!r}")
        attribute = fields.string(item, "matchAttribute", at=at)
        if not attribute:
            raise fields.FieldError(f"{at}.matchAttribute", "required")
        found.append((tuple(names), attribute))
    return tuple(found)


def _results(allocation: Mapping[str, Any]) -> tuple[AllocatedDevice, ...]:
    found = []
    at = "status.allocation.devices.results"
    for i, result in enumerate(fields.mappings(allocation, "devices.results", at=at[:17])):
        where = f"{at}[{i}]"
        parts = [fields.string(result, key, at=where) or "" for key in ("request", "driver")]
        parts += [fields.string(result, key, at=where) or "" for key in ("pool", "device")]
        for key, part in zip(("request", "driver", "pool", "device"), parts, strict=True):
            if not part:
                raise fields.FieldError(f"{where}.{key}", "required")
        admin = fields.value(result, "adminAccess", at=where) is True
        request, driver, pool, device = parts
        found.append(AllocatedDevice(request, driver, pool, device, admin))
    return tuple(found)


def _selector(parent: Mapping[str, Any], key: str, at: str) -> Terms | None:
    """A NodeSelector at ``parent[key]`` (None: absent)."""
    if fields.value(parent, key, at=at) is None:
        return None
    where = f"{at}.{key}.nodeSelectorTerms"
    terms = fields.mappings(parent, f"{key}.nodeSelectorTerms", at=at)
    return tuple(node_term(term, f"{where}[{i}]") for i, term in enumerate(terms))


def parse_device_class(obj: Mapping[str, Any]) -> DeviceClassRecord:
    with naming(ref_of(obj)):
        _, name = object_name(obj, namespaced=False)
        return DeviceClassRecord(name, _cel_selectors(fields.mapping(obj, "spec"), "spec"))


def parse_resource_slice(obj: Mapping[str, Any]) -> ResourceSliceRecord:
    with naming(ref_of(obj)):
        _, name = object_name(obj, namespaced=False)
        spec = fields.mapping(obj, "spec")
        driver = fields.string(spec, "driver", at="spec")
        if not driver:
            raise fields.FieldError("spec.driver", "required")
        pool = fields.string(spec, "pool.name", at="spec")
        if not pool:
            raise fields.FieldError("spec.pool.name", "required")
        generation = fields.integer(spec, "pool.generation", at="spec") or 0
        node_name = fields.string(spec, "nodeName", at="spec") or ""
        node_terms = _selector(spec, "nodeSelector", "spec")
        all_nodes = fields.value(spec, "allNodes", at="spec") is True
        if sum((bool(node_name), node_terms is not None, all_nodes)) != 1:
            why = "exactly one of nodeName, nodeSelector and allNodes is required"
            raise fields.FieldError("spec.nodeName", why)
        devices = tuple(
            _device(device, driver, f"spec.devices[{i}]")
            for i, device in enumerate(fields.mappings(spec, "devices", at="spec"))
        )
        return ResourceSliceRecord(
            name, driver, pool, generation, devices, node_name, node_terms, all_nodes
        )


def _device(device: Mapping[str, Any], driver: str, at: str) -> DeviceRecord:
    name = fields.string(device, "name", at=at)
    if not name:
        raise fields.FieldError(f"{at}.name", "required")
    attributes: dict[str, Scalar] = {}
    for key, value in fields.mapping(device, "attributes", at=at).items():
        where = f"{at}.attributes.{key}"
        if (
            not isinstance(value, Mapping)
            or len(value) != 1
            or next(iter(value)) not in ATTRIBUTE_TYPES
        ):
            raise fields.FieldError(where, f"must have one of {', '.join(ATTRIBUTE_TYPES)}")
        kind, found = next(iter(value.items()))
        wanted = {"int": int, "bool": bool, "string": str, "version": str}[kind]
        if type(found) is not wanted:
            raise fields.FieldError(f"{where}.{kind}", f"not {fields.shown(found)}")
        attributes[qualified(str(key), driver)] = cast(Scalar, found)
    capacity: dict[str, float] = {}
    for key, value in fields.mapping(device, "capacity", at=at).items():
        where = f"{at}.capacity.{key}.value"
        quantity = value.get("value") if isinstance(value, Mapping) else None
        try:
            capacity[qualified(str(key), driver)] = float(parse_quantity(quantity))
        except (ValueError, ArithmeticError, TypeError) as exc:
            raise fields.FieldError(where, f"{quantity!r} is not a quantity") from exc
    return DeviceRecord(name, attributes, capacity)


def qualified(name: str, driver: str) -> str:
    """An attribute's or capacity's name as domain/name: an unqualified one is of the
    driver's domain."""
    return name if "/" in name else f"{driver}/{name}"


def pod_claims(pod: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """(name in the pod, ResourceClaim name) of each of ``spec.resourceClaims``: its
    ``resourceClaimName``, or for one made from a template, the claim its
    ``status.resourceClaimStatuses`` names ('' until the resourceclaim controller has
    made it). FieldError when neither or both name a source."""
    made = {
        fields.string(status, "name", at=f"status.resourceClaimStatuses[{i}]") or "": (
            fields.string(status, "resourceClaimName", at=f"status.resourceClaimStatuses[{i}]")
            or ""
        )
        for i, status in enumerate(fields.mappings(pod, "status.resourceClaimStatuses"))
    }
    found = []
    for i, claim in enumerate(fields.mappings(pod, "spec.resourceClaims")):
        at = f"spec.resourceClaims[{i}]"
        name = fields.string(claim, "name", at=at)
        if not name:
            raise fields.FieldError(f"{at}.name", "required")
        direct = fields.string(claim, "resourceClaimName", at=at)
        template = fields.string(claim, "resourceClaimTemplateName", at=at)
        if bool(direct) == bool(template):
            why = "exactly one of resourceClaimName and resourceClaimTemplateName is required"
            raise fields.FieldError(f"{at}.resourceClaimName", why)
        found.append((name, direct or made.get(name, "")))
    return tuple(found)
