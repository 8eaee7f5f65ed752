"""What kbatch reads of PersistentVolumeClaims, PersistentVolumes, StorageClasses and
CSINodes: where a pod's volumes let it go, which claims its bind must have bound or
provisioned (``kbatch.cluster.volumes``), and how many volumes of each CSI driver a node
may attach (``kbatch.cluster.volume_use``). A bad object raises ObjectError naming it and
the field.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kbatch.cluster import fields
from kbatch.cluster.placement_spec import node_term, requirements
from kbatch.cluster.quantity import amounts
from kbatch.cluster.record_parsing import naming, object_name, ref_of
from kbatch.operators.scheduler.core.framework.podspec import (
    LabelSelector,
    NodeSelectorTerm,
    Operator,
    Requirement,
)
from kbatch.operators.scheduler.core.framework.volume_needs import Terms

# Set on a claim bound on first use once its pod has a node: the provisioner makes its
# volume where that node can reach it (kube-scheduler's VolumeBinding writes it).
SELECTED_NODE = "volume.kubernetes.io/selected-node"
# A PV that the binding of a pod bound to its claim (as kube-scheduler marks it).
BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"
# A class of volumes made by hand (local disks): none is provisioned for a claim.
NO_PROVISIONER = "kubernetes.io/no-provisioner"
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
BINDING_MODES = ("Immediate", WAIT_FOR_FIRST_CONSUMER)
VOLUME_MODES = ("Filesystem", "Block")
# A claim of this access mode may be used by one pod at a time, cluster-wide.
READ_WRITE_ONCE_POD = "ReadWriteOncePod"


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    """A PersistentVolumeClaim."""

    namespace: str
    name: str
    uid: str
    volume_name: str  # spec.volumeName ('': not bound)
    storage_class: str  # spec.storageClassName ('': none, when not set either)
    access_modes: frozenset[str]
    storage: float  # spec.resources.requests.storage, in bytes
    volume_mode: str
    selector: LabelSelector | None  # spec.selector (None: any volume)
    selected_node: str  # the SELECTED_NODE annotation ('': none)
    deleting: bool


@dataclass(frozen=True, slots=True)
class VolumeRecord:
    """A PersistentVolume."""

    name: str
    storage_class: str
    access_modes: frozenset[str]
    capacity: float  # spec.capacity.storage, in bytes
    volume_mode: str
    node_terms: Terms | None  # spec.nodeAffinity.required (None: any node)
    labels: dict[str, str]
    claim: tuple[str, str, str] | None  # spec.claimRef as (namespace, name, uid)
    phase: str  # status.phase
    deleting: bool
    resource_version: str  # (the bind's write of its claimRef is made against it)
    csi_driver: str = ""  # spec.csi.driver ('': not a CSI volume)
    csi_handle: str = ""  # spec.csi.volumeHandle


@dataclass(frozen=True, slots=True)
class StorageClassRecord:
    name: str
    provisioner: str
    waits_for_consumer: bool  # volumeBindingMode WaitForFirstConsumer
    topologies: Terms | None  # allowedTopologies (None: anywhere)
    default: bool  # annotated as the default class


@dataclass(frozen=True, slots=True)
class CSINodeRecord:
    """A CSINode (named as its node): how many volumes of each CSI driver the node may
    attach at most (``spec.drivers[].allocatable.count``; a driver without one: any)."""

    name: str
    limits: dict[str, int]


def parse_claim(obj: Mapping[str, Any]) -> ClaimRecord:
    with naming(ref_of(obj)):
        namespace, name = object_name(obj, namespaced=True)
        spec = fields.mapping(obj, "spec")
        selector = None
        if spec.get("selector") is not None:
            raw = fields.mapping(spec, "selector", at="spec")
            selector = LabelSelector(
                tuple(sorted(fields.string_map(raw, "matchLabels", at="spec.selector").items())),
                requirements(raw, "matchExpressions", "spec.selector"),
            )
        requests = fields.mapping(spec, "resources.requests", at="spec")
        annotations = fields.string_map(obj, "metadata.annotations")
        return ClaimRecord(
            namespace=namespace,
            name=name,
            uid=fields.string(obj, "metadata.uid") or "",
            volume_name=fields.string(spec, "volumeName", at="spec") or "",
            storage_class=fields.string(spec, "storageClassName", at="spec") or "",
            access_modes=_access_modes(spec),
            storage=amounts(requests, "spec.resources.requests").get("storage", 0.0),
            volume_mode=_one_of(spec, "volumeMode", VOLUME_MODES, "spec"),
            selector=selector,
            selected_node=annotations.get(SELECTED_NODE, ""),
            deleting=bool(fields.value(obj, "metadata.deletionTimestamp")),
        )


def parse_volume(obj: Mapping[str, Any]) -> VolumeRecord:
    with naming(ref_of(obj)):
        _, name = object_name(obj, namespaced=False)
        spec = fields.mapping(obj, "spec")
        claim = None
        if spec.get("claimRef") is not None:
            ref = fields.mapping(spec, "claimRef", at="spec")
            claim = (
                fields.string(ref, "namespace", at="spec.claimRef") or "",
                fields.string(ref, "name", at="spec.claimRef") or "",
                fields.string(ref, "uid", at="spec.claimRef") or "",
            )
        required = "nodeAffinity.required"
        node_terms = None
        if fields.value(spec, required, at="spec") is not None:
            where = f"spec.{required}.nodeSelectorTerms"
            terms = fields.mappings(spec, f"{required}.nodeSelectorTerms", at="spec")
            node_terms = tuple(node_term(term, f"{where}[{i}]") for i, term in enumerate(terms))
        return VolumeRecord(
            name=name,
            storage_class=fields.string(spec, "storageClassName", at="spec") or "",
            access_modes=_access_modes(spec),
            capacity=amounts(fields.mapping(spec, "capacity", at="spec"), "spec.capacity").get(
                "storage", 0.0
            ),
            volume_mode=_one_of(spec, "volumeMode", VOLUME_MODES, "spec"),
            node_terms=node_terms,
            labels=fields.string_map(obj, "metadata.labels"),
            claim=claim,
            phase=fields.string(obj, "status.phase") or "",
            deleting=bool(fields.value(obj, "metadata.deletionTimestamp")),
            resource_version=fields.string(obj, "metadata.resourceVersion") or "",
            **_csi_source(spec),
        )


def _csi_source(spec: Mapping[str, Any]) -> dict[str, str]:
    """A PV's CSI driver and volume handle (none: not a CSI volume)."""
    if spec.get("csi") is None:
        return {}
    driver = fields.string(spec, "csi.driver", at="spec")
    if not driver:
        raise fields.FieldError("spec.csi.driver", "required")
    handle = fields.string(spec, "csi.volumeHandle", at="spec")
    if not handle:
        raise fields.FieldError("spec.csi.volumeHandle", "required")
    return {"csi_driver": driver, "csi_handle": handle}


