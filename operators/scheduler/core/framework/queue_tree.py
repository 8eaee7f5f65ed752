"""The queue tree (DESIGN §14): queues under their parents, and what each deserves.

Pure: queues in (amounts in the scheduler's units, one per resource), a tree out.
A queue names its parent in ``spec.parent``; absent (or Volcano's ``root``), it is
a top-level queue. A queue whose parent is missing, or that is on a cycle of
parents, is left out with a refusal naming ``spec.parent`` (so is every queue under
it); the rest of the tree works. Jobs belong in leaf queues; a queue's request is
its own groups', its subtree's request the sum over the subtree.

Deserved shares are worked out top down. The root's is the cluster's allocatable;
a queue's is divided among its children in three steps, each resource on its own:

1. guarantees: each child gets its guarantee (``spec.guarantee.resource``, or the
   sum of its children's if that is more, never above its capability), even while
   it asks for nothing: that room is kept for its subtree.
2. explicit deserved shares (Volcano's capacity plugin, ``spec.deserved``): each
   child gets its explicit share as far as it asks for it (up to its subtree's
   request and capability). It is a claim before the weights, not a reservation:
   what the child does not ask for now goes to its siblings, and is taken back by
   reclaim when it asks again.
3. weights: the rest is water-filled by ``spec.weight`` (``water_fill``), each child
   capped at min(its capability, its subtree's request), so that what one child
   does not take goes to its siblings before it leaves the team.

Where the guarantees, or the explicit shares, add up to more than the parent has,
each child gets a part in proportion to its own. Without parents, guarantees and
explicit shares, step 3 alone is the flat ``proportion`` plugin's deserved shares,
to the bit.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from kbatch.api.queue import ROOT_QUEUE
from kbatch.operators.scheduler.core.framework.resources import EPSILON
from kbatch.operators.scheduler.core.framework.water_fill import weighted_fill

ROOT = ROOT_QUEUE


@dataclass(frozen=True, slots=True)
class TreeQueue:
    """One Queue as the tree reads it. ``None``: not set (no parent: top level; no
    capability: no cap; no guarantee or explicit deserved share: none; no request:
    nothing asked)."""

    name: str
    parent: str | None = None
    weight: int = 1
    capability: np.ndarray | None = None
    guarantee: np.ndarray | None = None
    deserved: np.ndarray | None = None
    request: np.ndarray | None = None


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a queue is left out of the tree: the field at fault and why, for the queue's
    groups and for ``kbatch explain``."""

    queue: str
    field: str
    why: str
    cause: str = ""  # under a refused queue: the first refusal up the tree, as said

    def __str__(self) -> str:
        return f"{self.field}: {self.why}"


@dataclass(slots=True)
class Node:
    """A queue in the tree (the root too). ``guarantee`` is the subtree's (its own or its
    children's sum, if more, at most its capability); ``request`` the subtree's;
    ``claim`` its explicit deserved share (zeros where none); ``capability`` infinite
    where none."""

    name: str
    parent: str | None
    depth: int
    weight: float
    capability: np.ndarray
    guarantee: np.ndarray
    claim: np.ndarray
    request: np.ndarray
    children: list[str] = field(default_factory=list)
    deserved: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass(frozen=True, slots=True)
class QueueTree:
    """``nodes``: the root first, then every parent before its children (siblings in the
    order the queues were given); ``refused``: the queues left out, and why."""

    resources: tuple[str, ...]
    nodes: dict[str, Node]
    refused: dict[str, Refusal]

    def is_leaf(self, name: str) -> bool:
        return name in self.nodes and name != ROOT and not self.nodes[name].children

    def leaves(self) -> list[str]:
        return [name for name in self.nodes if self.is_leaf(name)]

    def path(self, name: str) -> list[str]:
        """``name`` and its ancestors, nearest first, without the root."""
        out = []
        current: str | None = name
        while current is not None and current != ROOT:
            out.append(current)
            current = self.nodes[current].parent
        return out

    def subtree(self, name: str) -> list[str]:
        """``name`` and every queue under it, parents first."""
        out, at = [name], 0
        while at < len(out):
            out.extend(self.nodes[out[at]].children)
            at += 1
        return out

    def not_a_leaf(self, name: str) -> str | None:
        """Why a group may not go in queue ``name`` because it has child queues, or None."""
        node = self.nodes.get(name)
        if node is None or not node.children or name == ROOT:
            return None
        shown = ", ".join(node.children[:5]) + (", ..." if len(node.children) > 5 else "")
        return f"queue {name} has child queues ({shown}): PodGroups go in leaf queues only"


