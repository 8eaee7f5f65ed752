"""The proportion plugin's answers where queues form a tree (DESIGN §14).

The tree's deserved shares (``framework.queue_tree``) replace the flat water-filling,
and each answer reads the leaf's whole path up to the root:

- overused: the leaf, or an ancestor, holds more than its deserved share;
- allocatable: no queue on the path would go over its capability, and the room the
  placement takes is not another subtree's unused guarantee (``queue_checks``);
- enqueueable: refused past any capability on the path; admitted, even without idle
  room, while the leaf and every ancestor stay within their deserved shares (reclaim
  can make that room), so enqueue never keeps out what reclaim would make room for;
  otherwise admitted on idle room only, and never on room that is another subtree's
  unused guarantee (what admitted groups are promised counted as held);
- reclaim: a leaf takes room back only while it and its ancestors stay within their
  deserved shares; a victim's leaf, over its share, gives back only while it and each
  of its ancestors below the one it shares with the reclaimer keep theirs.

Each queue's sums (allocated, request, reserved) are its subtree's, added up from the
leaves' own (a queue with children holds no groups: they are refused), and kept so as
tasks are placed and evicted: a leaf's change is added along its path.
"""

from collections.abc import Mapping

import numpy as np

from kbatch.operators.scheduler.core.framework import queue_checks
from kbatch.operators.scheduler.core.framework.info import QueueInfo
from kbatch.operators.scheduler.core.framework.queue_tree import (
    ROOT,
    QueueTree,
    TreeQueue,
    build_tree,
    rationed,
)
from kbatch.operators.scheduler.core.framework.resources import EPSILON, less_equal


def is_tree(queues: Mapping[str, QueueInfo]) -> bool:
    """Do the queues need the tree? Any parent, guarantee or explicit deserved share;
    without them the flat plugin's shares are the tree's, to the bit."""
    return any(
        q.parent is not None or q.guarantee is not None or q.claim is not None
        for q in queues.values()
    )


