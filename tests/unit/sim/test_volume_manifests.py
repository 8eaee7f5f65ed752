"""PersistentVolumeClaims, PersistentVolumes and StorageClasses in the simulator's input:
modelled (not skipped), created in dependency order, and refused when bad, naming the
object and the field."""

import re
from typing import Any

import pytest

from kbatch.sim import manifests, simulate
from scenarios.objects import node, pod
from scenarios.volume_objects import claim, claim_spec, storage_class, volume


def test_the_three_kinds_are_modelled_and_made_before_what_names_them() -> None:
    docs = [pod("p"), claim("c"), volume("pv"), storage_class()]
    loaded = manifests.load_documents(docs)
    assert loaded.skipped == {}
    ordered = [m.ref for m in sorted(loaded.objects, key=lambda m: m.due)]
    assert ordered == [
        "StorageClass fast",
        "PersistentVolume pv",
        "PersistentVolumeClaim default/c",
        "Pod default/p",
    ]
    volume_with_namespace = volume("pv2")
    volume_with_namespace["metadata"]["namespace"] = "x"
    (made,) = manifests.load_documents([volume_with_namespace]).objects
    assert "namespace" not in made.obj["metadata"]  # (cluster-scoped)


def without(obj: dict[str, Any], *path: str) -> dict[str, Any]:
    target = obj
    for step in path[:-1]:
        target = target[step]
    del target[path[-1]]
    return obj


def ephemeral_pod(template_spec: dict[str, Any]) -> dict[str, Any]:
    made = pod("eph")
    template = {"spec": template_spec}
    made["spec"]["volumes"] = [{"name": "w", "ephemeral": {"volumeClaimTemplate": template}}]
    return made


BAD = [
    (without(claim("c"), "spec", "accessModes"), "PersistentVolumeClaim default/c",
     r"spec\.accessModes: required"),
    (without(claim("c"), "spec", "resources"), "PersistentVolumeClaim default/c",
     r"spec\.resources\.requests\.storage: required"),
    ({**claim("c"), "spec": {**claim_spec(), "volumeMode": "Disk"}},
     "PersistentVolumeClaim default/c", r"spec\.volumeMode: must be 'Filesystem' or 'Block'"),
    (without(volume("pv"), "spec", "capacity"), "PersistentVolume pv",
     r"spec\.capacity\.storage: required"),
    ({**storage_class(), "volumeBindingMode": "Later"}, "StorageClass fast",
     r"volumeBindingMode: must be 'Immediate' or 'WaitForFirstConsumer', not 'Later'"),
    (without(storage_class(), "provisioner"), "StorageClass fast", r"provisioner: required"),
    (ephemeral_pod({"resources": {"requests": {"storage": "1Gi"}}}), "Pod default/eph",
     r"spec\.volumes\[0\]\.ephemeral\.volumeClaimTemplate\.spec\.accessModes: required"),
]  # fmt: skip


@pytest.mark.parametrize(("doc", "ref", "message"), BAD)
def test_bad_volume_objects_are_refused_naming_object_and_field(
    doc: dict[str, Any], ref: str, message: str
) -> None:
    notes: list[str] = []
    result = simulate(documents=[node("n1"), pod("ok"), doc], warn=notes.append)
    (warning,) = result["warnings"]
    kind, _, where = ref.partition(" ")
    namespace, _, name = where.rpartition("/")
    assert (warning["kind"], warning["namespace"], warning["name"]) == (kind, namespace, name)
    assert re.match(message, warning["message"]), warning["message"]
    assert notes == [f"{ref} refused: {warning['message']}"]
    assert [p["node"] for p in result["pods"] if p["name"] == "ok"] == ["n1"]


def test_a_jobs_ephemeral_volume_template_is_refused_with_the_job() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"template": {"spec": {**ephemeral_pod({"resources": {}})["spec"]}}},
    }
    job["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    result = simulate(documents=[node("n1"), job], warn=lambda _: None)
    (warning,) = result["warnings"]
    assert warning["kind"] == "Job"
    assert warning["message"].startswith(
        "spec.template.spec.volumes[0].ephemeral.volumeClaimTemplate.spec.accessModes"
    )
