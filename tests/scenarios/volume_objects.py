"""Small builders of PersistentVolumeClaims, PersistentVolumes, StorageClasses and of
nodes and pods that go with them, for simulator tests."""

from typing import Any

from scenarios.objects import Obj, node

ZONE = "topology.kubernetes.io/zone"
NO_PROVISIONER = "kubernetes.io/no-provisioner"


def zoned(name: str, zone: str, cpu: str = "4") -> Obj:
    made = node(name, cpu=cpu)
    made["metadata"]["labels"] = {ZONE: zone, "kubernetes.io/hostname": name}
    return made


def storage_class(
    name: str = "fast",
    provisioner: str = "csi.example.com",
    mode: str = "WaitForFirstConsumer",
    default: bool = False,
) -> Obj:
    made: Obj = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if default:
        made["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return made


def claim_spec(storage_class: str | None = "fast", size: str = "1Gi") -> Obj:
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    return spec


def claim(name: str, storage_class: str | None = "fast", size: str = "1Gi") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": claim_spec(storage_class, size),
    }


def volume(name: str, storage_class: str = "local", size: str = "10Gi", **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            **spec,
        },
    }


def on_node(name: str, value: str, key: str = "kubernetes.io/hostname") -> Obj:
    term = {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}
    return {"required": {"nodeSelectorTerms": [term]}}


def mounting(obj: Obj, *claims: str) -> Obj:
    obj["spec"]["volumes"] = [
        {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)
    ]
    return obj