def parse_storage_class(obj: Mapping[str, Any]) -> StorageClassRecord:
    with naming(ref_of(obj)):
        _, name = object_name(obj, namespaced=False)
        provisioner = fields.string(obj, "provisioner")
        if not provisioner:
            raise fields.FieldError("provisioner", "required")
        mode = _one_of(obj, "volumeBindingMode", BINDING_MODES)
        topologies = None
        if obj.get("allowedTopologies") is not None:
            topologies = tuple(
                _topology_term(term, f"allowedTopologies[{i}]")
                for i, term in enumerate(fields.mappings(obj, "allowedTopologies"))
            )
        annotations = fields.string_map(obj, "metadata.annotations")
        return StorageClassRecord(
            name=name,
            provisioner=provisioner,
            waits_for_consumer=mode == WAIT_FOR_FIRST_CONSUMER,
            topologies=topologies or None,
            default=annotations.get(DEFAULT_CLASS) == "true",
        )


def parse_csi_node(obj: Mapping[str, Any]) -> CSINodeRecord:
    with naming(ref_of(obj)):
        _, name = object_name(obj, namespaced=False)
        limits: dict[str, int] = {}
        for i, driver in enumerate(fields.mappings(obj, "spec.drivers")):
            at = f"spec.drivers[{i}]"
            driver_name = fields.string(driver, "name", at=at)
            if not driver_name:
                raise fields.FieldError(f"{at}.name", "required")
            count = fields.integer(driver, "allocatable.count", at=at)
            if count is not None and count < 0:
                raise fields.FieldError(f"{at}.allocatable.count", f"must be >= 0, not {count}")
            if count is not None:
                limits[driver_name] = count
        return CSINodeRecord(name, limits)


def _topology_term(term: Mapping[str, Any], at: str) -> NodeSelectorTerm:
    """A TopologySelectorTerm: label keys, each with the values a node may have."""
    found = []
    for i, item in enumerate(fields.mappings(term, "matchLabelExpressions", at=at)):
        where = f"{at}.matchLabelExpressions[{i}]"
        key = fields.string(item, "key", at=where)
        if not key:
            raise fields.FieldError(f"{where}.key", "required")
        values = tuple(str(v) for v in fields.sequence(item, "values", at=where))
        found.append(Requirement(key, Operator.IN, values))
    return NodeSelectorTerm(tuple(found))


def _access_modes(spec: Mapping[str, Any]) -> frozenset[str]:
    modes = fields.sequence(spec, "accessModes", at="spec")
    for i, mode in enumerate(modes):
        if not isinstance(mode, str):
            raise fields.FieldError(f"spec.accessModes[{i}]", f"not {fields.shown(mode)}")
    return frozenset(modes)


def _one_of(parent: Mapping[str, Any], key: str, allowed: tuple[str, ...], at: str = "") -> str:
    """``parent[key]``, one of ``allowed`` (the first when not set)."""
    found = fields.string(parent, key, at=at) or allowed[0]
    if found not in allowed:
        why = f"must be {' or '.join(repr(a) for a in allowed)}, not {found!r}"
        raise fields.FieldError(f"{at}.{key}" if at else key, why)
    return found
