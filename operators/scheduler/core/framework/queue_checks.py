"""What the queue tree allows (DESIGN §14), as pure questions on a ``QueueTree``.

- ``held_back``: may a leaf queue place a request? Not if it, or an ancestor, would
  go over its capability, or over its deserved share in a rationed resource, or if
  the room left is another subtree's unused guarantee. The answer names the queue
  that holds it back and why (``team-a is at its capability cpu 64``), for the
  groups' conditions and ``kbatch explain``.
- ``victim_rings`` and ``may_lose``: reclaim takes back from the nearest relatives
  first (the leaf's siblings' subtrees, then its parent's siblings', and so on up to
  the root's children), and never leaves a victim, or any ancestor of it below the
  queue it shares with the reclaimer, below its deserved share.

``allocated`` is by queue, each with its subtree's (``queue_tree.subtree_sums``);
``rationed`` the resources the queues really share (``queue_tree.rationed``).
Amounts are the scheduler's (cpu in millicores, the rest in base units).
"""

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from kbatch.api.quantity import format_quantity
from kbatch.operators.scheduler.core.framework.queue_tree import ROOT, QueueTree
from kbatch.operators.scheduler.core.framework.resources import EPSILON

CAPABILITY = "capability"
DESERVED = "deserved"
GUARANTEE = "guarantee"


@dataclass(frozen=True, slots=True)
class HeldBack:
    """The queue that holds a request back: ``kind`` is ``capability`` or ``deserved``
    (the queue would go over it; ``amount`` is that bound), or ``guarantee`` (the room
    left is kept for ``queue``'s unused guarantee, ``amount`` of it), in ``resource``."""

    queue: str
    kind: str
    resource: str
    amount: float

    def __str__(self) -> str:
        amount = f"{self.resource} {format_quantity(self.resource, self.amount)}"
        if self.kind == CAPABILITY:
            return f"{self.queue} is at its capability {amount}"
        if self.kind == DESERVED:
            return f"{self.queue} is at its deserved share {amount}"
        return f"{self.queue}'s unused guarantee keeps {amount} free"


def held_back(
    tree: QueueTree,
    leaf: str,
    request: np.ndarray,
    allocated: Mapping[str, np.ndarray],
    rationed: np.ndarray,
) -> HeldBack | None:
    """Why ``leaf`` may not place ``request`` now, or None. Capabilities first (a hard
    cap, on the whole path, nearest first), then deserved shares (which borrowing may
    lift), then the other subtrees' unused guarantees."""
    return (
        over_capability(tree, leaf, request, allocated)
        or over_deserved(tree, leaf, request, allocated, rationed)
        or into_guarantee(tree, leaf, request, allocated)
    )


def over_capability(
    tree: QueueTree, leaf: str, request: np.ndarray, allocated: Mapping[str, np.ndarray]
) -> HeldBack | None:
    """The nearest of ``leaf`` and its ancestors that ``request`` would take over its
    capability, in a resource the request uses."""
    used = request > EPSILON
    for name in tree.path(leaf):
        cap = tree.nodes[name].capability
        over = used & (allocated[name] + request > cap + EPSILON)
        if over.any():
            dim = int(over.argmax())
            return HeldBack(name, CAPABILITY, tree.resources[dim], float(cap[dim]))
    return None


def over_deserved(
    tree: QueueTree,
    leaf: str,
    request: np.ndarray,
    allocated: Mapping[str, np.ndarray],
    rationed: np.ndarray,
) -> HeldBack | None:
    """The nearest of ``leaf`` and its ancestors that ``request`` would take over its
    deserved share, in a rationed resource the request uses. (Where no queue is short
    of a resource, a queue's deserved share of it is just its demand: no limit.)"""
    checked = (request > EPSILON) & rationed
    for name in tree.path(leaf):
        deserved = tree.nodes[name].deserved
        over = checked & (allocated[name] + request > deserved + EPSILON)
        if over.any():
            dim = int(over.argmax())
            return HeldBack(name, DESERVED, tree.resources[dim], float(deserved[dim]))
    return None


def into_guarantee(
    tree: QueueTree, leaf: str, request: np.ndarray, allocated: Mapping[str, np.ndarray]
) -> HeldBack | None:
    """The subtree whose unused guarantee ``request`` would eat into: the room the
    cluster has left (the root's deserved share less what all queues hold), less what
    the subtrees off ``leaf``'s path are guaranteed and do not hold, is too small. The
    subtree named is the one keeping the most of that resource, with what it keeps."""
    used = request > EPSILON
    path = tree.path(leaf)
    kept_by: dict[str, np.ndarray] = {}
    for ancestor in [*path[1:], ROOT]:
        for child in tree.nodes[ancestor].children:
            if child not in path:
                unused = tree.nodes[child].guarantee - allocated[child]
                kept_by[child] = np.maximum(unused, 0.0)
    if not kept_by:
        return None
    free = tree.nodes[ROOT].deserved - allocated[ROOT]
    kept = np.sum(list(kept_by.values()), axis=0)
    short = used & (request > free - kept + EPSILON) & (kept > EPSILON)
    if not short.any():
        return None
    dim = int(short.argmax())
    keeper = max(kept_by, key=lambda name: float(kept_by[name][dim]))
    return HeldBack(keeper, GUARANTEE, tree.resources[dim], float(kept_by[keeper][dim]))


def victim_rings(tree: QueueTree, reclaimer: str) -> list[list[str]]:
    """The leaves reclaim may take from for ``reclaimer``, nearest relatives first: the
    leaves under its parent (but itself), then those under its grandparent not yet
    named, and so on up to the root. A ring with no leaves is left out."""
    rings: list[list[str]] = []
    inner = tree.path(reclaimer)[0]
    for ancestor in [*tree.path(reclaimer)[1:], ROOT]:
        ring = [
            name
            for child in tree.nodes[ancestor].children
            if child != inner
            for name in tree.subtree(child)
            if tree.is_leaf(name)
        ]
        if ring:
            rings.append(ring)
        inner = ancestor
    return rings


def keeps_share(
    allocated: np.ndarray, deserved: np.ndarray, request: np.ndarray, rationed: np.ndarray
) -> bool:
    """Does a queue holding ``allocated`` keep its ``deserved`` share without ``request``?
    Checked in each resource the request uses that is rationed or that the queue holds
    more of than it deserves (elsewhere its deserved share is just its demand)."""
    checked = (request > EPSILON) & (rationed | (allocated > deserved + EPSILON))
    return bool(np.all(allocated[checked] - request[checked] >= deserved[checked] - EPSILON))


def may_lose(
    tree: QueueTree,
    victim: str,
    request: np.ndarray,
    allocated: Mapping[str, np.ndarray],
    rationed: np.ndarray,
    reclaimer: str | None = None,
) -> bool:
    """May leaf ``victim``, over its deserved share, give back ``request``, keeping its
    deserved share, and each ancestor keeping its own? With a ``reclaimer``, the
    ancestors checked stop below the first one they share: what a shared ancestor
    holds does not change when the room moves inside it."""
    node = tree.nodes[victim]
    if not bool(np.any(allocated[victim] > node.deserved + EPSILON)):
        return False
    shared = set(tree.path(reclaimer)) if reclaimer is not None else set()
    for name in tree.path(victim):
        if name in shared:
            break
        if not keeps_share(allocated[name], tree.nodes[name].deserved, request, rationed):
            return False
    return True
