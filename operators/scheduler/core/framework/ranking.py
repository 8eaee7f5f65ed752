"""A template's best nodes, kept in order as tasks are placed, and what they will answer next.

Placing a task changes one node; every other node keeps its rank. So instead of an
argmax over all nodes for every task, followed by scoring again the node the task
went to, a template keeps two things between its tasks:

- ``Ranking``: a heap of its best nodes, (-rank, node), where the node's index
  breaks ties exactly as ``np.argmax`` does (the first by name). A node that changes
  is pushed again at its new rank; the heap is filled again from all nodes only once
  its best node ranks below the best one left out.
- ``Lookahead``: for the nodes the heap was filled with, the template's answers
  (predicates, score, room) once one more of its tasks is allocated there, computed
  for all of them in one vectorised call (``NodeSet.assumed``). When the task just
  chosen was allocated on such a node and nothing else changed since, the node's
  answers are taken from here instead of being computed again.

Both rest on the contract of ``placement``: for a template without pod
(anti-)affinity terms or host ports, what a node answers depends on that node's
resource rows alone.
"""

import heapq
from collections.abc import Callable

import numpy as np

from kbatch.operators.scheduler.core.framework.nodes import NodeSet

# How many of a template's best nodes its heap holds at most (and the look-ahead
# covers); it holds fewer when fewer tasks are to be placed (``heap_size``).
HEAP_SIZE = 512
# ... and at least this many, or all if fewer can take the task.
SMALLEST_HEAP = 16


def heap_size(tasks: int) -> int:
    """How many nodes a heap holds at first for ``tasks`` alike tasks to place: twice as
    many, within bounds. A heap is only a cache of the best nodes (one that runs out is
    filled again, holding twice as many each time: ``Ranking.fill``), and filling it,
    with its look-ahead's answers, costs by the node: a gang of four on a thousand nodes
    needs not the best 512, but the many gangs of one template do."""
    return min(HEAP_SIZE, max(SMALLEST_HEAP, 2 * tasks))


# ok, scores, fit_idle, fit_future over some nodes (see placement.Placer).
Answers = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
Evaluate = Callable[[np.ndarray], Answers]


# One node's answers for a template: ok, score, fit_idle, fit_future, and its rank
# (the score if ok and fit_idle, else -inf). A plain tuple: made by the hundred.
Answer = tuple[bool, float, bool, bool, float]
RANK = 4


def best_first(ranked: np.ndarray, count: int, among: np.ndarray | None = None) -> np.ndarray:
    """The ``count`` nodes of highest rank, best first (ties: lowest index first, as
    ``np.argmax`` breaks them); nodes ranked -inf (they cannot take the task) never.
    ``among``: only these nodes (ascending), else all."""
    if among is None:
        candidates = np.flatnonzero(ranked > -np.inf)
    else:
        candidates = among[ranked[among] > -np.inf]
    if candidates.size > count:
        values = ranked[candidates]
        cut = np.partition(values, values.size - count)[values.size - count]  # count-th best
        above = candidates[values > cut]
        level = candidates[values == cut][: count - above.size]  # ascending: first by index
        candidates = np.concatenate([above, level])
    return candidates[np.lexsort((candidates, -ranked[candidates]))]


class Lookahead:
    """A template's answers for some nodes once one more of its tasks is allocated on
    each; a node's is valid while that allocation is all that changed on it."""

    def __init__(self, request: np.ndarray, ask: Evaluate) -> None:
        self._request = request
        self._ask = ask
        self._at: dict[int, int] = {}  # node -> its position in the lists below
        self._version: list[int] = []  # the node's version the answers start from
        self._answers: list[Answer] = []

    def add(self, nodes: NodeSet, idx: np.ndarray) -> None:
        """Work out the answers for the nodes ``idx``, as they are now (one call)."""
        with nodes.assumed(idx, self._request):
            ok, scores, fit_idle, fit_future = self._ask(idx)
        ranked = np.where(ok & fit_idle, scores, -np.inf)
        start = len(self._version)
        self._at.update(zip(idx.tolist(), range(start, start + len(idx)), strict=True))
        self._version += nodes.version[idx].tolist()
        columns = (ok, scores, fit_idle, fit_future, ranked)
        self._answers += zip(*(column.tolist() for column in columns), strict=True)

    def after(self, node: int, version: int) -> Answer | None:
        """``node``'s answers now that one task was allocated on it, if that is the only
        change since it had ``version``; else None."""
        at = self._at.get(node)
        if at is None or self._version[at] != version:
            return None
        return self._answers[at]


