"""The CRD manifests in ``crds/``, generated from the API models so they cannot drift.

The pydantic JSON schema of each model is rewritten into a *structural*
OpenAPI v3 schema, the only kind Kubernetes accepts: every ``$ref`` is
inlined, ``X | None`` becomes plain ``X`` (the API server prunes nulls), a
single-value ``Literal`` becomes a one-value ``enum``, a ``Quantity`` becomes
``x-kubernetes-int-or-string`` with the Kubernetes quantity pattern, and
anything the rewrite does not understand (a free ``anyOf``, ``oneOf``, an
open ``extra="allow"`` object) is an error rather than a schema the API
server would reject.

    python -m kbatch.api.crdgen --write crds/    # regenerate
    python -m kbatch.api.crdgen --check crds/    # exit 1 if crds/ is stale
"""

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, TypeAdapter

from kbatch.api import GROUP, VERSION
from kbatch.api.podgroup import PodGroup
from kbatch.api.quantity import QUANTITY_PATTERN, Quantity
from kbatch.api.queue import Queue

Schema = dict[str, Any]

APPROVAL_ANNOTATION = "api-approved.kubernetes.io"
APPROVAL = "unapproved, kube-batch compatible API"
HEADER = (
    "# Generated from kbatch/api by `python -m kbatch.api.crdgen --write crds/`. Do not edit.\n"
)

# Keys of pydantic's JSON schema that mean the same in a structural OpenAPI v3 schema.
_KEPT = frozenset(
    {
        "type",
        "description",
        "enum",
        "format",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "required",
    }
)
_DROPPED = frozenset({"title"})
# The API server owns these; in a CRD schema they may only be plainly typed.
_ROOT_FIELDS: Schema = {
    "apiVersion": {"type": "string"},
    "kind": {"type": "string"},
    "metadata": {"type": "object"},
}


class UnstructuralSchemaError(ValueError):
    """A model uses a construct that has no structural OpenAPI v3 form."""


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    name: str
    type: str
    json_path: str
    description: str


@dataclass(frozen=True, slots=True)
class Resource:
    """What a CRD says beyond its model's schema."""

    model: type[BaseModel]
    plural: str
    short_name: str
    namespaced: bool
    columns: tuple[PrinterColumn, ...]

    @property
    def kind(self) -> str:
        kind = self.model.model_fields["kind"].default
        assert isinstance(kind, str), f"{self.model.__name__}.kind needs a Literal default"
        return kind

    @property
    def file_name(self) -> str:
        return f"{GROUP}_{self.plural}.yaml"


_AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp", "Time since creation")

RESOURCES = (
    Resource(
        PodGroup,
        plural="podgroups",
        short_name="pg",
        namespaced=True,
        columns=(
            PrinterColumn("Phase", "string", ".status.phase", "Where the gang is"),
            PrinterColumn("MinMember", "integer", ".spec.minMember", "Pods that must run together"),
            PrinterColumn("Running", "integer", ".status.running", "Pods running"),
            PrinterColumn("Queue", "string", ".spec.queue", "The queue it waits in"),
            _AGE,
        ),
    ),
    Resource(
        Queue,
        plural="queues",
        short_name="q",
        namespaced=False,
        columns=(
            PrinterColumn("Weight", "integer", ".spec.weight", "Share of the cluster"),
            PrinterColumn("State", "string", ".spec.state", "Open or Closed"),
            _AGE,
        ),
    ),
)


def openapi_schema(model: type[BaseModel]) -> Schema:
    """The structural OpenAPI v3 schema of a top-level API object."""
    full = model.model_json_schema(by_alias=True, mode="validation")
    defs: Mapping[str, Any] = full.pop("$defs", {})
    fields = {name: sub for name, sub in full.pop("properties").items() if name not in _ROOT_FIELDS}
    full.pop("required", None)  # metadata: the API server's business
    root = _structural({**full, "properties": fields}, defs, model.__name__)
    root["properties"] = dict(sorted({**root["properties"], **_ROOT_FIELDS}.items()))
    return root


