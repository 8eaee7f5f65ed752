"""Where a pod's persistent volumes let it go, and what its bind must write first: the
part of kube-scheduler's VolumeBinding that kbatch does (DESIGN §15).

For each pending pod of ours that names claims (``PodRecord.claims``), a snapshot gives
its ``VolumeNeeds`` (read by the predicates plugin):

- a claim not found, being deleted, bound to a PV not found, of a StorageClass not
  found, or unbound and bound by the PV controller (no class, or a class whose
  volumeBindingMode is Immediate): the pod waits, every node failing for that reason;
- a claim bound to a PV: the node must match the PV's node affinity;
- a claim unbound of a class that waits for its first consumer: the node must match a
  free PV that fits the claim (its class, access modes, size, volume mode, selector),
  or, where the class provisions (not ``kubernetes.io/no-provisioner``) and the claim
  has no selector, the class's allowedTopologies; once a provisioning has begun for a
  node (the claim's ``volume.kubernetes.io/selected-node``), that node alone.

When such a pod is bound (``bind_writes``), each of those claims is first bound to the
smallest free PV that fits it on the node (the PV's claimRef, as kube-scheduler writes
it, which the PV controller completes), or else has the node written as its selected
node, for its provisioner. What kbatch does not do of VolumeBinding: wait for those
claims to be bound before the pod's bind (the kubelet waits for them instead), or read
CSIStorageCapacity. The claims one pod alone may use and the volumes a node may attach
are ``kbatch.cluster.volume_use``'s.
"""

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from kbatch.cluster import volume_use
from kbatch.cluster.assumed import AssumedPods
from kbatch.cluster.pod_records import PodRecord
from kbatch.cluster.template_copies import TemplateCopies
from kbatch.cluster.volume_records import (
    NO_PROVISIONER,
    ClaimRecord,
    CSINodeRecord,
    StorageClassRecord,
    VolumeRecord,
)
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from kbatch.operators.scheduler.core.framework.podspec import (
    NodeSelectorTerm,
    Operator,
    Requirement,
)
from kbatch.operators.scheduler.core.framework.volume_needs import (
    NODE_NAME_FIELD,
    ClaimChoices,
    NodeVolumes,
    Terms,
    VolumeNeeds,
    matches_node,
)

KINDS = volume_use.KINDS
HOSTNAME_LABEL = "kubernetes.io/hostname"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


@dataclass(frozen=True, slots=True)
class VolumeWrite:
    """What a bind writes first for one of its pod's claims: the claim's selected node
    (``volume`` ''), or the claimRef of ``volume`` (made against its
    ``resource_version``) to the claim."""

    claim: ClaimRecord
    node: str
    volume: str = ""
    resource_version: str = ""