def build_tree(
    queues: Iterable[TreeQueue], total: np.ndarray, resources: Sequence[str]
) -> QueueTree:
    """The tree of ``queues`` (names unique) with every queue's deserved share, the root's
    being ``total`` (the cluster's allocatable, nothing where negative)."""
    given = {queue.name: queue for queue in queues}
    dims = len(total)
    refused = refusals(given)
    amount = np.asarray(total, dtype=float)
    root = Node(
        ROOT, None, 0, 1.0, np.full(dims, np.inf), np.zeros(dims), np.zeros(dims), np.zeros(dims)
    )
    root.deserved = np.where(amount < 0.0, 0.0, amount)
    nodes = {ROOT: root}
    pending = [name for name in given if name not in refused]
    children: dict[str, list[str]] = {}
    for name in pending:
        children.setdefault(given[name].parent or ROOT, []).append(name)
    order = [ROOT]
    for parent_name in order:  # grows as it goes: breadth first, parents before children
        for name in children.get(parent_name, ()):
            nodes[parent_name].children.append(name)
            nodes[name] = _node(given[name], parent_name, nodes[parent_name].depth + 1, dims)
            order.append(name)
    for name in reversed(order[1:]):  # bottom up: the subtree's request and guarantee
        node = nodes[name]
        if node.children:
            below = [nodes[child] for child in node.children]
            node.request = node.request + np.sum([c.request for c in below], axis=0)
            kept = np.sum([c.guarantee for c in below], axis=0)
            node.guarantee = np.minimum(np.maximum(node.guarantee, kept), node.capability)
    root.request = np.sum([nodes[c].request for c in root.children] or [np.zeros(dims)], axis=0)
    for name in order:  # top down: the deserved shares
        node = nodes[name]
        if node.children:
            below = [nodes[child] for child in node.children]
            for child, share in zip(below, divide(node.deserved, below), strict=True):
                child.deserved = share
    return QueueTree(tuple(resources), nodes, refused)


def _node(queue: TreeQueue, parent: str, depth: int, dims: int) -> Node:
    capability = np.full(dims, np.inf) if queue.capability is None else queue.capability
    guarantee = np.zeros(dims) if queue.guarantee is None else queue.guarantee
    return Node(
        queue.name,
        parent,
        depth,
        float(queue.weight),
        np.asarray(capability, dtype=float),
        np.minimum(np.asarray(guarantee, dtype=float), capability),
        np.zeros(dims) if queue.deserved is None else np.asarray(queue.deserved, dtype=float),
        np.zeros(dims) if queue.request is None else np.asarray(queue.request, dtype=float),
    )


def divide(deserved: np.ndarray, children: Sequence[Node]) -> list[np.ndarray]:
    """A parent's ``deserved`` divided among its ``children``: guarantees, then explicit
    deserved shares as far as asked, then the rest by weight (see the module doc)."""
    have = np.where(deserved < 0.0, 0.0, deserved)
    limit = np.minimum(
        np.array([c.capability for c in children]), np.array([c.request for c in children])
    )
    base = _in_proportion(have, np.array([c.guarantee for c in children]))
    left = _left(have, base)
    wanted = np.array([c.claim for c in children])
    claimed = np.maximum(np.minimum(wanted, limit) - base, 0.0)
    extra = _in_proportion(left, claimed)
    left = _left(left, extra)
    room = np.maximum(limit - base - extra, 0.0)
    filled = weighted_fill(left, np.array([c.weight for c in children]), room)
    shares = base + extra + filled
    return list(shares)


