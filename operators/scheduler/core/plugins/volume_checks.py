"""What a pending pod's persistent volumes bar, for the predicates plugin: masks over all
nodes per ``VolumeNeeds``, within one session.

A task placed in the session binds its claims bound on first use where it goes, as its
bind will (``kbatch.cluster.volumes.bind_writes``): the PV it takes (the first free one
that fits the claim on its node) is free no longer for the tasks placed after it, and
a pod sharing the claim must go to the same node; both undone if that placement is
(a gang's statement discarded). So two pods that need one node's only local disk are
not both placed there, two that share a claim are not placed apart, and a gang is
never bound half for the want of a volume. The placement asks afresh, over all nodes,
for pods whose needs bind claims (``VolumeNeeds.binds_claims``: ``placement.Placer``),
since a claim bound changes the answers of every node.
"""

import numpy as np

from kbatch.operators.scheduler.core.framework.info import NO_NODE, TaskInfo
from kbatch.operators.scheduler.core.framework.signatures import Failures
from kbatch.operators.scheduler.core.framework.volume_needs import (
    BIND_CONFLICT,
    NODE_CONFLICT,
    ClaimChoices,
    VolumeNeeds,
)
from kbatch.operators.scheduler.core.plugins.node_index import NodeIndex


class VolumeChecks:
    """The masks of what ``VolumeNeeds`` bar (kept while no claim is bound or freed),
    the PVs the session's placed tasks take, and the claims they bind, with their node."""

    def __init__(self, index: NodeIndex) -> None:
        self.index = index
        self._masks: dict[VolumeNeeds, Failures] = {}
        self._taken: set[str] = set()
        self._claims: dict[str, int] = {}  # claim -> the node it is bound for
        self._by_task: dict[str, tuple[list[str], list[str]]] = {}  # uid -> (PVs, claims)

    def failures(self, needs: VolumeNeeds) -> Failures:
        """(reason, mask over all nodes), each node once: while a claim waits, every
        node for that reason alone (as kube-scheduler's PreFilter fails a pod whole)."""
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
        return found

    def _bindable(self, choices: ClaimChoices) -> np.ndarray:
        """The nodes where the claim may be bound: a PV not taken reaches them, or a
        volume may be made there."""
        index = self.index
        where = np.zeros(index.size, dtype=bool)
        node = self._claims.get(choices.claim)
        if node is not None:  # bound for a node by a task placed before
            where[node] = True
            return where
        for name, terms in choices.volumes:
            if name not in self._taken:
                if terms is None:
                    return np.ones(index.size, dtype=bool)
                where |= index.terms_mask(terms)
        if choices.provisioned:
            if choices.topologies is None:
                return np.ones(index.size, dtype=bool)
            where |= index.terms_mask(choices.topologies)
        return where

    def allocated(self, task: TaskInfo) -> None:
        """``task`` was placed: it binds, for each of its claims not bound for a node by
        a task before it, the first free PV that fits it on its node (none where it is
        to be provisioned), and the claim for that node."""
        needs = task.template.volumes
        if needs is None or not needs.unbound or task.node == NO_NODE:
            return
        taken: list[str] = []
        claims: list[str] = []
        for choices in needs.unbound:
            if choices.claim in self._claims:
                continue
            for name, terms in choices.volumes:
                if name in self._taken or name in taken:
                    continue
                if terms is None or self.index.terms_mask(terms)[task.node]:
                    taken.append(name)
                    break
            claims.append(choices.claim)
        if claims:
            self._taken.update(taken)
            self._claims.update(dict.fromkeys(claims, task.node))
            self._by_task[task.uid] = (taken, claims)
            self._masks.clear()

    def deallocated(self, task: TaskInfo) -> None:
        """``task``'s placement was undone: what it bound is free again."""
        bound = self._by_task.pop(task.uid, None)
        if bound:
            self._taken.difference_update(bound[0])
            for claim in bound[1]:
                del self._claims[claim]
            self._masks.clear()
