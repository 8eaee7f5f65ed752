"""The PV controller, the provisioners and the ephemeral-volume controller the simulator
plays (a cluster's kube-controller-manager and CSI provisioners), so that a pod whose
claims are bound or provisioned starts, as it would on a cluster.

Run before and after each session (``runner``), it has work only when a claim, a PV or
a StorageClass was written, for the claims not seen Bound (``Touched.claims``), and
for the pods made with generic ephemeral volumes (``Touched.ephemeral``):

- a generic ephemeral volume: its claim, named pod-volume, is made in the pod's
  namespace from the volume's ``volumeClaimTemplate`` (its labels, annotations and
  spec), owned by the pod, when the pod is made;
- a claim without ``spec.storageClassName`` is given the default StorageClass, where
  one is annotated so (as Kubernetes 1.28+ does for such a claim);
- a claim that a PV's claimRef names (written by a bind, or so in the input), or that
  names its PV in ``spec.volumeName``: both are Bound (the claim's ``volumeName``,
  capacity and access modes; the PV's phase and its claimRef's uid);
- an unbound claim of no class or of a class whose volumeBindingMode is Immediate: the
  smallest free PV that fits it is bound to it; else, where its class provisions (not
  ``kubernetes.io/no-provisioner``) and the claim has no selector, a PV is provisioned
  at once (named pvc-<claim uid>, of the requested size, the claim's access modes and
  volume mode, reachable from the class's allowedTopologies, else from anywhere) and
  bound to it;
- an unbound claim of a WaitForFirstConsumer class with a selected node (written by
  its pod's bind): a PV is provisioned for it as above, reachable from the selected
  node's values of the class's allowedTopologies' keys if it has any, else from the
  node's zone (``topology.kubernetes.io/zone``) if it has one, else from anywhere; and
  bound to it. Without a selected node it waits for its pod's bind.

The provisioning is a model of what CSI provisioners commonly do (a volume at once,
in the selected node's topology), not a fact about every one: no provisioning fails
or takes time, capacity is unlimited, and no claim or volume is ever deleted (a pod's
ephemeral claims outlive it).
"""

from collections.abc import Mapping
from typing import Any

from kbatch.cluster import fields
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.volume_records import ClaimRecord, StorageClassRecord, VolumeRecord
from kbatch.cluster.volumes import FreeVolumes, fits, provisions
from kbatch.sim import volume_objects
from kbatch.sim.backend import SimBackend

Object = dict[str, Any]


def reconcile(cluster: SimBackend) -> None:
    """Make the claims of pods made since the last call, then bind what may be bound."""
    touched = cluster.touched
    if touched.ephemeral:
        made, touched.ephemeral = touched.ephemeral, []
        for namespace, name in made:
            _make_ephemeral_claims(cluster, namespace, name)
    if not touched.volumes:
        return
    touched.volumes = False
    binding = _Binding(cluster)
    for key in sorted(touched.claims):
        if binding.settled(key):
            touched.claims.discard(key)


def _make_ephemeral_claims(cluster: SimBackend, namespace: str, name: str) -> None:
    pod = cluster.state.get("Pod", namespace, name)
    if pod is None:
        return
    try:
        made = volume_objects.ephemeral_claims(pod)
    except (ObjectError, fields.FieldError):
        return  # (refused with the pod when it was made: its claim stays missing)
    for _, claim in made:
        meta = claim["metadata"]
        if cluster.state.get("PersistentVolumeClaim", meta["namespace"], meta["name"]) is None:
            cluster.create(claim)


