"""A recorded object as it was submitted: what the cluster wrote into it left out, due
at a time of the simulator's (``kbatch.io/sim-submit-at``) and, for a pod, running
for a while once bound (``kbatch.io/sim-duration``). ``kbatch.record.workload``
makes the simulator's input of a recording with these."""

from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.cluster import records, volume_records
from kbatch.sim import manifests

Object = dict[str, Any]

# What the cluster writes into an object's metadata, left out of the manifests.
WRITTEN_METADATA = (
    "uid",
    "creationTimestamp",
    "resourceVersion",
    "generation",
    "managedFields",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "ownerReferences",
    "finalizers",
    "selfLink",
)
SIM_ANNOTATIONS = (manifests.SUBMIT_AT, manifests.DURATION)
# A watch's objects may come without their apiVersion (the kind is known from the watch).
API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "Namespace": "v1",
    "ResourceQuota": "v1",
    "PriorityClass": "scheduling.k8s.io/v1",
    "PersistentVolumeClaim": "v1",
    "PersistentVolume": "v1",
    "StorageClass": "storage.k8s.io/v1",
    "CSINode": "storage.k8s.io/v1",
}
# What the PV controller, a provisioner or a bind writes into a claim or a PV
VOLUME_WRITES = (
    volume_records.SELECTED_NODE,
    volume_records.BOUND_BY_CONTROLLER,
    "pv.kubernetes.io/bind-completed",
    "pv.kubernetes.io/provisioned-by",
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
)


def key_of(obj: Object) -> str:
    """How the records name ``obj`` (as the cluster state keys it): its name if it is
    cluster-scoped, else "namespace/name"."""
    metadata = obj.get("metadata") or {}
    name = str(metadata.get("name", ""))
    if obj.get("kind") in records.CLUSTER_SCOPED:
        return name
    return f"{metadata.get('namespace') or 'default'}/{name}"


def cluster_manifest(obj: Object) -> Object:
    """A Node, Queue, ... as a manifest: what the cluster wrote left out (a Queue's
    status is the scheduler's; a Node's conditions only by type and status)."""
    kind = obj.get("kind")
    out = {k: v for k, v in obj.items() if k != "status"}
    out["metadata"] = own_metadata(obj)
    if kind == "Node":
        status = obj.get("status") or {}
        kept: Object = {k: status[k] for k in ("allocatable", "capacity") if k in status}
        conditions = [
            {"type": c.get("type"), "status": c.get("status")}
            for c in status.get("conditions") or []
            if isinstance(c, dict)
        ]
        if conditions:
            kept["conditions"] = conditions
        out["status"] = kept
    elif kind == "ResourceQuota" and "status" in obj:
        out["status"] = obj["status"]
    elif kind in ("PersistentVolumeClaim", "PersistentVolume"):
        out = _volume_as_submitted(obj, out)
    return out


def made_by_the_cluster(obj: Object) -> bool:
    """Is ``obj`` a PV a provisioner made (made again, as its claim asks, when played)?"""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return (
        obj.get("kind") == "PersistentVolume" and "pv.kubernetes.io/provisioned-by" in annotations
    )


def _volume_as_submitted(obj: Object, out: Object) -> Object:
    """A claim or a PV without its binding, unless it was made bound (a claim naming its
    PV before the PV controller bound it; a PV's claimRef not written by a bind)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    spec = dict(out.get("spec") or {})
    if (
        obj.get("kind") == "PersistentVolumeClaim"
        and "pv.kubernetes.io/bind-completed" in annotations
    ):
        spec.pop("volumeName", None)
    if obj.get("kind") == "PersistentVolume" and annotations.get(
        volume_records.BOUND_BY_CONTROLLER
    ):
        spec.pop("claimRef", None)
    elif isinstance(spec.get("claimRef"), dict):
        spec["claimRef"] = {k: v for k, v in spec["claimRef"].items() if k in ("namespace", "name")}
    metadata = dict(out["metadata"])
    kept = {k: v for k, v in (metadata.get("annotations") or {}).items() if k not in VOLUME_WRITES}
    if kept:
        metadata["annotations"] = kept
    else:
        metadata.pop("annotations", None)
    return {**out, "metadata": metadata, "spec": spec}


def own_metadata(obj: Object) -> Object:
    """``obj``'s metadata without what the cluster wrote into it, and without the
    simulator's annotations (its own are given anew)."""
    kept = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in WRITTEN_METADATA}
    annotations = {
        k: v for k, v in (kept.get("annotations") or {}).items() if k not in SIM_ANNOTATIONS
    }
    if annotations:
        kept["annotations"] = annotations
    else:
        kept.pop("annotations", None)
    return kept


def without_status(obj: Object) -> Object:
    """A PodGroup (or any object) as submitted: no status, its own metadata."""
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": own_metadata(obj)}


def cordoned(node: Object) -> Object:
    """A Node deleted while recording, as the simulator keeps it: no new pod goes there."""
    return {**node, "spec": {**(node.get("spec") or {}), "unschedulable": True}}


def at(obj: Object, seconds: float, duration: float | None = None) -> Object:
    """``obj`` due at ``seconds`` (and running ``duration`` seconds once bound)."""
    kept = dict(obj["metadata"])
    annotations = dict(kept.get("annotations") or {})
    annotations[manifests.SUBMIT_AT] = f"{max(seconds, 0.0):.3f}s"
    if duration is not None:
        annotations[manifests.DURATION] = f"{max(duration, 0.0):.3f}s"
    kept["annotations"] = annotations
    return {**obj, "metadata": kept}


def group_of(pod: Object) -> str | None:
    """The "namespace/name" of the PodGroup ``pod`` belongs to, as the state reads it."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    group = annotations.get(GROUP_NAME_ANNOTATION)
    if not group:
        group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    if not group:
        return None
    return f"{pod['metadata'].get('namespace', 'default')}/{group}"
