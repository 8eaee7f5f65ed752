"""What a pending pod's persistent volumes bar, for the predicates plugin: masks over all
nodes per ``VolumeNeeds``, within one session.

A task placed in the session binds its claims bound on first use where it goes, as its
bind will (``kbatch.cluster.volumes.bind_writes``): the PV it takes (the first free one
that fits the claim on its node) is free no longer for the tasks placed after it, and
a pod sharing the claim must go to the same node; both undone if that placement is
(a gang's statement discarded). So two pods that need one node's only local disk are
not both placed there, two that share a claim are not placed apart, and a gang is
never bound half for the want of a volume. Likewise a task placed with a claim of the
ReadWriteOncePod access mode bars every node to the other pods that name it (as a pod
on a node that uses it does: ``NodeVolumes.in_use``), and its volumes count against its
node's CSI attach limits (``attach_limits``). The placement asks afresh, over all
nodes, for pods whose needs bind claims (``VolumeNeeds.binds_claims``:
``placement.Placer``), since a claim bound changes the answers of every node.
"""

import numpy as np

from kbatch.operators.scheduler.core.framework.info import NO_NODE, TaskInfo
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.signatures import Failures
from kbatch.operators.scheduler.core.framework.volume_needs import (
    BIND_CONFLICT,
    MAX_VOLUME_COUNT,
    NODE_CONFLICT,
    SINGLE_POD_CONFLICT,
    ClaimChoices,
    NodeVolumes,
    Terms,
    VolumeNeeds,
)
from kbatch.operators.scheduler.core.plugins.attach_limits import AttachCounts
from kbatch.operators.scheduler.core.plugins.node_index import NodeIndex