class VolumeIndex:
    """Our pending pods that name claims, by key, and their ``VolumeNeeds`` (worked out
    again only once one of them, a claim, a PV, a StorageClass or a CSINode is written),
    which a snapshot's tasks of them carry on their templates (``mark``); and what the
    pods on nodes hold of volumes (``use``)."""

    def __init__(self) -> None:
        self._pods: dict[str, PodRecord] = {}
        self._needs: dict[str, VolumeNeeds] | None = {}
        self._templates = TemplateCopies("volumes")  # (the tasks' templates with needs)
        # PVs that binds chose for claims (their claimRef sent) which the watch does not
        # show so yet: no longer free, for the next sessions and binds (``assume``).
        self.assumed: set[str] = set()
        # Claims those binds bound or selected a node for, likewise: claim key -> node.
        self.claimed: dict[str, str] = {}
        self._for_binds: FreeVolumes | None = None  # (``for_binds``)
        self.use = volume_use.VolumeUse()

    def applied(self, key: str, pod: PodRecord | None, ours: bool) -> None:
        """The pod at ``key`` is now ``pod`` (None: gone); ``ours``: of our schedulers."""
        self.use.applied(key, pod)
        if pod is not None and ours and pod.claims and pod.task_status is TaskStatus.PENDING:
            self._pods[key] = pod
            self._needs = None
        elif self._pods.pop(key, None) is not None:
            self._needs = None

    def written(self, kind: str, key: str, parsed: object) -> None:
        """The object of ``kind`` at ``key`` is now ``parsed`` (None: dropped): if a claim,
        a PV, a StorageClass or a CSINode, the needs are worked out again; a PV assumed claimed
        that the watch shows claimed (or gone) is assumed so no longer."""
        self.use.written(kind)
        if kind not in KINDS:
            return
        if kind == "PersistentVolume":
            self._for_binds = None
        if kind == "PersistentVolume" and key in self.assumed and _shown_claimed(parsed):
            self.assumed.discard(key)
        elif kind == "PersistentVolumeClaim" and key in self.claimed and _shown_bound(parsed):
            del self.claimed[key]
        if self._pods:
            self._needs = None

    def for_binds(self, volumes: Mapping[str, VolumeRecord]) -> "FreeVolumes":
        """The free PVs of ``volumes`` (the state's), the same while no PV is written:
        binds pass ``assumed`` as taken (``bind_writes``)."""
        if self._for_binds is None:
            self._for_binds = FreeVolumes(volumes.values())
        return self._for_binds

    def assume(self, writes: Iterable["VolumeWrite"]) -> None:
        """The PVs ``writes`` bind are taken, and their claims bound for their node,
        from now on (until the watch shows them so)."""
        for write in writes:
            if write.volume:
                self.assumed.add(write.volume)
            self.claimed[f"{write.claim.namespace}/{write.claim.name}"] = write.node
            self._needs = None

    def forget(self, write: "VolumeWrite") -> None:
        """``write`` was not made (it failed): its PV is free and its claim unbound again."""
        self.assumed.discard(write.volume)
        self.claimed.pop(f"{write.claim.namespace}/{write.claim.name}", None)
        self._needs = None

    def of_state(
        self, parsed: Mapping[str, Mapping[str, object]], assumed: AssumedPods
    ) -> tuple[Mapping[str, VolumeNeeds], NodeVolumes | None]:
        """``needs`` of a state's records by kind (``ClusterState._parsed``), and what
        the pods on nodes hold, those ``assumed`` bound among them (None, not worked
        out, while no pending pod of ours names a claim)."""
        if not self._pods:
            return {}, None
        needs = self.needs(
            parsed["PersistentVolumeClaim"],  # type: ignore[arg-type]
            parsed["PersistentVolume"],  # type: ignore[arg-type]
            parsed["StorageClass"],  # type: ignore[arg-type]
            parsed["CSINode"],  # type: ignore[arg-type]
        )
        pods = self._pods
        bound = [assumed.applied_to(pods[key]) for key in assumed if key in pods]
        return needs, self.use.node_volumes(parsed, bound)

    def needs(
        self,
        claims: Mapping[str, ClaimRecord],
        volumes: Mapping[str, VolumeRecord],
        classes: Mapping[str, StorageClassRecord],
        csi_nodes: Mapping[str, CSINodeRecord],
    ) -> Mapping[str, VolumeNeeds]:
        """Each pending pod's ``VolumeNeeds`` by key, given the state's records by key."""
        if self._needs is None:
            self._templates.clear()
            free = FreeVolumes(volumes.values(), self.assumed)
            limited = volume_use.limited_drivers(csi_nodes.values())
            records = claims, volumes, classes
            self._needs = {
                key: volume_use.with_use(
                    needs_of(pod, *records, free, self.claimed), pod, *records, limited
                )
                for key, pod in self._pods.items()
            }
        return self._needs

    def mark(
        self, snapshot: Snapshot, found: tuple[Mapping[str, VolumeNeeds], NodeVolumes | None]
    ) -> None:
        """Give the tasks of ``snapshot`` of the pods of ``needs`` (``of_state``'s answer,
        with what the pods on nodes hold, which the snapshot is given) templates that
        carry them: pods of one template with other needs (other claims, of one spec:
        ephemeral volumes) are placed apart."""
        needs, snapshot.node_volumes = found
        self._templates.mark(snapshot, self._pods, needs)


def _shown_claimed(volume: object) -> bool:
    """Does the watch show this PV (None: gone) claimed, as a bind assumed it?"""
    return not isinstance(volume, VolumeRecord) or volume.claim is not None


def _shown_bound(claim: object) -> bool:
    """Does the watch show this claim (None: gone) bound, or being provisioned?"""
    return not isinstance(claim, ClaimRecord) or bool(claim.volume_name or claim.selected_node)


