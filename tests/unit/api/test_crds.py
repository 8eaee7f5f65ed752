"""The CRD manifests in crds/: generated from the models, structural, and in step with them."""

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
import yaml
from pydantic import BaseModel, Field, ValidationError

from kbatch.api import GROUP, crdgen
from kbatch.api.podgroup import PodGroup
from kbatch.api.quantity import QUANTITY_PATTERN
from kbatch.api.queue import Queue

CRDS = Path(__file__).resolve().parents[3] / "crds"
Schema = dict[str, Any]


def committed() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in CRDS.glob(f"{GROUP}_*.yaml")}


def crd(plural: str) -> Schema:
    loaded = yaml.safe_load((CRDS / f"{GROUP}_{plural}.yaml").read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def schema(plural: str) -> Schema:
    version = crd(plural)["spec"]["versions"][0]
    root = version["schema"]["openAPIV3Schema"]
    assert isinstance(root, dict)
    return root


def node(root: Schema, path: str) -> Schema:
    """``spec.minResources{}``: properties by name, ``[]`` array items, ``{}`` map values."""
    current = root
    for step in re.findall(r"[^.\[\]{}]+|\[\]|\{\}", path):
        if step == "[]":
            current = current["items"]
        elif step == "{}":
            current = current["additionalProperties"]
        else:
            current = current["properties"][step]
    return current


def walk(schema_node: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    yield path, schema_node
    for name, sub in schema_node.get("properties", {}).items():
        yield from walk(sub, f"{path}.{name}")
    if "items" in schema_node:
        yield from walk(schema_node["items"], f"{path}[]")
    if isinstance(schema_node.get("additionalProperties"), dict):
        yield from walk(schema_node["additionalProperties"], f"{path}{{}}")


# --- generated, not hand-edited ----------------------------------------------


def test_committed_manifests_equal_the_generated_ones() -> None:
    assert committed() == crdgen.render_all(), (
        "crds/ is stale: run `python -m kbatch.api.crdgen --write crds/`"
    )


def test_check_mode_reports_a_stale_directory(tmp_path: Path) -> None:
    assert crdgen.main(["--write", str(tmp_path)]) == 0
    assert crdgen.main(["--check", str(tmp_path)]) == 0
    (tmp_path / f"{GROUP}_queues.yaml").write_text("stale\n", encoding="utf-8")
    assert crdgen.main(["--check", str(tmp_path)]) == 1


# --- structural --------------------------------------------------------------

ALLOWED_KEYS = {
    "type", "description", "properties", "required", "items", "additionalProperties",
    "enum", "default", "minimum", "maximum", "minLength", "maxLength", "pattern", "format",
    "x-kubernetes-int-or-string",
}  # fmt: skip


@pytest.mark.parametrize("plural", ["podgroups", "queues"])
def test_schema_is_structural(plural: str) -> None:
    for path, schema_node in walk(schema(plural)):
        assert set(schema_node) <= ALLOWED_KEYS, f"{path}: {set(schema_node) - ALLOWED_KEYS}"
        if schema_node.get("x-kubernetes-int-or-string"):
            assert "type" not in schema_node, path
        else:
            assert schema_node.get("type") in {
                "object", "array", "string", "integer", "number", "boolean",
            }  # fmt: skip
        assert not ("properties" in schema_node and "additionalProperties" in schema_node), path
        assert not isinstance(schema_node.get("additionalProperties"), bool), path
        if "default" in schema_node:
            assert schema_errors(schema_node, schema_node["default"]) == [], path


@pytest.mark.parametrize("plural", ["podgroups", "queues"])
def test_metadata_is_left_to_the_api_server(plural: str) -> None:
    assert node(schema(plural), "metadata") == {"type": "object"}
    assert node(schema(plural), "apiVersion") == {"type": "string"}


def test_the_generator_refuses_what_kubernetes_would_reject() -> None:
    class Open(BaseModel):
        model_config = {"extra": "allow"}

    class Either(BaseModel):
        value: int | str

    for model in (Open, Either):
        with pytest.raises(crdgen.UnstructuralSchemaError):
            crdgen.openapi_schema(model)


def test_the_generator_maps_constraints_to_their_openapi_v3_form() -> None:
    class Inner(BaseModel):
        """An inner object."""

        mode: Literal["Fixed"] = "Fixed"

    class Outer(BaseModel):
        share: Annotated[float, Field(gt=0)]
        inner: Inner | None = None
        many: tuple[Inner, ...] = ()

    root = crdgen.openapi_schema(Outer)
    assert node(root, "share") == {"type": "number", "minimum": 0, "exclusiveMinimum": True}
    assert node(root, "inner") == {
        "type": "object",
        "description": "An inner object.",
        "properties": {"mode": {"type": "string", "enum": ["Fixed"], "default": "Fixed"}},
    }
    assert node(root, "many[]") == node(root, "inner")


# --- what the schema says ------------------------------------------------------

QUANTITY = {"x-kubernetes-int-or-string": True, "pattern": QUANTITY_PATTERN}
PHASES = ["Pending", "Inqueue", "Running", "Unknown", "Completed"]


@pytest.mark.parametrize(
    ("plural", "path", "expected"),
    [
        ("podgroups", "spec.minMember", {"type": "integer", "minimum": 1, "default": 1}),
        ("podgroups", "spec.queue", {"type": "string", "default": "default", "minLength": 1}),
        ("podgroups", "spec.priorityClassName", {"type": "string"}),
        ("podgroups", "spec.minResources{}", QUANTITY),
        ("podgroups", "status.phase", {"type": "string", "enum": PHASES, "default": "Pending"}),
        (
            "podgroups",
            "status.conditions[].type",
            {
                "enum": [
                    "Unschedulable",
                    "Scheduled",
                    "kbatch.io/Borrowing",
                    "kbatch.io/EstimatedStart",
                ]
            },
        ),
        ("podgroups", "status.conditions[].status", {"enum": ["True", "False", "Unknown"]}),
        ("podgroups", "status.conditions[]", {"required": ["type", "status"]}),
        ("podgroups", "status.conditions[].transitionID", {"type": "string"}),
        ("podgroups", "status.conditions[].lastTransitionTime", {"type": "string"}),
        ("podgroups", "status.running", {"type": "integer", "minimum": 0}),
        ("queues", "spec.weight", {"type": "integer", "minimum": 1, "default": 1}),
        ("queues", "spec.reclaimable", {"type": "boolean", "default": True}),
        ("queues", "spec.state", {"type": "string", "enum": ["Open", "Closed"], "default": "Open"}),
        ("queues", "spec.capability{}", QUANTITY),
        ("queues", "spec.parent", {"type": "string", "minLength": 1}),
        ("queues", "spec.guarantee.resource{}", QUANTITY),
        ("queues", "spec.deserved{}", QUANTITY),
        ("queues", "spec.borrowingLimit{}", QUANTITY),
        ("queues", "spec.lendingLimit{}", QUANTITY),
        ("queues", "status.deserved{}", QUANTITY),
        ("queues", "status.allocated{}", QUANTITY),
        ("queues", "status.request{}", QUANTITY),
        ("queues", "status.inqueue", {"type": "integer", "minimum": 0}),
        ("queues", "status.flow", {"type": "number", "minimum": 0}),
        ("queues", "status.flowUpdated", {"type": "string", "format": "date-time"}),
    ],
)
def test_schema_node(plural: str, path: str, expected: Schema) -> None:
    found = node(schema(plural), path)
    assert {key: found.get(key) for key in expected} == expected


@pytest.mark.parametrize(("model", "plural"), [(PodGroup, "podgroups"), (Queue, "queues")])
def test_schema_defaults_are_the_model_defaults(model: type[BaseModel], plural: str) -> None:
    empty = model.model_validate({"metadata": {"name": "x"}, "spec": {}, "status": {}})
    dumped = empty.model_dump(mode="json", by_alias=True)
    for part in ("spec", "status"):
        for name, prop in node(schema(plural), part)["properties"].items():
            if "default" in prop:
                assert dumped[part][name] == prop["default"], f"{part}.{name}"


# --- the CRD around the schema -------------------------------------------------


@pytest.mark.parametrize(
    ("plural", "kind", "short", "scope", "columns"),
    [
        ("podgroups", "PodGroup", "pg", "Namespaced", ["Phase", "MinMember", "Running", "Queue", "Age"]),
        ("queues", "Queue", "q", "Cluster", ["Weight", "State", "Age"]),
    ],
)  # fmt: skip
def test_crd(plural: str, kind: str, short: str, scope: str, columns: list[str]) -> None:
    manifest = crd(plural)
    assert manifest["apiVersion"] == "apiextensions.k8s.io/v1"
    assert manifest["metadata"]["name"] == f"{plural}.scheduling.incubator.k8s.io"
    annotations = manifest["metadata"]["annotations"]
    assert annotations["api-approved.kubernetes.io"] == "unapproved, kube-batch compatible API"
    spec = manifest["spec"]
    assert spec["group"] == "scheduling.incubator.k8s.io"
    assert spec["scope"] == scope
    assert spec["names"] == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
        "shortNames": [short],
    }
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    assert [column["name"] for column in version["additionalPrinterColumns"]] == columns


@pytest.mark.parametrize("plural", ["podgroups", "queues"])
def test_printer_columns_point_at_fields_of_their_type(plural: str) -> None:
    [version] = crd(plural)["spec"]["versions"]
    for column in version["additionalPrinterColumns"]:
        path = column["jsonPath"].removeprefix(".")
        if path == "metadata.creationTimestamp":
            assert column["type"] == "date"
        else:
            assert node(schema(plural), path)["type"] == column["type"], path


# --- the schema and the model agree on manifests ---------------------------------

JSON_TYPES: dict[str, type | tuple[type, ...]] = {
    "object": dict, "array": list, "string": str, "integer": int, "boolean": bool,
}  # fmt: skip


def schema_errors(schema_node: Schema, value: Any, path: str = "") -> list[str]:
    """A small validator for the structural subset the generator emits (no jsonschema dependency).

    Unknown fields count as errors: the API server prunes them, and kubectl's
    strict field validation (the default since 1.27) rejects them.
    """
    if schema_node.get("x-kubernetes-int-or-string"):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            return [f"{path}: not an int or a string"]
    elif not isinstance(value, JSON_TYPES[schema_node["type"]]) or (
        isinstance(value, bool) and schema_node["type"] != "boolean"
    ):
        return [f"{path}: not {schema_node['type']}"]
    errors = []
    if "enum" in schema_node and value not in schema_node["enum"]:
        errors.append(f"{path}: not one of {schema_node['enum']}")
    if "minimum" in schema_node and isinstance(value, int) and value < schema_node["minimum"]:
        errors.append(f"{path}: below {schema_node['minimum']}")
    if isinstance(value, str):
        if len(value) < schema_node.get("minLength", 0):
            errors.append(f"{path}: too short")
        if "pattern" in schema_node and not re.search(schema_node["pattern"], value):
            errors.append(f"{path}: does not match the pattern")
    if isinstance(value, list):
        for index, item in enumerate(value):
            errors += schema_errors(schema_node["items"], item, f"{path}[{index}]")
    if isinstance(value, dict) and path != ".metadata":  # the API server checks metadata
        properties = schema_node.get("properties", {})
        errors += [
            f"{path}.{name}: required"
            for name in schema_node.get("required", [])
            if name not in value
        ]
        for name, item in value.items():
            sub = properties.get(name, schema_node.get("additionalProperties"))
            if sub is None:
                errors.append(f"{path}.{name}: unknown field")
            else:
                errors += schema_errors(sub, item, f"{path}.{name}")
    return errors  # fmt: skip


def pg(**spec: Any) -> Schema:
    return {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "qj-1"},
        "spec": spec,
    }