class Ranking:
    """A template's best nodes in a heap, kept current as nodes change (see module doc)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int]] = []
        self._stamp: dict[int, int] = {}  # node -> stamp of its one valid heap entry
        # (-rank, node) of the best node not in the heap; at first every node is left out.
        self._left_out: tuple[float, int] | None = (-np.inf, -1)
        self._size = 0  # how many nodes the last fill held

    def fill(
        self, ranked: np.ndarray, among: np.ndarray | None = None, size: int = HEAP_SIZE
    ) -> np.ndarray:
        """Hold the ``size`` best nodes of ``ranked`` (all nodes' ranks), of ``among`` only
        if given (ascending: a node subset such as a topology domain), or twice as many as
        the last fill held, up to HEAP_SIZE; the nodes held. A ranking filled from a
        subset must only be given (``moved``) its nodes."""
        size = self._size = min(HEAP_SIZE, max(size, 2 * self._size))
        top = best_first(ranked, size + 1, among)
        held = top[:size]
        # Sorted by (-rank, node), the list is a heap already.
        ranks, nodes = ranked[held].tolist(), held.tolist()
        self._heap = [(-rank, node, 0) for rank, node in zip(ranks, nodes, strict=True)]
        self._stamp = dict.fromkeys(nodes, 0)
        self._left_out = None
        if top.size > size:
            node = int(top[size])
            self._left_out = (-float(ranked[node]), node)
        return held

    def moved(self, node: int, rank: float) -> None:
        """``node`` changed: its new rank."""
        stamp = self._stamp.get(node, -1) + 1
        self._stamp[node] = stamp
        if rank > -np.inf:
            heapq.heappush(self._heap, (-rank, node, stamp))

    def leaders(self, count: int) -> np.ndarray:
        """Up to ``count`` of the best nodes held, best first."""
        entries = heapq.nsmallest(2 * count, self._heap)
        valid = [node for _, node, stamp in entries if self._stamp[node] == stamp]
        return np.array(valid[:count], dtype=np.int64)

    def best(self) -> int | None:
        """The best node (None: none can take the task), or -1 when the heap must be
        filled again to know."""
        heap = self._heap
        while heap:
            neg_rank, node, stamp = heap[0]
            if self._stamp[node] != stamp:  # the node moved since: an outdated entry
                heapq.heappop(heap)
                continue
            if self._left_out is not None and (neg_rank, node) > self._left_out:
                return -1
            return node
        return None if self._left_out is None else -1

    def plan(
        self, lookahead: Lookahead | None, version: np.ndarray, count: int
    ) -> tuple[list[int], list[Answer | None]]:
        """The nodes ``count`` alike tasks go to one after another, each allocated where
        chosen (what ``best`` would answer between the placements), and each node's
        answers once its task is there — as far as the look-ahead knows them: the list
        ends before the first node whose answers after its task are not known (with
        that node alone if it is the first: the caller asks the plugins about it once
        placed), at a NaN rank (that node included), or where the heap would need
        filling. Ending before an unknown node rather than at it saves asking about it
        twice: once placed, and again with the look-ahead of the next run.

        The heap is left as if the tasks were placed: the caller puts the planned nodes
        back at their real ranks once it knows which were.
        """
        nodes: list[int] = []
        after: list[Answer | None] = []
        planned: set[int] = set()
        while len(nodes) < count:
            best = self.best()
            if best is None or best == -1:
                break
            # Known for one task more than the node has now (``version``), no further.
            known = None
            if lookahead is not None and best not in planned:
                known = lookahead.after(best, int(version[best]))
            if known is None and nodes:
                break
            nodes.append(best)
            after.append(known)
            if known is None or known[RANK] != known[RANK]:  # unknown, or NaN
                break
            planned.add(best)
            self.moved(best, known[RANK])
        return nodes, after