class VolumeChecks:
    """The masks of what ``VolumeNeeds`` bar (kept while no claim is bound or freed),
    the PVs the session's placed tasks take, and the claims they bind, with their node."""

    def __init__(self, index: NodeIndex, session: Session) -> None:
        self.index = index
        # Told of placements only once a pod with volumes is asked about (before any is
        # placed): a session without one makes no call per placement for them.
        self._session: Session | None = session
        self._masks: dict[VolumeNeeds, Failures] = {}
        self._taken: set[str] = set()
        # Each list of choices' PVs (the one tuple the claims of a shape share: by id,
        # kept with it) and where those not taken reach.
        self._reaches: dict[int, tuple[object, Reach]] = {}
        self._claims: dict[str, int] = {}  # claim -> the node it is bound for
        self._by_task: dict[str, tuple[list[str], list[str]]] = {}  # uid -> (PVs, claims)
        # What the pods on nodes hold; the ReadWriteOncePod claims of the tasks placed (->
        # how many: one, unless a gang shares one it cannot have), and the volumes they
        # attach (made once a pod that attaches one is asked about).
        self._use = session.node_volumes or NodeVolumes()
        self._nodes = session.nodes.index
        self._single: dict[str, int] = {}
        self._attach: AttachCounts | None = None
        self._holding: dict[str, tuple[VolumeNeeds, int]] = {}  # uid -> (needs, node)

    def failures(self, needs: VolumeNeeds) -> Failures:
        """(reason, mask over all nodes), each node once: while a claim waits, every
        node for that reason alone (as kube-scheduler's PreFilter fails a pod whole)."""
        if self._session is not None:
            self._session.add_event_handler(self.allocated, self.deallocated)
            self._session = None
        found = self._masks.get(needs)
        if found is None:
            size = self.index.size
            if needs.waiting:
                found = [(needs.waiting, np.ones(size, dtype=bool))]
            else:
                conflict = np.zeros(size, dtype=bool)
                for terms in needs.bound:
                    conflict |= ~self.index.terms_mask(terms)
                unbound = np.zeros(size, dtype=bool)
                for choices in needs.unbound:
                    unbound |= ~self._bindable(choices)
                found = [
                    (reason, mask)
                    for reason, mask in (
                        (NODE_CONFLICT, conflict),
                        (BIND_CONFLICT, unbound & ~conflict),
                    )
                    if mask.any()
                ]
            self._masks[needs] = found
        if needs.single_pod or needs.attaches:
            return self._restricted(needs, found)
        return found

    def _restricted(self, needs: VolumeNeeds, found: Failures) -> Failures:
        """``found`` after what kube-scheduler checks before VolumeBinding: a claim only
        one pod may use, which another has, fails every node; then the nodes past a CSI
        attach limit with the pod's volumes."""
        in_use, single = self._use.in_use, self._single
        if any(claim in in_use or single.get(claim) for claim in needs.single_pod):
            return [(SINGLE_POD_CONFLICT, np.ones(self.index.size, dtype=bool))]
        if not needs.attaches:
            return found
        over = self._counts().over(needs.attaches)
        if not over.any():
            return found
        rest = [(reason, mask & ~over) for reason, mask in found]
        return [(MAX_VOLUME_COUNT, over)] + [(r, m) for r, m in rest if m.any()]

    def _counts(self) -> AttachCounts:
        if self._attach is None:
            self._attach = AttachCounts(self._use, self._nodes, self.index.size)
        return self._attach

    def _bindable(self, choices: ClaimChoices) -> np.ndarray:
        """The nodes where the claim may be bound: a PV not taken reaches them, or a
        volume may be made there."""
        index = self.index
        node = self._claims.get(choices.claim)
        if node is not None:  # bound for a node by a task placed before
            where = np.zeros(index.size, dtype=bool)
            where[node] = True
            return where
        if choices.provisioned and choices.topologies is None:
            return np.ones(index.size, dtype=bool)
        where = self._reach(choices).nodes()
        if choices.provisioned:
            where = where | index.terms_mask(choices.topologies or ())
        return where

    def _reach(self, choices: ClaimChoices) -> "Reach":
        kept = self._reaches.get(id(choices.volumes))
        if kept is None:
            reach = Reach(choices.volumes, self.index, self._taken)
            self._reaches[id(choices.volumes)] = (choices.volumes, reach)
            return reach
        return kept[1]

    def allocated(self, task: TaskInfo) -> None:
        """``task`` was placed: it binds, for each of its claims not bound for a node by
        a task before it, the first free PV that fits it on its node (none where it is
        to be provisioned), and the claim for that node."""
        needs = task.template.volumes
        if needs is None or task.node == NO_NODE:
            return
        if needs.single_pod or needs.attaches:
            self._hold(task, needs)
        if not needs.unbound:
            return
        taken: list[str] = []
        claims: list[str] = []
        for choices in needs.unbound:
            if choices.claim in self._claims:
                continue
            if choices.volumes:
                volume = self._reach(choices).first_on(task.node, taken)
                if volume is not None:
                    taken.append(volume)
            claims.append(choices.claim)
        if claims:
            self._take(taken, True)
            self._claims.update(dict.fromkeys(claims, task.node))
            self._by_task[task.uid] = (taken, claims)
            self._masks.clear()

    def _hold(self, task: TaskInfo, needs: VolumeNeeds) -> None:
        """``task`` (placed) holds its claims only one pod may use and its volumes."""
        for claim in needs.single_pod:
            self._single[claim] = self._single.get(claim, 0) + 1
        if needs.attaches:
            self._counts().place(needs.attaches, task.node)
        self._holding[task.uid] = (needs, task.node)

    def deallocated(self, task: TaskInfo) -> None:
        """``task``'s placement was undone: what it bound or held is free again."""
        held = self._holding.pop(task.uid, None)
        if held is not None:
            needs, node = held
            for claim in needs.single_pod:
                self._single[claim] -= 1
            if needs.attaches:
                self._counts().unplace(needs.attaches, node)
        bound = self._by_task.pop(task.uid, None)
        if bound:
            self._take(bound[0], False)
            for claim in bound[1]:
                del self._claims[claim]
            self._masks.clear()

    def _take(self, volumes: list[str], taken: bool) -> None:
        """Mark ``volumes`` taken (or free again, ``taken`` False), where they reach too."""
        for volume in volumes:
            if taken:
                self._taken.add(volume)
            else:
                self._taken.discard(volume)
            for _, reach in self._reaches.values():
                reach.mark(volume, taken)


class Reach:
    """The PVs of one list of choices (smallest first) as rows over the nodes each
    reaches, which are free, and how many free ones reach each node: where a claim of
    that list may be bound, and its first PV on a node, without a walk over every PV
    (a cluster of local disks has thousands, for as many pods)."""

    def __init__(
        self, volumes: tuple[tuple[str, Terms | None], ...], index: NodeIndex, taken: set[str]
    ) -> None:
        self.names = [name for name, _ in volumes]
        self.row = {name: i for i, name in enumerate(self.names)}
        self.reach = np.ones((len(volumes), index.size), dtype=bool)
        for i, (_, terms) in enumerate(volumes):
            if terms is not None:
                self.reach[i] = index.terms_mask(terms)
        self.free = np.array([name not in taken for name in self.names], dtype=bool)
        self.counts = self.reach[self.free].sum(axis=0, dtype=np.int64)

    def nodes(self) -> np.ndarray:
        """The nodes a free PV reaches."""
        return self.counts > 0

    def first_on(self, node: int, besides: list[str]) -> str | None:
        """The first free PV that reaches ``node``, not one of ``besides``."""
        for row in np.flatnonzero(self.free & self.reach[:, node]):
            name = self.names[row]
            if name not in besides:
                return name
        return None

    def mark(self, volume: str, taken: bool) -> None:
        row = self.row.get(volume)
        if row is not None and self.free[row] == taken:
            self.free[row] = not taken
            if taken:
                self.counts -= self.reach[row]
            else:
                self.counts += self.reach[row]
