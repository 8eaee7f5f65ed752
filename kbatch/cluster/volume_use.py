"""What the pods on nodes hold of volumes, against what a pending pod's need: the part of
kube-scheduler's VolumeRestrictions (ReadWriteOncePod) and NodeVolumeLimits (CSI attach
limits) that kbatch does (DESIGN §15).

- A claim of the ReadWriteOncePod access mode is one pod's: while a pod on a node
  (bound, or a bind of ours sent, and not finished) uses it, a pending pod that names
  it fails on every node (``SINGLE_POD_CONFLICT``), and within a session the first
  pod placed with it bars the others (``plugins.volume_checks``). kbatch preempts
  nobody for it.
- A node whose CSINode gives a driver an ``allocatable.count`` attaches that many
  distinct volumes of that driver at most: the volumes of its pods, and a pending
  pod's that are not among them yet, are counted (``MAX_VOLUME_COUNT``). A claim's
  volume is its PV's (``spec.csi``: driver and handle; a PV of no CSI driver counts for
  none), or for a claim not yet bound, one of its StorageClass's provisioner.

``VolumeUse`` keeps the pods on nodes that name claims as they are applied, and makes
a snapshot's ``NodeVolumes`` only while a pending pod of ours names a claim.
"""

from collections.abc import Iterable, Mapping
from dataclasses import replace

from kbatch.cluster.pod_records import PodRecord
from kbatch.cluster.volume_records import (
    READ_WRITE_ONCE_POD,
    ClaimRecord,
    CSINodeRecord,
    StorageClassRecord,
    VolumeRecord,
)
from kbatch.operators.scheduler.core.framework.volume_needs import NodeVolumes, VolumeNeeds

# The kinds whose writes change what the pods on nodes hold.
KINDS = frozenset({"PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode"})

Records = Mapping[str, Mapping[str, object]]  # (a state's parsed records, by kind and key)


def attach_of(
    claim: ClaimRecord,
    volumes: Mapping[str, VolumeRecord],
    classes: Mapping[str, StorageClassRecord],
) -> tuple[str, str] | None:
    """The (CSI driver, volume) that ``claim``'s volume attaches as: its PV's, or for a
    claim not yet bound, a volume its class's provisioner would make (None: none)."""
    if claim.volume_name:
        volume = volumes.get(claim.volume_name)
        if volume is None or not volume.csi_driver:
            return None
        return volume.csi_driver, f"{volume.csi_driver}/{volume.csi_handle}"
    storage_class = classes.get(claim.storage_class) if claim.storage_class else None
    if storage_class is None:
        return None
    return storage_class.provisioner, f"claim:{claim.namespace}/{claim.name}"


def with_use(
    needs: VolumeNeeds,
    pod: PodRecord,
    claims: Mapping[str, ClaimRecord],
    volumes: Mapping[str, VolumeRecord],
    classes: Mapping[str, StorageClassRecord],
    limited: frozenset[str],
) -> VolumeNeeds:
    """``needs`` of ``pod`` with its claims of the ReadWriteOncePod access mode and the
    volumes it attaches of the ``limited`` drivers (those some CSINode limits)."""
    if needs.waiting:
        return needs
    single: dict[str, None] = {}
    attaches: dict[tuple[str, str], None] = {}
    for name in pod.claims:
        claim = claims.get(key := f"{pod.namespace}/{name}")
        if claim is None:
            continue
        if READ_WRITE_ONCE_POD in claim.access_modes:
            single[key] = None
        attach = attach_of(claim, volumes, classes) if limited else None
        if attach is not None and attach[0] in limited:
            attaches[attach] = None
    if not single and not attaches:
        return needs
    return replace(needs, single_pod=tuple(single), attaches=tuple(attaches))


def limited_drivers(csi_nodes: Iterable[CSINodeRecord]) -> frozenset[str]:
    """The drivers some node limits."""
    return frozenset(driver for node in csi_nodes for driver in node.limits)


class VolumeUse:
    """The pods on nodes that name claims (any scheduler's, not finished), by key, and
    the ``NodeVolumes`` they make (kept while none of them, no claim, PV, StorageClass
    nor CSINode is written)."""

    def __init__(self) -> None:
        self._placed: dict[str, PodRecord] = {}
        self._made: NodeVolumes | None = None

    def applied(self, key: str, pod: PodRecord | None) -> None:
        """The pod at ``key`` is now ``pod`` (None: gone)."""
        if pod is not None and pod.claims and pod.node_name and not _finished(pod):
            self._placed[key] = pod
            self._made = None
        elif self._placed.pop(key, None) is not None:
            self._made = None

    def written(self, kind: str) -> None:
        if kind in KINDS:
            self._made = None

    def node_volumes(self, parsed: Records, bound: Iterable[PodRecord]) -> NodeVolumes:
        """What the pods on nodes hold, with ``bound`` (pods a bind of ours was sent for,
        which the watch does not show on their node yet: on the node assumed)."""
        if self._made is None:
            self._made = _made(self._placed.values(), parsed)
        extra = [pod for pod in bound if pod.node_name and not _finished(pod)]
        if not extra:
            return self._made
        more = _made(extra, parsed)
        attached = {node: dict(drivers) for node, drivers in self._made.attached.items()}
        for node, drivers in more.attached.items():
            mine = attached.setdefault(node, {})
            for driver, held in drivers.items():
                mine[driver] = mine.get(driver, frozenset()) | held
        return NodeVolumes(self._made.in_use | more.in_use, attached, self._made.limits)


def _finished(pod: PodRecord) -> bool:
    return pod.phase in ("Succeeded", "Failed")


def _made(pods: Iterable[PodRecord], parsed: Records) -> NodeVolumes:
    claims: Mapping[str, ClaimRecord] = parsed["PersistentVolumeClaim"]  # type: ignore[assignment]
    volumes: Mapping[str, VolumeRecord] = parsed["PersistentVolume"]  # type: ignore[assignment]
    classes: Mapping[str, StorageClassRecord] = parsed["StorageClass"]  # type: ignore[assignment]
    csi_nodes: Mapping[str, CSINodeRecord] = parsed["CSINode"]  # type: ignore[assignment]
    limited = limited_drivers(csi_nodes.values())
    in_use: set[str] = set()
    attached: dict[str, dict[str, set[str]]] = {}
    for pod in pods:
        assert pod.node_name is not None
        for name in pod.claims:
            in_use.add(key := f"{pod.namespace}/{name}")
            claim = claims.get(key)
            attach = None if claim is None or not limited else attach_of(claim, volumes, classes)
            if attach is not None and attach[0] in limited:
                drivers = attached.setdefault(pod.node_name, {})
                drivers.setdefault(attach[0], set()).add(attach[1])
    return NodeVolumes(
        frozenset(in_use),
        {node: {d: frozenset(v) for d, v in drivers.items()} for node, drivers in attached.items()},
        {node.name: node.limits for node in csi_nodes.values() if node.limits},
    )
