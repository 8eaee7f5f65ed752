"""Borrowing (DESIGN §14): the proportion plugin's answer to "may this queue, over its
deserved share, take room for this task, and whose room is it?", with ``borrowing: true``
(false, kube-batch's, keeps a queue's deserved share a cap while it is over it).

The allocate action asks it only after every queue within its deserved share has had
its turn: what is idle then is room that no such queue can use now (its gangs are too
large for it, or it asks for nothing). A queue over its share may take that room, and
the answer names the queue whose unused deserved share it uses (the lender: nearest
relatives first in a tree, the one with most unused room among them), so that the
borrowed group can be marked and reclaimed first when the lender asks again.

Limits, each resource on its own:
- the borrower's capability, and every ancestor's (the ``allocatable`` test, asked
  beside this one), and no other subtree's unused guarantee (the same);
- ``spec.borrowingLimit``: how far the queue, and each ancestor that sets one, may
  go beyond its deserved share;
- ``spec.lendingLimit``: how much of a lender's unused room may leave its subtree.
  A lender's room here is its nominal share: what it would deserve if every queue
  asked for the whole cluster (weights, guarantees and capabilities as they are), so
  that an idle lender still owns room to lend or keep. What it holds, and what it
  may lend, come off that; the rest is kept, and no borrower outside it may take it.
"""

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

import numpy as np

from kbatch.operators.scheduler.core.framework.info import QueueInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.queue_tree import ROOT, TreeQueue, build_tree
from kbatch.operators.scheduler.core.framework.resources import EPSILON
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.plugins.arguments import boolean, refuse_unknown
from kbatch.operators.scheduler.core.plugins.proportion_tree import TreeShares

ARGUMENT = "borrowing"


def parse_arguments(arguments: dict[str, object]) -> bool:
    """The proportion plugin's arguments: whether queues borrow (``borrowing``); a
    ValueError names a bad argument."""
    refuse_unknown(arguments, {ARGUMENT}, "proportion")
    return boolean(arguments, ARGUMENT, False)


class Shares(Protocol):
    """A queue's shares as the proportion plugin keeps them, current through the session."""

    allocated: np.ndarray
    deserved: np.ndarray
    capability: np.ndarray


def lend(
    session: Session, shares: Mapping[str, Shares], tree: TreeShares | None, mask: np.ndarray
) -> None:
    """Register the proportion plugin's ``lender`` on ``session`` (``borrowing: true``).
    What answers it is made at the first question: in most sessions no queue over its
    share waits, and no one asks. (The arrays it reads are the plugin's own, changed in
    place, so made later it answers as made at the open.)"""
    made: list[FlatLending | TreeLending] = []

    def lender(queue: QueueInfo, task: TaskInfo) -> str | None:
        if not made:
            arrays = {n: (q.allocated, q.deserved, q.capability) for n, q in shares.items()}
            made.append(lending(session.queues, arrays, tree, session.total * mask))
        return made[0].lender(queue.name, task.request * mask)

    session.add_lender_fn(lender)


