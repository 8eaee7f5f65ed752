"""What a pending pod's persistent volumes bar, for the predicates plugin: masks over all
nodes per ``VolumeNeeds``, within one session.

A PV that a task placed in the session would take (the first free one that fits its
claim on its node, as its bind will choose: ``kbatch.cluster.volumes.bind_writes``) is
free no longer for the tasks placed after it, and free again if that placement is
undone (a gang's statement discarded): two pods that need one node's only local disk
are not both placed there, and a gang is never bound half for the want of a PV. The
placement asks afresh, over all nodes, for pods whose needs take PVs
(``VolumeNeeds.takes_volumes``: ``placement.Placer``), since a PV taken changes the
answers of every node it reaches.
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
    """The masks of what ``VolumeNeeds`` bar (kept while no PV is taken or freed), and
    the PVs the session's placed tasks take, by task uid."""

    def __init__(self, index: NodeIndex) -> None:
        self.index = index
        self._masks: dict[VolumeNeeds, Failures] = {}
        self._taken: set[str] = set()
        self._by_task: dict[str, list[str]] = {}

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
        """``task`` was placed: it takes, for each of its claims, the first free PV that
        fits it on its node (none where it is to be provisioned)."""
        needs = task.template.volumes
        if needs is None or not needs.takes_volumes or task.node == NO_NODE:
            return
        taken = []
        for choices in needs.unbound:
            for name, terms in choices.volumes:
                if name in self._taken or name in taken:
                    continue
                if terms is None or self.index.terms_mask(terms)[task.node]:
                    taken.append(name)
                    break
        if taken:
            self._taken.update(taken)
            self._by_task[task.uid] = taken
            self._masks.clear()

    def deallocated(self, task: TaskInfo) -> None:
        """``task``'s placement was undone: the PVs it took are free again."""
        freed = self._by_task.pop(task.uid, None)
        if freed:
            self._taken.difference_update(freed)
            self._masks.clear()
