"""What the simulated API server refuses of PersistentVolumeClaims, PersistentVolumes,
StorageClasses, CSINodes and a pod's generic ephemeral volumes (``kbatch.sim.validation``
asks): the cluster layer's parsers (``kbatch.cluster.volume_records``, which name the
field), plus what the API server requires and kbatch does not read: a claim's access
modes and requested size, a PV's access modes and capacity, a CSINode's drivers' node
IDs. A pod's ephemeral volume is refused
with the claim it would make, the field named under the pod's template."""

from collections.abc import Mapping
from typing import Any

from kbatch.cluster import fields, records, volume_records
from kbatch.cluster.errors import ObjectError
from kbatch.sim import volume_objects

Object = Mapping[str, Any]


def claim(obj: Object) -> None:
    volume_records.parse_claim(obj)
    _required(obj, "spec.accessModes", "spec.resources.requests.storage")


def volume(obj: Object) -> None:
    volume_records.parse_volume(obj)
    _required(obj, "spec.accessModes", "spec.capacity.storage")


def storage_class(obj: Object) -> None:
    volume_records.parse_storage_class(obj)


def csi_node(obj: Object) -> None:
    volume_records.parse_csi_node(obj)
    if fields.value(obj, "spec.drivers") is None:
        raise ObjectError(records.ref_of(obj), "spec.drivers", "required")
    for i, driver in enumerate(fields.mappings(obj, "spec.drivers")):
        if not fields.string(driver, "nodeID", at=f"spec.drivers[{i}]"):
            raise ObjectError(records.ref_of(obj), f"spec.drivers[{i}].nodeID", "required")


def ephemeral_claims(pod: Object) -> None:
    """Each claim the pod's ephemeral volumes make is one the API server accepts."""
    try:
        claims = volume_objects.ephemeral_claims(pod)
    except fields.FieldError as exc:
        raise ObjectError(records.ref_of(pod), exc.field, exc.why) from exc
    for at, made in claims:
        try:
            claim(made)
        except ObjectError as exc:
            detail = f"{exc.field}: {exc.why}" if exc.field else exc.why
            raise ObjectError(records.ref_of(pod), "", f"{at}.{detail}") from exc


def _required(obj: Object, *paths: str) -> None:
    for path in paths:
        if not fields.value(obj, path):
            raise ObjectError(records.ref_of(obj), path, "required")
