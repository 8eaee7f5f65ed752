"""How many nodes a template's heap holds (``ranking``): at first twice the tasks to
place (16 at least, HEAP_SIZE at most), and twice as many at each fill after (a heap
that ran out: the many gangs of one template), up to HEAP_SIZE."""

import numpy as np
import pytest

from kbatch.operators.scheduler.core.framework import ranking


@pytest.mark.parametrize(("tasks", "held"), [(1, 16), (8, 16), (20, 40), (300, 512), (5000, 512)])
def test_a_first_heap_holds_twice_the_tasks_within_bounds(tasks: int, held: int) -> None:
    assert ranking.heap_size(tasks) == held


def test_each_fill_after_the_first_holds_twice_as_many_up_to_the_most() -> None:
    ranked = np.arange(2000, dtype=float)
    heap = ranking.Ranking()
    sizes = [len(heap.fill(ranked, size=ranking.heap_size(4))) for _ in range(7)]
    assert sizes == [16, 32, 64, 128, 256, 512, 512]
    held = heap.fill(ranked, size=16)
    assert held.tolist() == list(range(1999, 1999 - 512, -1))  # the best, best first
    assert heap.best() == 1999


def test_a_fill_holds_the_nodes_there_are() -> None:
    heap = ranking.Ranking()
    assert len(heap.fill(np.array([1.0, -np.inf, 3.0]), size=16)) == 2
    assert heap.best() == 2