class _Binding:
    """One pass over the claims not seen Bound, on the records as it began (a PV it
    binds is not bound again: ``_taken``)."""

    def __init__(self, cluster: SimBackend) -> None:
        self.cluster = cluster
        state = cluster.state
        self.claims: Mapping[str, ClaimRecord] = state.records_of("PersistentVolumeClaim")
        self.volumes: Mapping[str, VolumeRecord] = state.records_of("PersistentVolume")
        self.classes: Mapping[str, StorageClassRecord] = state.records_of("StorageClass")
        self._claimed: dict[tuple[str, str], VolumeRecord] | None = None
        self._free: FreeVolumes | None = None
        self._taken: set[str] = set()

    def settled(self, key: str) -> bool:
        """Bind the claim at ``key`` if it may be; is there nothing more to do for it?"""
        claim = self.claims.get(key)
        if claim is None:
            return True  # (gone)
        if self._given_default_class(claim):
            claim = self.claims[key]
        if claim.volume_name:
            volume = self.volumes.get(claim.volume_name)
            if volume is None:
                return False  # (until it is made)
            self._bind(volume.name, claim)
            return True
        volume = self._claimed_by_volume(claim)
        if volume is not None:
            self._bind(volume.name, claim)
            return True
        storage_class = self.classes.get(claim.storage_class) if claim.storage_class else None
        if claim.storage_class and storage_class is None:
            return False  # (until it is made)
        if storage_class is None or not storage_class.waits_for_consumer:
            return self._bind_at_once(claim, storage_class)
        if not claim.selected_node or not provisions(claim, storage_class):
            return False  # (until its pod's bind selects a node)
        node = self.cluster.state.records_of("Node").get(claim.selected_node)
        if node is None:
            return False
        raw_class = self._raw_class(storage_class)
        terms = volume_objects.pinned_terms(raw_class, node.labels)
        self._provision(claim, raw_class, terms)
        return True

    def _given_default_class(self, claim: ClaimRecord) -> bool:
        """Give a claim that names no class (not even '') the default one; was it?"""
        if claim.volume_name or claim.storage_class:
            return False
        raw = self._raw_claim(claim)
        if "storageClassName" in (raw.get("spec") or {}):
            return False
        default = next((c for c in self.classes.values() if c.default), None)
        if default is None:
            return False
        self.cluster.create({**raw, "spec": {**raw["spec"], "storageClassName": default.name}})
        return True

    def _claimed_by_volume(self, claim: ClaimRecord) -> VolumeRecord | None:
        """The PV whose claimRef names ``claim`` (None: none)."""
        if self._claimed is None:
            self._claimed = {v.claim[:2]: v for v in self.volumes.values() if v.claim is not None}
        volume = self._claimed.get((claim.namespace, claim.name))
        if volume is None or volume.claim is None or volume.claim[2] not in ("", claim.uid):
            return None
        return volume

    def _bind_at_once(self, claim: ClaimRecord, storage_class: StorageClassRecord | None) -> bool:
        """A claim the PV controller binds at once: to a free PV, else a provisioned one."""
        if self._free is None:
            self._free = FreeVolumes(self.volumes.values())
        for volume in self._free.fitting(claim):
            if volume.name not in self._taken and fits(claim, volume):
                self._taken.add(volume.name)
                self._bind(volume.name, claim, claiming=True)
                return True
        if storage_class is None or not provisions(claim, storage_class):
            return False  # (until a PV that fits it is made)
        raw_class = self._raw_class(storage_class)
        self._provision(claim, raw_class, volume_objects.topology_terms(raw_class))
        return True

    def _provision(self, claim: ClaimRecord, raw_class: Object, terms: list[Object] | None) -> None:
        made = volume_objects.provisioned_volume(self._raw_claim(claim), raw_class, terms)
        if self.cluster.state.get("PersistentVolume", "", made["metadata"]["name"]) is None:
            self.cluster.create(made)
        self._bind(made["metadata"]["name"], claim)

    def _bind(self, volume: str, claim: ClaimRecord, claiming: bool = False) -> None:
        """Bind the PV named ``volume`` and ``claim`` to each other (``claiming``: the PV
        is bound by this controller, not by a bind or the input), writing what differs."""
        state = self.cluster.state
        raw_volume = state.get("PersistentVolume", "", volume)
        assert raw_volume is not None
        raw_claim = self._raw_claim(claim)
        if claiming:
            raw_volume = volume_objects.volume_claimed(raw_volume, raw_claim)
        bound_volume = volume_objects.volume_bound(raw_volume, raw_claim)
        if bound_volume != state.get("PersistentVolume", "", volume):
            self.cluster.create(bound_volume)
        bound_claim = volume_objects.claim_bound(raw_claim, bound_volume)
        if bound_claim != raw_claim:
            self.cluster.create(bound_claim)

    def _raw_claim(self, claim: ClaimRecord) -> Object:
        raw = self.cluster.state.get("PersistentVolumeClaim", claim.namespace, claim.name)
        assert raw is not None  # (its record is the state's)
        return raw

    def _raw_class(self, storage_class: StorageClassRecord) -> Object:
        raw = self.cluster.state.get("StorageClass", "", storage_class.name)
        assert raw is not None
        return raw
