"""How every record is parsed: the object's reference and name, its timestamps, and a
refusal that names the object and the field (``naming``, ``validate_model``)."""

import functools
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from kbatch.api.errors import explain
from kbatch.cluster import fields
from kbatch.cluster.errors import ObjectError

M = TypeVar("M", bound=BaseModel)
# Every node has it (the kubelet sets it to the node's name): the topology level of one node.
HOSTNAME_LABEL = "kubernetes.io/hostname"

CLUSTER_SCOPED = frozenset(
    {"Node", "Queue", "PriorityClass", "Namespace", "PersistentVolume", "StorageClass", "CSINode"}
    | {"DeviceClass", "ResourceSlice"}
)


def ref_of(obj: Mapping[str, Any]) -> str:
    """'Kind namespace/name' (or 'Kind name' when cluster-scoped), whatever the object's
    shape: a malformed object still needs naming when it is refused."""
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    meta = meta if isinstance(meta, Mapping) else {}
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    kind = kind if isinstance(kind, str) and kind else "object"
    name = meta.get("name")
    name = name if isinstance(name, str) and name else "<unnamed>"
    namespace = meta.get("namespace")
    return (
        f"{kind} {namespace}/{name}"
        if isinstance(namespace, str) and namespace and kind not in CLUSTER_SCOPED
        else f"{kind} {name}"
    )


def timestamp(value: object, field: str = "metadata.creationTimestamp") -> float:
    """RFC 3339 to epoch seconds (0 when absent); FieldError naming ``field`` otherwise."""
    if not value:
        return 0.0
    if isinstance(value, datetime):
        return value.timestamp()
    if not isinstance(value, str):
        raise fields.FieldError(field, f"expected an RFC 3339 time, not {fields.shown(value)}")
    try:
        return _seconds_of(value)
    except (ValueError, OverflowError) as exc:
        raise fields.FieldError(
            field, f"expected an RFC 3339 time, not {fields.shown(value)}"
        ) from exc


@functools.lru_cache(maxsize=1024)
def _seconds_of(text: str) -> float:
    """An RFC 3339 text's epoch seconds, kept for the texts read last: the pods made in
    one second, the queues' creation read by every snapshot (a failure is not kept)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def object_name(obj: Mapping[str, Any], namespaced: bool) -> tuple[str, str]:
    """(namespace, name) of ``obj``: metadata must be a map, its name a non-empty string
    and its namespace a string (``default`` when absent; "" when cluster-scoped)."""
    fields.mapping(obj, "metadata")
    name = fields.string(obj, "metadata.name")
    if not name:
        raise fields.FieldError("metadata.name", "required")
    namespace = fields.string(obj, "metadata.namespace")
    return ((namespace or "default") if namespaced else ""), name


@contextmanager
def naming(ref: str) -> Iterator[None]:
    """Within it, a FieldError or a bad value becomes an ObjectError naming ``ref`` and the
    field (a ValueError's text reads 'field: why', as ``quantity.amounts`` words it)."""
    try:
        yield
    except ObjectError:
        raise
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from exc
    except ValueError as exc:
        field, why = split_field(str(exc))
        raise ObjectError(ref, field, why) from exc


_FIELD_PATH = re.compile(r"[A-Za-z_][\w./\-]*(\[\d+\])*(\.[^\s:]+)*")


def split_field(text: str) -> tuple[str, str]:
    """'spec.x[0].y: why' as ('spec.x[0].y', 'why'); ('', text) when no field leads it."""
    field, sep, why = text.partition(": ")
    if sep and _FIELD_PATH.fullmatch(field):
        return field, why
    return "", text


def validate_model(model: type[M], obj: Mapping[str, Any]) -> M:
    """Validate with a pydantic model; errors name the object and the field, in kbatch's
    words (``explain``)."""
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ObjectError(ref_of(obj), field_of(first["loc"]), explain(first)) from exc


def field_of(loc: Sequence[int | str]) -> str:
    """A pydantic error's location as a field path: ``spec.conditions[0].type``. A map's
    key that is refused (``..., key, '[key]'``) names the map."""
    path = ""
    parts = list(loc)
    for index, part in enumerate(parts):
        if part == "[key]" or parts[index + 1 : index + 2] == ["[key]"]:
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path or "(the object)"