def custom_resource_definition(resource: Resource) -> Schema:
    """The apiextensions.k8s.io/v1 CustomResourceDefinition of one API object."""
    kind = resource.kind
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{resource.plural}.{GROUP}",
            "annotations": {APPROVAL_ANNOTATION: APPROVAL},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": resource.plural,
                "singular": kind.lower(),
                "shortNames": [resource.short_name],
            },
            "scope": "Namespaced" if resource.namespaced else "Cluster",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {
                            "name": column.name,
                            "type": column.type,
                            "jsonPath": column.json_path,
                            "description": column.description,
                        }
                        for column in resource.columns
                    ],
                    "schema": {"openAPIV3Schema": openapi_schema(resource.model)},
                }
            ],
        },
    }


def render(resource: Resource) -> str:
    body = yaml.safe_dump(custom_resource_definition(resource), sort_keys=False, width=100)
    return HEADER + body


def render_all() -> dict[str, str]:
    """File name in ``crds/`` -> the YAML text it must hold."""
    return {resource.file_name: render(resource) for resource in RESOURCES}


def _structural(node: Mapping[str, Any], defs: Mapping[str, Any], where: str) -> Schema:
    node = _resolved(node, defs, where)
    if node.get("x-kubernetes-int-or-string"):
        return _quantity(node, where)
    out: Schema = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "properties":
            out[key] = {
                name: _structural(sub, defs, f"{where}.{name}")
                for name, sub in sorted(value.items())
            }
        elif key == "items":
            out[key] = _structural(value, defs, f"{where}[]")
        elif key == "additionalProperties":
            if value is True:
                raise UnstructuralSchemaError(f"{where}: an open object (extra='allow')")
            if value is not False:  # False (extra="forbid"): the API server prunes unknown fields
                out[key] = _structural(value, defs, f"{where}{{}}")
        elif key == "const":
            out["enum"] = [value]
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):  # a number in JSON Schema 2020-12
            out[key.replace("exclusiveM", "m")] = value
            out[key] = True
        elif key == "default":  # None and empty values mean "absent" in the API: no default
            if value is not None and value not in ([], {}, ""):
                out[key] = value
        elif key in _KEPT:
            out[key] = value
        else:
            raise UnstructuralSchemaError(f"{where}: {key!r} has no structural form")
    if "type" not in out:
        raise UnstructuralSchemaError(f"{where}: no type")
    return dict(sorted(out.items()))


def _resolved(node: Mapping[str, Any], defs: Mapping[str, Any], where: str) -> Schema:
    """Inline a ``$ref`` and collapse ``X | None`` to ``X``; the node's own keys win."""
    out = dict(node)
    if "$ref" in out:
        target = defs[out.pop("$ref").removeprefix("#/$defs/")]
        out = {**_resolved(target, defs, where), **out}
    if "anyOf" in out:
        options: Sequence[Mapping[str, Any]] = out.pop("anyOf")
        present = [option for option in options if option.get("type") != "null"]
        if len(present) != 1 or len(options) != 2:
            raise UnstructuralSchemaError(f"{where}: anyOf other than 'X | None'")
        out = {**_resolved(present[0], defs, where), **out}
    return out


def _quantity(node: Mapping[str, Any], where: str) -> Schema:
    own = {key: value for key, value in node.items() if key not in ("description", "title")}
    if own != TypeAdapter(Quantity).json_schema():
        raise UnstructuralSchemaError(f"{where}: int-or-string other than a Quantity")
    out: Schema = {"pattern": QUANTITY_PATTERN, "x-kubernetes-int-or-string": True}
    if "description" in node:
        out["description"] = node["description"]
    return dict(sorted(out.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kbatch.api.crdgen",
        description="Print, write or check the CRD manifests generated from kbatch.api.",
    )
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", metavar="DIR", type=Path, help="write the manifests into DIR")
    action.add_argument("--check", metavar="DIR", type=Path, help="exit 1 if DIR is stale")
    args = parser.parse_args(argv)
    if args.write is not None:
        return _write(args.write)
    if args.check is not None:
        return _check(args.check)
    sys.stdout.write("---\n".join(render_all().values()))
    return 0


def _write(folder: Path) -> int:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in render_all().items():
        (folder / name).write_text(text, encoding="utf-8")
        print(folder / name)
    return 0


def _check(folder: Path) -> int:
    stale = [
        name
        for name, text in render_all().items()
        if not (folder / name).is_file() or (folder / name).read_text(encoding="utf-8") != text
    ]
    for name in stale:
        print(
            f"{folder / name} is stale: python -m kbatch.api.crdgen --write {folder}",
            file=sys.stderr,
        )
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