def lending(
    queues: Mapping[str, QueueInfo],
    shares: Mapping[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
    tree: TreeShares | None,
    total: np.ndarray,
) -> "FlatLending | TreeLending":
    """What answers ``lender`` for a session: ``shares`` by queue, the proportion
    plugin's (allocated, deserved, capability) arrays, kept current by it; ``tree``
    its tree's shares, None for flat queues."""
    if tree is not None:
        return TreeLending(queues, tree, total)
    nominal = None
    if any(q.lending_limit is not None for q in queues.values()):
        asks = np.full(len(total), np.inf)  # flat, the tree's shares are the plugin's
        flat = [
            TreeQueue(n, None, queues[n].weight, s[2], None, None, asks) for n, s in shares.items()
        ]
        nodes = build_tree(flat, total, tuple(str(i) for i in range(len(total)))).nodes
        nominal = {n: nodes[n].deserved for n in shares}
    held = {n: (s[0], s[1]) for n, s in shares.items()}
    return FlatLending(queues, held, total, nominal)


class FlatLending:
    """Borrowing between flat queues: ``shares`` by queue, (allocated, deserved) arrays
    kept current by the plugin; ``nominal``: each queue's nominal share (only where some
    queue sets a lending limit, else None)."""

    def __init__(
        self,
        queues: Mapping[str, QueueInfo],
        shares: Mapping[str, tuple[np.ndarray, np.ndarray]],
        total: np.ndarray,
        nominal: Mapping[str, np.ndarray] | None,
    ) -> None:
        self.queues = queues
        self.shares = shares
        self.total = total
        self.nominal = nominal

    def lender(self, name: str, request: np.ndarray) -> str | None:
        allocated, deserved = self.shares[name]
        used = request > EPSILON
        limit = self.queues[name].borrowing_limit
        if limit is not None and _past(allocated + request - deserved, limit, used):
            return None
        if self.nominal is not None:
            others = [n for n in self.shares if n != name]
            free = self.total - np.sum([self.shares[n][0] for n in self.shares], axis=0)
            kept = _kept(self.queues, self.shares, self.nominal, others)
            if _past(request, free - kept, used):
                return None
        unused = {n: s[1] - s[0] for n, s in self.shares.items() if n != name}
        return _most_unused(unused, request, self.total) or ROOT


class TreeLending:
    """Borrowing in a queue tree (``TreeShares``, kept current by the plugin)."""

    def __init__(self, queues: Mapping[str, QueueInfo], tree: TreeShares, total: np.ndarray):
        self.queues = queues
        self.tree = tree
        self.total = total
        lends = any(q.lending_limit is not None for q in queues.values())
        self.nominal = _tree_nominal(tree, total) if lends else None

    def lender(self, name: str, request: np.ndarray) -> str | None:
        tree, allocated = self.tree, self.tree.allocated
        path = tree.paths.get(name)
        if path is None:
            return None
        used = request > EPSILON
        for n in path:
            limit = self.queues[n].borrowing_limit if n in self.queues else None
            deserved = tree.tree.nodes[n].deserved
            if limit is not None and _past(allocated[n] + request - deserved, limit, used):
                return None
        rings = _rings(tree, path)
        if self.nominal is not None:
            free = tree.tree.nodes[ROOT].deserved - allocated[ROOT]
            kept = np.zeros(len(request))
            for ring in rings:
                for top in ring:  # the most any lender inside that subtree keeps
                    inside = [q for q in tree.tree.subtree(top) if q in self.queues]
                    shares = {q: (allocated[q], tree.tree.nodes[q].deserved) for q in inside}
                    kept += _kept(self.queues, shares, self.nominal, inside, np.maximum)
            if _past(request, free - kept, used):
                return None
        for ring in rings:  # nearest relatives first
            unused = {n: tree.tree.nodes[n].deserved - allocated[n] for n in ring}
            lender = _most_unused(unused, request, self.total)
            if lender is not None:
                return lender
        return ROOT


def _rings(tree: TreeShares, path: list[str]) -> list[list[str]]:
    """The subtrees off ``path`` (a leaf and its ancestors), nearest first: the leaf's
    siblings, then its parent's, and so on up to the root's children."""
    rings = []
    for inner, ancestor in zip(path, [*path[1:], ROOT], strict=True):
        ring = [c for c in tree.tree.nodes[ancestor].children if c != inner]
        if ring:
            rings.append(ring)
    return rings


def _past(amount: np.ndarray, bound: np.ndarray, used: np.ndarray) -> bool:
    """Does ``amount`` go past ``bound`` in a resource the request uses?"""
    return bool((used & (amount > bound + EPSILON)).any())


def _kept_by(queue: QueueInfo, held: np.ndarray, nominal: np.ndarray) -> np.ndarray:
    """What of ``queue``'s nominal share, unused, may not leave its subtree."""
    assert queue.lending_limit is not None
    return np.maximum(nominal - held - queue.lending_limit, 0.0)


def _kept(
    queues: Mapping[str, QueueInfo],
    shares: Mapping[str, tuple[np.ndarray, np.ndarray]],
    nominal: Mapping[str, np.ndarray],
    names: list[str],
    combine: Callable[[np.ndarray, np.ndarray], np.ndarray] = np.add,
) -> np.ndarray:
    """What the lending limits of ``names`` keep in their subtrees, combined: added up
    (queues side by side each keep their own), or the most of them (``np.maximum``:
    queues on one line of ancestors keep the same room)."""
    dims = len(next(iter(nominal.values())))
    kept = np.zeros(dims)
    for n in names:
        if queues[n].lending_limit is not None and n in nominal:
            kept = combine(kept, _kept_by(queues[n], shares[n][0], nominal[n]))
    return kept


def _most_unused(
    unused: Mapping[str, np.ndarray], request: np.ndarray, total: np.ndarray
) -> str | None:
    """The queue with the most unused deserved room in the resource ``request`` asks the
    most of (for the cluster's size), if any has some; None otherwise."""
    if not unused:
        return None
    with np.errstate(divide="ignore", invalid="ignore"):
        part = np.where(total > EPSILON, request / total, 0.0)
    dim = int(np.argmax(part))
    name, most = max(unused.items(), key=lambda item: float(item[1][dim]))
    return name if float(most[dim]) > EPSILON else None


def _tree_nominal(tree: TreeShares, total: np.ndarray) -> dict[str, np.ndarray]:
    """Each queue's nominal share in the tree: its deserved share were every leaf to ask
    for the whole cluster."""
    asks = np.full(len(total), np.inf)
    asking = [q if q.request is None else replace(q, request=asks) for q in tree.given]
    nominal = build_tree(asking, total, tree.tree.resources)
    return {name: node.deserved for name, node in nominal.nodes.items()}