class FreeVolumes:
    """The PVs that a claim bound on first use may be bound to, by class: neither
    bound to another claim nor being deleted, nor ``taken``. Those a claim of a shape
    fits are worked out once per shape (class, access modes, size, volume mode,
    selector): the pods of one template have claims of one shape, and a snapshot asks
    for each pod's."""

    def __init__(
        self, volumes: Iterable[VolumeRecord], taken: AbstractSet[str] = frozenset()
    ) -> None:
        self._by_class: dict[str, list[VolumeRecord]] = {}
        self._kept_for: dict[tuple[str, str], list[VolumeRecord]] = {}  # by claimRef
        self._by_shape: dict[tuple[object, ...], list[VolumeRecord]] = {}
        self._choices: dict[tuple[object, ...], tuple[tuple[str, Terms | None], ...]] = {}
        # Of each shape's PVs, those whose affinity is one node's hostname, by it, and
        # the others (``fitting_on``).
        self._pinned: dict[
            tuple[object, ...], tuple[dict[str, list[VolumeRecord]], list[VolumeRecord]]
        ] = {}
        for volume in volumes:
            if volume.name in taken or volume.deleting:
                continue
            if volume.phase not in ("", "Pending", "Available"):
                continue
            if volume.claim is not None:
                self._kept_for.setdefault(volume.claim[:2], []).append(volume)
            else:
                self._by_class.setdefault(volume.storage_class, []).append(volume)

    def fitting(self, claim: ClaimRecord) -> list[VolumeRecord]:
        """The free PVs that ``claim`` fits, smallest first (kube-scheduler's choice)."""
        shape = _shape(claim)
        found = self._by_shape.get(shape)
        if found is None:
            of_class = self._by_class.get(claim.storage_class, ())
            found = self._by_shape[shape] = _smallest_first(v for v in of_class if fits(claim, v))
        kept = self._kept_for.get((claim.namespace, claim.name))
        if kept:
            mine = (v for v in kept if v.storage_class == claim.storage_class and fits(claim, v))
            return _smallest_first([*found, *mine])
        return found

    def choices(self, claim: ClaimRecord) -> tuple[tuple[str, Terms | None], ...]:
        """``fitting`` as (name, node affinity) pairs: the very same tuple for the
        claims of one shape (``plugins.volume_checks`` counts its PVs once)."""
        shape = _shape(claim)
        if (claim.namespace, claim.name) not in self._kept_for:
            found = self._choices.get(shape)
            if found is not None:
                return found
        made = tuple((volume.name, volume.node_terms) for volume in self.fitting(claim))
        if (claim.namespace, claim.name) not in self._kept_for:
            self._choices[shape] = made
        return made

    def fitting_on(
        self, claim: ClaimRecord, node: str, labels: dict[str, str]
    ) -> list[VolumeRecord]:
        """``fitting`` on the node named ``node`` with ``labels``: a local disk's PV is
        looked up by its node's hostname, not matched against every node it is not on."""
        fitting = self.fitting(claim)
        split = self._pinned.get(shape := _shape(claim))
        if split is None:
            by_host: dict[str, list[VolumeRecord]] = {}
            others: list[VolumeRecord] = []
            for volume in self._by_shape[shape]:
                host = _pinned_host(volume.node_terms)
                if host is None:
                    others.append(volume)
                else:
                    by_host.setdefault(host, []).append(volume)
            split = self._pinned[shape] = (by_host, others)
        by_host, others = split
        if len(fitting) != len(self._by_shape[shape]):  # (PVs kept for it by name)
            return [v for v in fitting if matches_node(v.node_terms, node, labels)]
        found = by_host.get(labels.get(HOSTNAME_LABEL, ""), [])
        found = [*found, *(v for v in others if matches_node(v.node_terms, node, labels))]
        return _smallest_first(found)


def _pinned_host(terms: Terms | None) -> str | None:
    """The hostname ``terms`` hold a PV to, when that is all they say (a local disk)."""
    if terms is None or len(terms) != 1 or terms[0].match_fields:
        return None
    (term,) = terms
    if len(term.match_expressions) != 1:
        return None
    (req,) = term.match_expressions
    if req.key != HOSTNAME_LABEL or req.operator is not Operator.IN or len(req.values) != 1:
        return None
    return req.values[0]


def _shape(claim: ClaimRecord) -> tuple[object, ...]:
    """What of a claim the PVs it fits depend on, but PVs kept for it by name."""
    return claim.storage_class, claim.access_modes, claim.storage, claim.volume_mode, claim.selector


def _smallest_first(volumes: Iterable[VolumeRecord]) -> list[VolumeRecord]:
    return sorted(volumes, key=lambda v: (v.capacity, v.name))


def fits(claim: ClaimRecord, volume: VolumeRecord) -> bool:
    """May ``claim`` be bound to ``volume`` (a free one of its class)?"""
    if volume.claim is not None:
        namespace, name, uid = volume.claim
        if (namespace, name) != (claim.namespace, claim.name) or uid not in ("", claim.uid):
            return False  # kept for another claim
    return (
        claim.access_modes <= volume.access_modes
        and volume.capacity >= claim.storage
        and volume.volume_mode == claim.volume_mode
        and (claim.selector is None or claim.selector.matches(volume.labels))
    )


