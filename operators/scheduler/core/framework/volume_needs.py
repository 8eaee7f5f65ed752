"""What a pending pod's persistent volumes ask of the node it goes to (kube-scheduler's
VolumeBinding), worked out by the cluster layer from its PersistentVolumeClaims,
PersistentVolumes and StorageClasses (``kbatch.cluster.volumes``) and read by the
predicates plugin (``plugins.volume_checks``): node selector terms, so that the node
index answers them as it answers a pod's own node affinity.
"""

from dataclasses import dataclass

from kbatch.operators.scheduler.core.framework.podspec import NodeSelectorTerm

# kube-scheduler's words for each reason (its VolumeBinding plugin's), so that a user
# reads what the Kubernetes documentation and forums say about them.
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"

# Terms ORed: a node matching any of them (as a PV's spec.nodeAffinity.required).
Terms = tuple[NodeSelectorTerm, ...]


@dataclass(frozen=True, slots=True)
class ClaimChoices:
    """Where the claim ``claim`` (namespace/name), bound on first use, may yet be bound:
    to one of ``volumes``, the free PVs that fit it (smallest first, as its bind
    chooses), each named with its node affinity (None: any node); or, if
    ``provisioned``, to a volume made where ``topologies`` says (None: anywhere)."""

    claim: str
    volumes: tuple[tuple[str, Terms | None], ...] = ()
    provisioned: bool = False
    topologies: Terms | None = None


@dataclass(frozen=True, slots=True)
class VolumeNeeds:
    """A pending pod's volumes, as they stand: ``waiting``, when set, is why no node
    takes it now (a claim not found, being deleted, or bound by the PV controller
    first); else the node must match each of ``bound`` (the node affinity of a PV bound
    to one of its claims) and have a choice for each of ``unbound``."""

    waiting: str = ""
    bound: tuple[Terms, ...] = ()
    unbound: tuple[ClaimChoices, ...] = ()

    @property
    def binds_claims(self) -> bool:
        """Does a pod of these needs bind claims where it goes (a free PV, which the next
        pod then cannot have; a claim, which a pod sharing it then must follow)?"""
        return bool(self.unbound)