def q(**spec: Any) -> Schema:
    return {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "q1"},
        "spec": spec,
    }


VOLCANO_STYLE = pg(
    minMember=3,
    queue="q1",
    priorityClassName="high",
    minResources={"cpu": "1500m", "memory": "3Gi", "nvidia.com/gpu": 2},
)

AGREEMENT = [
    # (name, manifest, the schema accepts it, the model accepts it)
    ("kube-batch podgroup", pg(minMember=6), True, True),
    ("volcano-style podgroup", VOLCANO_STYLE, True, True),
    ("empty spec", pg(), True, True),
    ("minMember 0", pg(minMember=0), False, False),
    ("minMember as a string", pg(minMember="6"), False, False),
    ("empty queue name", pg(queue=""), False, False),
    ("malformed quantity", pg(minResources={"cpu": "abc"}), False, False),
    ("quantity as a bool", pg(minResources={"cpu": True}), False, False),
    ("unknown spec field", pg(minMember=2, minTasks={"a": 1}), False, False),
    ("roles (Volcano's minTaskMember)", pg(minMember=2, minTaskMember={"ps": 1}), True, True),
    ("a negative role minimum", pg(minTaskMember={"ps": -1}), False, False),
    ("a role minimum as a string", pg(minTaskMember={"ps": "1"}), False, False),
    ("bad phase", {**pg(), "status": {"phase": "Done"}}, False, False),
    ("kube-batch queue", q(weight=1), True, True),
    ("volcano-style queue", q(weight=2, capability={"cpu": 8}, reclaimable=False), True, True),
    ("weight 0", q(weight=0), False, False),
    (
        "volcano hierarchical queue",
        q(parent="root", deserved={"cpu": 64, "memory": "128Gi"}, guarantee={"resource": {}}),
        True,
        True,
    ),
    ("a guarantee without its resource key", q(guarantee={"cpu": 1}), False, False),
    # One Queue's own rules the schema cannot say: the webhook (the model) refuses them.
    ("its own parent", q(parent="q1"), True, False),
    (
        "guarantee above capability",
        q(capability={"cpu": 2}, guarantee={"resource": {"cpu": 3}}),
        True,
        False,
    ),
    ("closed", q(state="Closed"), True, True),
    ("paused", q(state="Paused"), False, False),
    # Kubernetes' own quantity pattern allows a sign; only the model (and so the
    # validating webhook) refuses negative amounts.
    ("negative quantity", pg(minResources={"cpu": "-1"}), True, False),
]


@pytest.mark.parametrize(
    ("manifest", "schema_accepts", "model_accepts"),
    [case[1:] for case in AGREEMENT],
    ids=[case[0] for case in AGREEMENT],
)
def test_schema_and_model_agree(
    manifest: Schema, schema_accepts: bool, model_accepts: bool
) -> None:
    model: type[BaseModel] = PodGroup if manifest["kind"] == "PodGroup" else Queue
    errors = schema_errors(schema(f"{manifest['kind'].lower()}s"), manifest)
    assert (errors == []) == schema_accepts, errors
    try:
        model.model_validate(manifest)
    except ValidationError:
        accepted = False
    else:
        accepted = True
    assert accepted == model_accepts