def _in_proportion(have: np.ndarray, asked: np.ndarray) -> np.ndarray:
    """Each row of ``asked``, or where the rows add up to more than ``have``, a part of
    ``have`` in proportion to each row."""
    asked_sum = asked.sum(axis=0)
    over = asked_sum > have
    if not over.any():
        return asked
    scale = np.divide(have, asked_sum, out=np.ones_like(have), where=over)
    return np.where(over[None, :], asked * scale[None, :], asked)


def _left(have: np.ndarray, given: np.ndarray) -> np.ndarray:
    """What is left of ``have`` once the rows of ``given`` are taken (never below 0)."""
    taken = given.sum(axis=0)
    if not taken.any():
        return have
    return np.maximum(have - taken, 0.0)


def refusals(given: dict[str, TreeQueue]) -> dict[str, Refusal]:
    """The queues left out of the tree: the queue named ``root`` (the tree's own), a
    queue whose parent does not exist, every queue on a cycle of parents, and every
    queue under one of those."""
    refused: dict[str, Refusal] = {}
    if ROOT in given:
        refused[ROOT] = Refusal(
            ROOT, "metadata.name", f"{ROOT} is the tree's root, kept by the scheduler"
        )
    settled: set[str] = {ROOT}
    for start in given:
        chain: list[str] = []
        current = start
        while current not in settled and current not in refused and current in given:
            if current in chain:
                _refuse_cycle(chain[chain.index(current) :], refused)
                break
            chain.append(current)
            current = given[current].parent or ROOT
        else:
            if current not in given and current != ROOT:
                refused[chain[-1]] = Refusal(
                    chain[-1], "spec.parent", f"queue {current!r} does not exist"
                )
        _settle(chain, given, refused, settled)
    return refused


def _refuse_cycle(cycle: list[str], refused: dict[str, Refusal]) -> None:
    for at, name in enumerate(cycle):
        loop = cycle[at:] + cycle[: at + 1]
        refused[name] = Refusal(name, "spec.parent", "a cycle of parents: " + " → ".join(loop))


def _settle(
    chain: list[str], given: dict[str, TreeQueue], refused: dict[str, Refusal], settled: set[str]
) -> None:
    """Each queue of ``chain`` (a queue, its parent, ...) is in the tree, or, under a
    refused one, refused too, naming the cause."""
    for name in reversed(chain):
        if name in refused:
            continue
        parent = given[name].parent or ROOT
        if parent != ROOT and parent in refused:
            cause = refused[parent].cause or str(refused[parent])
            refused[name] = Refusal(
                name,
                "spec.parent",
                f"its parent {parent!r} is left out of the tree ({cause})",
                cause,
            )
        else:
            settled.add(name)


def subtree_sums(tree: QueueTree, own: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Each queue's amount with its subtree's added (``own``: by queue, e.g. what its
    pods hold; queues left out of the tree are not counted). The root's is the sum of
    all."""
    dims = len(tree.resources)
    sums = {name: np.asarray(own.get(name, np.zeros(dims)), dtype=float) for name in tree.nodes}
    for name in reversed(list(tree.nodes)):
        parent = tree.nodes[name].parent
        if parent is not None:
            sums[parent] = sums[parent] + sums[name]
    return sums


def rationed(tree: QueueTree) -> np.ndarray:
    """The resources in which some queue deserves less than it asks (its subtree's
    request, capped by its capability): those the queues really share."""
    short = np.zeros(len(tree.resources), dtype=bool)
    for name, node in tree.nodes.items():
        if name != ROOT:
            short |= node.deserved < np.minimum(node.request, node.capability) - EPSILON
    return short