class TreeShares:
    """The tree of a session's queues and each queue's subtree sums.

    ``allocated``, ``request``, ``reserved``: by queue, the arrays the plugin's queue
    shares hold (changed in place here), plus the root's."""

    def __init__(
        self,
        queues: Mapping[str, QueueInfo],
        own: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
        total: np.ndarray,
        mask: np.ndarray,
        resources: tuple[str, ...],
    ) -> None:
        """``own``: by queue, its (capability, allocated, request, reserved) arrays, the
        leaves' as their groups add up; those of a queue with children are set here to
        its subtree's, in place."""
        has_children = {q.parent for q in queues.values() if q.parent is not None}
        given = []
        for name, queue in queues.items():
            capability, _, request, _ = own[name]
            given.append(
                TreeQueue(
                    name,
                    queue.parent,
                    queue.weight,
                    None if bool((capability == np.inf).all()) else capability,
                    None if queue.guarantee is None else queue.guarantee * mask,
                    None if queue.claim is None else queue.claim * mask,
                    None if name in has_children else request,
                )
            )
        self.given = given  # as the tree read them (borrowing's nominal shares)
        self.tree: QueueTree = build_tree(given, total, resources)
        dims = len(total)
        self.allocated: dict[str, np.ndarray] = {}
        self.request: dict[str, np.ndarray] = {}
        self.reserved: dict[str, np.ndarray] = {}
        for name in self.tree.nodes:
            if name in own and self.tree.is_leaf(name):
                _, self.allocated[name], self.request[name], self.reserved[name] = own[name]
            else:  # a parent (or the root): its subtree's, added below
                self.allocated[name] = _zeroed(own, name, 1, dims)
                self.request[name] = _zeroed(own, name, 2, dims)
                self.reserved[name] = _zeroed(own, name, 3, dims)
        for name in reversed(list(self.tree.nodes)):  # children before their parents
            parent = self.tree.nodes[name].parent
            if parent is not None:
                for sums in (self.allocated, self.request, self.reserved):
                    sums[parent] += sums[name]
        self.rationed = rationed(self.tree)
        self.paths = {name: self.tree.path(name) for name in self.tree.nodes if name != ROOT}
        # Any capability on a leaf's path: else allocatable asks only the guarantees.
        self.capped = {
            name: any(bool((self.tree.nodes[n].capability < np.inf).any()) for n in path)
            for name, path in self.paths.items()
        }
        self.guarded = any(bool((n.guarantee > EPSILON).any()) for n in self.tree.nodes.values())
        # The leaves allocatable never refuses (no capability on the path, no guarantee
        # anywhere): asked per task, so answered without the task's request.
        self.unchecked = frozenset(n for n in self.paths if not (self.capped[n] or self.guarded))
        # By queue, the sums a change of its own moves too: each ancestor's, the root's
        # (the arrays themselves, changed in place, never replaced: ``changed``).
        self.above = {
            name: tuple(self.allocated[n] for n in [*path[1:], ROOT])
            for name, path in self.paths.items()
        }
        self._root_only = (self.allocated[ROOT],)

    def deserved(self, name: str) -> np.ndarray | None:
        node = self.tree.nodes.get(name)
        return None if node is None else node.deserved

    def overused(self, name: str) -> bool:
        """Does ``name``, or an ancestor, hold more than its deserved share?"""
        nodes, allocated = self.tree.nodes, self.allocated
        for n in self.paths.get(name, ()):  # (a loop, not any(): asked per job)
            if (allocated[n] > nodes[n].deserved + EPSILON).any():
                return True
        return False

    def allocatable(self, name: str, request: np.ndarray) -> bool:
        if name not in self.paths:
            return True
        tree, allocated = self.tree, self.allocated
        if self.capped[name] and queue_checks.over_capability(tree, name, request, allocated):
            return False
        return not (self.guarded and queue_checks.into_guarantee(tree, name, request, allocated))

    def held_back(self, name: str, request: np.ndarray) -> queue_checks.HeldBack | None:
        """Which queue holds ``request`` of leaf ``name`` back now, and why (or None)."""
        if name not in self.paths:
            return None
        return queue_checks.held_back(self.tree, name, request, self.allocated, self.rationed)

    def enqueue_verdict(self, name: str, need: np.ndarray) -> tuple[str | None, bool]:
        """For a group of leaf ``name`` needing ``need``: the queue on its path whose
        capability it would pass (or None), and whether the leaf and every ancestor stay
        within their deserved shares with it."""
        within = True
        for n in self.paths.get(name, ()):
            node = self.tree.nodes[n]
            wanted = self.allocated[n] + self.reserved[n] + need
            if not less_equal(wanted, node.capability):
                return n, False
            within = within and less_equal(wanted, node.deserved)
        return None, within

    def within_once_drained(self, name: str, need: np.ndarray) -> bool:
        """Would a group of leaf ``name`` needing ``need`` be within the deserved shares
        of the leaf and every ancestor once what they run now has ended (what admitted
        groups are promised still counted)?"""
        return name in self.paths and all(
            less_equal(self.reserved[n] + need, self.tree.nodes[n].deserved)
            for n in self.paths[name]
        )

    def enqueue_into_guarantee(self, name: str, need: np.ndarray) -> queue_checks.HeldBack | None:
        """For a group of leaf ``name`` admitted on idle room alone (not within its
        shares): the subtree whose unused guarantee ``need`` would eat into, counting
        what admitted groups are promised as held (or None)."""
        if not self.guarded or name not in self.paths:
            return None
        held = {n: self.allocated[n] + self.reserved[n] for n in self.tree.nodes}
        return queue_checks.into_guarantee(self.tree, name, need, held)

    def enqueued(self, name: str, unplaced: np.ndarray) -> None:
        for n in self.paths.get(name, ()):
            self.reserved[n] += unplaced
        self.reserved[ROOT] += unplaced

    def may_reclaim_for(self, name: str, request: np.ndarray) -> bool:
        """Would leaf ``name`` stay within its deserved share with ``request`` added, in
        each dimension it uses? (Its ancestors are asked with the victim, in
        ``may_lose``: room taken back from a sibling does not move what they hold.)"""
        node = self.tree.nodes.get(name)
        if node is None:
            return False
        used = request > EPSILON
        held = self.allocated[name][used] + request[used]
        return bool(np.all(held <= node.deserved[used] + EPSILON))

    def may_lose(
        self, name: str, request: np.ndarray, reclaim: tuple[str, np.ndarray] | None
    ) -> bool:
        """May leaf ``name``, over its share, give back ``request`` for ``reclaim`` (the
        reclaiming leaf and its task's request)? The victim keeps its share, and so does
        each of its ancestors below the one it shares with the reclaimer; each of the
        reclaimer's ancestors below that one stays within its share with the task (the
        room moves out of one subtree into the other). Without ``reclaim``, every
        ancestor of the victim keeps its share."""
        if name not in self.paths:
            return False
        reclaimer = None
        if reclaim is not None and reclaim[0] in self.paths:
            reclaimer = reclaim[0]
        tree, allocated = self.tree, self.allocated
        if not queue_checks.may_lose(tree, name, request, allocated, self.rationed, reclaimer):
            return False
        if reclaim is None or reclaimer is None:
            return True
        shared = set(self.paths[name])
        wanted = reclaim[1]
        used = wanted > EPSILON
        for n in self.paths[reclaimer][1:]:
            if n in shared:
                break
            held = allocated[n][used] + wanted[used]
            if not bool(np.all(held <= tree.nodes[n].deserved[used] + EPSILON)):
                return False
        return True

    def may_give(
        self, victim: str, request: np.ndarray, taken: dict[str, np.ndarray], reclaimer: str
    ) -> bool:
        """May leaf ``victim`` give ``request`` back to leaf ``reclaimer``, the victims in
        ``taken`` (by queue on their paths) gone: ``queue_checks.may_lose``, each of its
        ancestors below the one it shares with the reclaimer keeping its share. If so,
        ``request`` is added to ``taken`` along its path."""
        path = self.paths.get(victim)
        if path is None or reclaimer not in self.paths:
            return False
        held = {n: self.allocated[n] - taken[n] if n in taken else self.allocated[n] for n in path}
        if not queue_checks.may_lose(self.tree, victim, request, held, self.rationed, reclaimer):
            return False
        for n in path:
            taken[n] = taken[n] + request if n in taken else request.copy()
        return True

    def changed(self, name: str, masked: np.ndarray, sign: float) -> None:
        """A task of leaf ``name`` placed (+1) or taken off (-1): its ancestors' and the
        root's sums follow (the leaf's own array is the plugin's, changed there).
        Asked per task placed: the arrays to change are looked up once (``above``)."""
        if sign > 0:
            for array in self.above.get(name, self._root_only):
                array += masked
        else:
            for array in self.above.get(name, self._root_only):
                array -= masked


def _zeroed(
    own: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    name: str,
    at: int,
    dims: int,
) -> np.ndarray:
    """The array of ``name``'s ``at`` sums (a parent's own, in place, or the root's new),
    set to zero to add the subtree up."""
    if name in own:
        array = own[name][at]
        array[:] = 0.0
        return array
    return np.zeros(dims)
