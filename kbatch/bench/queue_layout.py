"""How ``kbatch bench`` spreads its jobs over queues: flat, or a tree of queues.

``flat:N`` is N top-level queues; ``tree:AxBxC`` is A top-level queues (departments),
each with B children (teams), each with C leaf queues: A·B·C leaves, jobs only in the
leaves. Either way the leaves are named ``q0`` .. ``q{N-1}``, leaf i has weight
``i % 10 + 1``, and job j goes to leaf ``j % N``; in a tree each inner queue weighs
what its leaves weigh together. So a leaf's share of the cluster is the same in
``tree:AxBxC`` as in ``flat:A·B·C``: the same jobs, the same weights, one tree apart.
A top-level ``default`` queue of weight 1 is there in both.
"""

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

WEIGHTS = 10  # leaf i weighs i % WEIGHTS + 1


@dataclass(frozen=True)
class QueueLayout:
    """``fanout``: the number of children at each level from the top; one level is flat."""

    fanout: tuple[int, ...]

    @classmethod
    def parse(cls, text: str) -> "QueueLayout":
        """``flat:N`` or ``tree:AxB[xC...]``; ValueError naming what is wrong."""
        kind, _, counts = text.partition(":")
        try:
            fanout = tuple(int(part) for part in counts.split("x"))
        except ValueError:
            fanout = ()
        if kind == "flat" and len(fanout) == 1 and fanout[0] > 0:
            return cls(fanout)
        if kind == "tree" and len(fanout) >= 2 and min(fanout) > 0:
            return cls(fanout)
        raise ValueError(
            f"{text!r}: expected flat:N (N queues) or tree:AxBxC (A top-level queues of "
            "B children of C leaves each), every count positive"
        )

    def __str__(self) -> str:
        if len(self.fanout) == 1:
            return f"flat:{self.fanout[0]}"
        return "tree:" + "x".join(str(n) for n in self.fanout)

    @property
    def leaves(self) -> int:
        return math.prod(self.fanout)

    @property
    def depth(self) -> int:
        return len(self.fanout)

    def flat(self) -> "QueueLayout":
        """The same leaves side by side at the top."""
        return QueueLayout((self.leaves,))

    def leaf(self, job: int) -> str:
        """The queue of the ``job``-th job."""
        return f"q{job % self.leaves}"

    def queue_objects(self) -> Iterator[dict[str, Any]]:
        """The Queues, each parent before its children, then ``default``."""
        yield from self._subtree(0, self.leaves, 0, None)
        yield {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"weight": 1}}

    def _subtree(
        self, first: int, count: int, level: int, parent: str | None
    ) -> Iterator[dict[str, Any]]:
        """The queues under ``parent`` holding leaves ``first`` .. ``first+count-1``."""
        children = self.fanout[level]
        size = count // children
        for c in range(children):
            start = first + c * size
            weight = sum(i % WEIGHTS + 1 for i in range(start, start + size))
            leaf = level == self.depth - 1
            name = f"q{start}" if leaf else f"{parent}-{c}" if parent else f"inner-{c}"
            spec: dict[str, Any] = {"weight": weight}
            if parent is not None:
                spec["parent"] = parent
            yield {"kind": "Queue", "metadata": {"name": name}, "spec": spec}
            if not leaf:
                yield from self._subtree(start, size, level + 1, name)


FLAT_10 = QueueLayout((10,))
