"""What a simulated bind writes before the pod's own: for each of its claims bound on
first use and not bound yet, the claimRef of the PV chosen for it, or the node as its
selected node, for its provisioner (``kbatch.cluster.volumes.bind_writes``, the rules
the live binder follows too). When no volume may be had on the node, nothing is
written and the bind is rejected (the pod stays pending, to be placed again).

One ``VolumeBinds`` serves the binds of one session's outcome: the free PVs are listed
once, at its first bind of a pod with claims, and the PVs its binds chose are not
chosen again (the list is not updated as they are written); a claim two pods share is
bound for the first one's node, and a bind of the other on another node is rejected
(``bind_writes``'s ``claimed``: the session places such pods together, so this is a
guard)."""

from collections.abc import Callable
from typing import Any

from kbatch.cluster import volumes
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.sim import volume_objects

Write = Callable[[dict[str, Any]], None]


class VolumeBinds:
    """The volume writes of one outcome's binds (it holds no writer: a backend holding
    it and it holding the backend's method would be a cycle)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._free: volumes.FreeVolumes | None = None
        self._taken: set[str] = set()
        self._nodes: dict[str, str] = {}  # claims this outcome's binds wrote for -> node

    def refusal(self, task: TaskInfo, node: str, write: Write) -> str | None:
        """Make the writes binding ``task``'s pod to ``node`` needs first, through
        ``write`` (the simulated API server's create-or-replace); why the bind is
        rejected instead (None: it is not)."""
        pod = self.state.pod_record(task.namespace, task.name)
        if pod is None or not pod.claims:
            return None
        node_record = self.state.records_of("Node").get(node)
        labels = node_record.labels if node_record is not None else {}
        if self._free is None:
            self._free = volumes.FreeVolumes(self.state.records_of("PersistentVolume").values())
        claims = self.state.records_of("PersistentVolumeClaim")
        classes = self.state.records_of("StorageClass")
        taken = set(self._taken)  # (kept only if the whole pod's writes are made)
        try:
            writes = volumes.bind_writes(
                pod, node, labels, claims, classes, self._free, taken, self._nodes
            )
        except volumes.NoVolume as exc:
            return str(exc)
        self._taken = taken
        for change in writes:
            self._nodes[f"{change.claim.namespace}/{change.claim.name}"] = node
            write(self._written(change))
        return None

    def _written(self, write: volumes.VolumeWrite) -> dict[str, Any]:
        claim = write.claim
        raw_claim = self.state.get("PersistentVolumeClaim", claim.namespace, claim.name)
        assert raw_claim is not None  # (its record was just read)
        if not write.volume:
            return volume_objects.claim_selected(raw_claim, write.node)
        raw_volume = self.state.get("PersistentVolume", "", write.volume)
        assert raw_volume is not None
        return volume_objects.volume_claimed(raw_volume, raw_claim)
