"""What a pending pod's persistent volumes ask of the node it goes to (kube-scheduler's
VolumeBinding, VolumeRestrictions and NodeVolumeLimits), worked out by the cluster layer
from its PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes
(``kbatch.cluster.volumes``, ``kbatch.cluster.volume_use``) and read by the predicates
plugin (``plugins.volume_checks``): node selector terms, so that the node index answers
them as it answers a pod's own node affinity; the claims only one pod may use; and the
volumes it would attach, counted against the nodes' limits (``NodeVolumes``).
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.podspec import NodeSelectorTerm, requirement_matches

# kube-scheduler's words for each reason (its VolumeBinding plugin's), so that a user
# reads what the Kubernetes documentation and forums say about them.
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
# (its VolumeRestrictions plugin's, for a claim of the ReadWriteOncePod access mode)
SINGLE_POD_CONFLICT = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)
MAX_VOLUME_COUNT = "node(s) exceed max volume count"  # (its NodeVolumeLimits plugin's)

# Terms ORed: a node matching any of them (as a PV's spec.nodeAffinity.required).
Terms = tuple[NodeSelectorTerm, ...]
NODE_NAME_FIELD = "metadata.name"  # (the one node field a term may match)


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

    def __hash__(self) -> int:
        # Not of every PV's terms (thousands of local disks, for each pod's claim, at
        # every look-up): of how many. Equal choices hash alike all the same.
        return hash((self.claim, len(self.volumes), self.provisioned, self.topologies))


@dataclass(frozen=True, slots=True)
class VolumeNeeds:
    """A pending pod's volumes, as they stand: ``waiting``, when set, is why no node
    takes it now (a claim not found, being deleted, or bound by the PV controller
    first); else the node must match each of ``bound`` (the node affinity of a PV bound
    to one of its claims) and have a choice for each of ``unbound``."""

    waiting: str = ""
    bound: tuple[Terms, ...] = ()
    unbound: tuple[ClaimChoices, ...] = ()
    # Its claims of the ReadWriteOncePod access mode (namespace/name): no other pod may
    # use them, on any node.
    single_pod: tuple[str, ...] = ()
    # The volumes it attaches of CSI drivers that some node limits, as (driver, volume):
    # a node takes it while its volumes of each driver, these among them, stay within
    # the node's limit (``NodeVolumes``).
    attaches: tuple[tuple[str, str], ...] = ()

    @property
    def binds_claims(self) -> bool:
        """Does a pod of these needs bind claims where it goes (a free PV, which the next
        pod then cannot have; a claim, which a pod sharing it then must follow; a claim
        no other pod may use; a volume that a node's limit counts)?"""
        return bool(self.unbound or self.single_pod or self.attaches)


@dataclass(frozen=True, slots=True)
class NodeVolumes:
    """What the pods on nodes (any scheduler's, bound or being bound, not finished) hold
    of volumes, for the pending pods' ``VolumeNeeds``: the claims they use (namespace/
    name), and per node the volumes of each CSI driver attached and how many of them
    its CSINode lets it attach (a driver it does not name: any number)."""

    in_use: frozenset[str] = frozenset()
    attached: Mapping[str, Mapping[str, frozenset[str]]] = field(default_factory=dict)
    limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)


def matches_node(terms: Terms | None, node: str, labels: dict[str, str]) -> bool:
    """Does the node named ``node`` with ``labels`` match any of ``terms`` (None: any)?"""
    if terms is None:
        return True
    return any(_term_matches(term, node, labels) for term in terms)


def _term_matches(term: NodeSelectorTerm, node: str, labels: dict[str, str]) -> bool:
    if not term.match_expressions and not term.match_fields:
        return False
    for req in term.match_fields:
        if req.key != NODE_NAME_FIELD or not requirement_matches(req, {NODE_NAME_FIELD: node}):
            return False
    return all(requirement_matches(req, labels) for req in term.match_expressions)


@dataclass(slots=True)
class PlannedVolumes:
    """What a plan of placements binds (the reserve action's plan of where a job's
    tasks go once nodes drain), as a session's placements would: a claim shared by
    its tasks is bound for the node of the first, a PV goes to one task, a claim of the
    ReadWriteOncePod access mode to one task, and a node attaches no more volumes of a
    driver than ``limits`` (``NodeVolumes.limits``) let it (its pods' gone, drained)."""

    limits: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    _claims: dict[str, int] = field(default_factory=dict)  # claim -> node (index)
    _taken: set[str] = field(default_factory=set)
    _single: set[str] = field(default_factory=set)  # ReadWriteOncePod claims planned
    _attached: dict[tuple[int, str], set[str]] = field(default_factory=dict)

    def node_for(self, task: TaskInfo) -> int | None:
        """The node a claim of ``task`` is bound for by the plan so far (None: none)."""
        needs = task.template.volumes
        for choices in needs.unbound if needs is not None else ():
            node = self._claims.get(choices.claim)
            if node is not None:
                return node
        return None

    def take(self, task: TaskInfo, node: int, name: str, labels: dict[str, str]) -> bool:
        """Plan ``task`` on ``node`` (named ``name``, with ``labels``): its claims bound
        there, each to a PV the plan has not taken or to a volume made there; False
        (nothing planned) when one cannot be."""
        needs = task.template.volumes
        if needs is None:
            return True
        if self._single.intersection(needs.single_pod):
            return False  # (a claim only one pod may use: planned for another)
        attached = self._attaching(needs, node, name)
        if attached is None:
            return False
        claims: dict[str, int] = {}
        taken: set[str] = set()
        for choices in needs.unbound:
            bound_for = self._claims.get(choices.claim, claims.get(choices.claim))
            if bound_for is not None:
                if bound_for != node:
                    return False
                continue
            volume = next(
                (
                    volume
                    for volume, terms in choices.volumes
                    if volume not in self._taken
                    and volume not in taken
                    and matches_node(terms, name, labels)
                ),
                None,
            )
            if volume is not None:
                taken.add(volume)
            elif not (choices.provisioned and matches_node(choices.topologies, name, labels)):
                return False
            claims[choices.claim] = node
        self._claims.update(claims)
        self._taken.update(taken)
        self._single.update(needs.single_pod)
        self._attached.update(attached)
        return True

    def _attaching(
        self, needs: VolumeNeeds, node: int, name: str
    ) -> dict[tuple[int, str], set[str]] | None:
        """The volumes the plan attaches on ``node`` (named ``name``) of each driver
        limited there, with ``needs``'s; None when one would be past its limit."""
        limits = self.limits.get(name)
        found: dict[tuple[int, str], set[str]] = {}
        for driver, volume in needs.attaches if limits else ():
            limit = limits.get(driver) if limits else None
            if limit is None:
                continue
            held = found.get((node, driver))
            if held is None:
                held = found[(node, driver)] = set(self._attached.get((node, driver), ()))
            held.add(volume)
            if len(held) > limit:
                return None
        return found
