"""The volume objects the simulator makes and writes, as Kubernetes' controllers make
them: the claim of a pod's generic ephemeral volume (the ephemeral-volume controller),
a provisioned PersistentVolume (a provisioner), and the writes that bind a claim and
a PV to each other (the PV controller and kube-scheduler's VolumeBinding). Plain dicts
in, plain dicts out: what decides when to make them is ``kbatch.sim.volume_controller``
and ``kbatch.sim.volume_binds``.
"""

from collections.abc import Mapping
from typing import Any

from kbatch.cluster import fields
from kbatch.cluster.volume_records import BOUND_BY_CONTROLLER, SELECTED_NODE

Object = dict[str, Any]
TEMPLATE = "ephemeral.volumeClaimTemplate"
# Set on a claim once the PV controller has bound it (as Kubernetes marks it).
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
ZONE_LABEL = "topology.kubernetes.io/zone"


def ephemeral_claims(pod: Mapping[str, Any]) -> list[tuple[str, Object]]:
    """The claims Kubernetes makes for ``pod``'s generic ephemeral volumes, each with
    where its template is (``spec.volumes[i].ephemeral.volumeClaimTemplate``): named
    pod-volume, in the pod's namespace, of the template's labels, annotations and spec,
    owned by the pod. FieldError naming the pod's field when a template is misshapen."""
    spec = pod.get("spec") or {}
    if not isinstance(spec, Mapping) or not spec.get("volumes"):
        return []
    metadata = pod["metadata"]
    made = []
    for i, volume in enumerate(fields.mappings(spec, "volumes", at="spec")):
        if volume.get("ephemeral") is None:
            continue
        where = f"spec.volumes[{i}]"
        template = fields.mapping(volume, TEMPLATE, at=where)
        if not template:
            raise fields.FieldError(f"{where}.{TEMPLATE}", "required")
        at = f"{where}.{TEMPLATE}"
        claim_meta: Object = {
            "name": f"{metadata['name']}-{fields.string(volume, 'name', at=where)}",
            "namespace": metadata.get("namespace") or "default",
        }
        for key in ("labels", "annotations"):
            found = fields.string_map(template, f"metadata.{key}", at=at)
            if found:
                claim_meta[key] = dict(found)
        if metadata.get("uid"):
            claim_meta["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Pod", "name": metadata["name"],
                 "uid": metadata["uid"], "controller": True, "blockOwnerDeletion": True}
            ]  # fmt: skip
        claim_spec = fields.copied(dict(fields.mapping(template, "spec", at=at)))
        made.append((at, {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                          "metadata": claim_meta, "spec": claim_spec}))  # fmt: skip
    return made


def provisioned_volume(
    claim: Mapping[str, Any], storage_class: Mapping[str, Any], terms: list[Object] | None
) -> Object:
    """The PV ``storage_class``'s provisioner makes for ``claim``: named pvc-<its uid>,
    of its requested size, access modes and volume mode, reachable from the nodes that
    match ``terms`` (nodeSelectorTerms; None: any), a volume of the provisioner's CSI
    driver, already bound to the claim."""
    meta, spec = claim["metadata"], claim.get("spec") or {}
    volume_spec: Object = {
        "capacity": {"storage": spec["resources"]["requests"]["storage"]},
        "accessModes": list(spec.get("accessModes") or ()),
        "volumeMode": spec.get("volumeMode") or "Filesystem",
        "storageClassName": storage_class["metadata"]["name"],
        "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
        "claimRef": claim_ref(claim),
    }
    if terms is not None:
        volume_spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": terms}}
    name = f"pvc-{meta.get('uid') or (meta.get('namespace') or 'default') + '-' + meta['name']}"
    provisioner = str(storage_class.get("provisioner", ""))
    # (a CSI provisioner's volume, of its driver: counted against the nodes' attach limits)
    volume_spec["csi"] = {"driver": provisioner, "volumeHandle": name}
    annotations = {PROVISIONED_BY: provisioner}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "annotations": annotations},
            "spec": volume_spec, "status": {"phase": "Bound"}}  # fmt: skip


def topology_terms(storage_class: Mapping[str, Any]) -> list[Object] | None:
    """A class's allowedTopologies as nodeSelectorTerms (None: it has none)."""
    topologies = storage_class.get("allowedTopologies")
    if not topologies:
        return None
    return [
        {"matchExpressions": [
            {"key": item["key"], "operator": "In", "values": list(item.get("values") or ())}
            for item in term.get("matchLabelExpressions") or ()
        ]}
        for term in topologies
    ]  # fmt: skip


def pinned_terms(
    storage_class: Mapping[str, Any], node_labels: Mapping[str, str]
) -> list[Object] | None:
    """Where a volume provisioned for a pod bound to a node with ``node_labels`` is
    reachable from: that node's values of the keys of the class's allowedTopologies,
    else the node's zone, else anywhere (None)."""
    keys: list[str] = []
    for term in topology_terms(storage_class) or ():
        keys += [e["key"] for e in term["matchExpressions"] if e["key"] not in keys]
    if not keys and ZONE_LABEL in node_labels:
        keys = [ZONE_LABEL]
    found = [
        {"key": key, "operator": "In", "values": [node_labels[key]]}
        for key in keys
        if key in node_labels
    ]
    return [{"matchExpressions": found}] if found else None


def claim_ref(claim: Mapping[str, Any]) -> Object:
    meta = claim["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": meta.get("namespace") or "default",
        "name": meta["name"],
        "uid": meta.get("uid", ""),
    }


def volume_claimed(volume: Mapping[str, Any], claim: Mapping[str, Any]) -> Object:
    """``volume`` with its claimRef set to ``claim``, marked bound by a controller (as
    kube-scheduler's bind writes it, before the pod's)."""
    meta = volume["metadata"]
    annotations = {**(meta.get("annotations") or {}), BOUND_BY_CONTROLLER: "yes"}
    return {
        **volume,
        "metadata": {**meta, "annotations": annotations},
        "spec": {**(volume.get("spec") or {}), "claimRef": claim_ref(claim)},
    }


def claim_selected(claim: Mapping[str, Any], node: str) -> Object:
    """``claim`` annotated with its selected node, for its provisioner."""
    meta = claim["metadata"]
    annotations = {**(meta.get("annotations") or {}), SELECTED_NODE: node}
    return {**claim, "metadata": {**meta, "annotations": annotations}}


def claim_bound(claim: Mapping[str, Any], volume: Mapping[str, Any]) -> Object:
    """``claim`` bound to ``volume``: its volumeName, status Bound with the volume's
    capacity and access modes (as the PV controller completes a binding)."""
    meta, spec = claim["metadata"], volume.get("spec") or {}
    annotations = {**(meta.get("annotations") or {}), BIND_COMPLETED: "yes"}
    status = {
        "phase": "Bound",
        "accessModes": list(spec.get("accessModes") or ()),
        "capacity": dict(spec.get("capacity") or {}),
    }
    return {
        **claim,
        "metadata": {**meta, "annotations": annotations},
        "spec": {**(claim.get("spec") or {}), "volumeName": volume["metadata"]["name"]},
        "status": status,
    }


def volume_bound(volume: Mapping[str, Any], claim: Mapping[str, Any]) -> Object:
    """``volume`` Bound to ``claim`` (its claimRef's uid filled in)."""
    return {
        **volume,
        "spec": {**(volume.get("spec") or {}), "claimRef": claim_ref(claim)},
        "status": {**(volume.get("status") or {}), "phase": "Bound"},
    }
