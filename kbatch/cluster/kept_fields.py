"""What kbatch keeps of the objects it watches, and which of their writes it takes.

An object from the API server carries fields the server or another component adds that
no part of kbatch reads:

``metadata.managedFields``, server-side apply's record of who set which field: on a
pod that a controller made, a scheduler bound and a kubelet reports on, often a third
of the object (kube-scheduler drops it from its informers' objects too). ``trim``
takes it out of an object the caller owns, before it is parsed and held: the cluster
state takes less memory, copies less, and records less. (A Node's ``status.images``
is kept: image locality reads it, ``kbatch.cluster.node_images``.)

A write may also change nothing kbatch reads: a kubelet's heartbeat of a Node (a
condition's ``lastHeartbeatTime``), the job controller's counts and conditions on a
Job. ``reads_the_same`` tells such a write; the cluster state does not pass such writes
on to its observer (the flight recorder), so a recording holds the changes that
matter, the same whoever made them (a live cluster or the simulator). A Node whose
images alone changed reads the same here (its record, and so the snapshot's node set,
stays) but is passed on: the images are read apart from the record.
"""

from collections.abc import Mapping
from typing import Any


def trim(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` without the fields no part of kbatch reads (changed in place: the caller
    owns it, as an informer owns what it has just decoded)."""
    meta = obj.get("metadata")
    if type(meta) is dict and "managedFields" in meta:
        del meta["managedFields"]
    return obj


def reads_the_same(
    kind: str, old: Any, new: Any, old_raw: Mapping[str, Any] | None, new_raw: Mapping[str, Any]
) -> bool:
    """Does a write of a Node, Job or JobSet that was ``old`` (its record; None: new) and
    now is ``new`` change nothing kbatch reads? A Node: its record (allocatable,
    conditions' statuses, labels, taints) is the same, as after a kubelet's heartbeat.
    A Job or a JobSet: its record, and what ``same_job`` compares (a JobSet's status is
    its controller's counts). Other kinds: every write counts."""
    if old is None or old != new or old_raw is None:
        return False
    if kind == "Node":
        return True
    return kind in ("Job", "JobSet") and same_job(old_raw, new_raw)


def same_job(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Does the Job ``new`` read as ``old`` to kbatch? Its metadata (but for the
    resourceVersion), its spec and its ``status.startTime`` are what kbatch reads (its
    deadline and start, whether kbatch holds it, the pods it will make); its counts
    and conditions are the job controller's, which nothing of kbatch reads."""
    return (
        _metadata_read(old) == _metadata_read(new)
        and old.get("spec") == new.get("spec")
        and _start(old) == _start(new)
    )


def _metadata_read(obj: Mapping[str, Any]) -> Any:
    meta = obj.get("metadata")
    if not isinstance(meta, Mapping):
        return meta
    return {key: value for key, value in meta.items() if key != "resourceVersion"}


def _start(obj: Mapping[str, Any]) -> Any:
    status = obj.get("status")
    return status.get("startTime") if isinstance(status, Mapping) else None