def needs_of(
    pod: PodRecord,
    claims: Mapping[str, ClaimRecord],
    volumes: Mapping[str, VolumeRecord],
    classes: Mapping[str, StorageClassRecord],
    free: FreeVolumes,
    claimed: Mapping[str, str] = {},
) -> VolumeNeeds:
    """What ``pod``'s claims ask of a node (the module's rules; ``claimed``: claim key ->
    the node binds not yet shown bound it for, as if it were its selected node)."""
    bound: list[Terms] = []
    unbound: list[ClaimChoices] = []
    for name in pod.claims:
        claim = claims.get(f"{pod.namespace}/{name}")
        if claim is None:
            return VolumeNeeds(f'persistentvolumeclaim "{name}" not found')
        if claim.deleting:
            return VolumeNeeds(f'persistentvolumeclaim "{name}" is being deleted')
        if claim.volume_name:
            volume = volumes.get(claim.volume_name)
            if volume is None:
                why = f'persistentvolume "{claim.volume_name}" (of claim "{name}") not found'
                return VolumeNeeds(why)
            if volume.node_terms is not None:
                bound.append(volume.node_terms)
            continue
        storage_class = classes.get(claim.storage_class) if claim.storage_class else None
        if claim.storage_class and storage_class is None:
            return VolumeNeeds(f'storageclass.storage.k8s.io "{claim.storage_class}" not found')
        if storage_class is None or not storage_class.waits_for_consumer:
            return VolumeNeeds(UNBOUND_IMMEDIATE)
        unbound.append(_bindable_on(claim, storage_class, free, claimed))
    return VolumeNeeds("", tuple(bound), tuple(unbound))


def _bindable_on(
    claim: ClaimRecord,
    storage_class: StorageClassRecord,
    free: FreeVolumes,
    claimed: Mapping[str, str],
) -> ClaimChoices:
    """Where ``claim``, bound on first use, may be bound or provisioned."""
    key = f"{claim.namespace}/{claim.name}"
    node = claimed.get(key) or claim.selected_node
    if node:  # (bound, or being provisioned, for that node: that node alone)
        return ClaimChoices(key, (), True, (_node_named(node),))
    fitting = free.choices(claim)
    if provisions(claim, storage_class):
        return ClaimChoices(key, fitting, True, storage_class.topologies)
    return ClaimChoices(key, fitting)


def provisions(claim: ClaimRecord, storage_class: StorageClassRecord) -> bool:
    """May a volume be provisioned for ``claim`` (not for one with a selector)?"""
    return storage_class.provisioner != NO_PROVISIONER and claim.selector is None


def _node_named(node: str) -> NodeSelectorTerm:
    return NodeSelectorTerm(match_fields=(Requirement(NODE_NAME_FIELD, Operator.IN, (node,)),))


class NoVolume(Exception):
    """A claim of the pod may be bound on the node no longer: no PV fits it there, and
    none may be provisioned there."""


def bind_writes(
    pod: PodRecord,
    node: str,
    labels: dict[str, str],
    claims: Mapping[str, ClaimRecord],
    classes: Mapping[str, StorageClassRecord],
    free: FreeVolumes,
    taken: set[str],
    claimed: Mapping[str, str] = {},
) -> list[VolumeWrite]:
    """What binding ``pod`` to ``node`` (with ``labels``) writes first, for each of its
    claims bound on first use that is not yet bound: the smallest free PV that fits it
    there (not one of ``taken``, the PVs the binds before it chose: added to), or else
    the node as its selected node, for its provisioner. NoVolume when neither may be,
    or when a claim (shared with another pod) is being bound for another node: its
    selected node, or ``claimed``'s (claim key -> node, by binds not yet shown)."""
    writes = []
    for name in pod.claims:
        claim = claims.get(key := f"{pod.namespace}/{name}")
        if claim is None or claim.volume_name:
            continue
        other = claimed.get(key) or claim.selected_node
        if other:
            if other != node:
                raise NoVolume(f'claim "{name}" is being bound for {other}, not {node}')
            continue
        storage_class = classes.get(claim.storage_class)
        if storage_class is None or not storage_class.waits_for_consumer:
            continue  # (the PV controller's to bind)
        chosen = next(
            (v for v in free.fitting_on(claim, node, labels) if v.name not in taken), None
        )
        if chosen is not None:
            taken.add(chosen.name)
            writes.append(VolumeWrite(claim, node, chosen.name, chosen.resource_version))
        elif provisions(claim, storage_class) and matches_node(
            storage_class.topologies, node, labels
        ):
            writes.append(VolumeWrite(claim, node))
        else:
            raise NoVolume(f'no persistent volume for claim "{name}" may be bound on {node}')
    return writes
