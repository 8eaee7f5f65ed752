"""What a simulated bind writes, after its volumes' and before the pod's own, to the pod's
resource claims (Dynamic Resource Allocation): each claim not allocated gets the
allocation kbatch chose on the node, and every claim the pod in its ``reservedFor``
(``kbatch.cluster.devices.bind_writes``, the rules the live binder follows too). When a
claim cannot be allocated there, nothing is written and the bind is rejected (the pod
stays pending, to be placed again)."""

from collections.abc import Callable
from typing import Any

from kbatch.cluster import devices, fields
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import TaskInfo

Write = Callable[[dict[str, Any]], None]


def refusal(state: ClusterState, task: TaskInfo, node: str, write: Write) -> str | None:
    """Make the claim writes binding ``task``'s pod to ``node`` needs, through ``write``
    (the simulated API server's create-or-replace); why the bind is rejected instead
    (None: it is not)."""
    try:
        writes = state.device_writes(task.namespace, task.name, node)
    except devices.NoDevice as exc:
        return str(exc)
    for change in writes:
        claim = change.claim
        raw = state.get("ResourceClaim", claim.namespace, claim.name)
        assert raw is not None  # (its record was just read)
        written = fields.copied(raw)
        status = written.setdefault("status", {})
        if change.results:
            status["allocation"] = devices.allocation_of(change)
        reserved = status.setdefault("reservedFor", [])
        reserved.append({"resource": "pods", "name": task.name, "uid": task.uid})
        write(written)
    return None
