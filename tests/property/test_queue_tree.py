"""The queue tree on random trees and demands: deserved shares add up to at most the
parent's, and to all of it where the children ask for it; guarantees are held; no
queue deserves more than its capability; without parents the shares are the flat
proportion plugin's, to the bit; reclaim never leaves a victim or an ancestor of it
below its deserved share, and takes from every other leaf, nearest first."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kbatch.operators.scheduler.core.framework.queue_checks import (
    keeps_share,
    may_lose,
    victim_rings,
)
from kbatch.operators.scheduler.core.framework.queue_tree import (
    ROOT,
    QueueTree,
    TreeQueue,
    build_tree,
    rationed,
    subtree_sums,
)
from kbatch.operators.scheduler.core.plugins.proportion import deserved_shares, keeps_deserved

DIMS = 2
RESOURCES = ("cpu", "memory")
SETTINGS = settings(max_examples=200, deadline=None)

amount = st.one_of(st.just(0.0), st.integers(0, 20).map(float), st.floats(0, 20))
vector = st.lists(amount, min_size=DIMS, max_size=DIMS).map(np.array)
capability = st.lists(st.one_of(amount, st.just(np.inf)), min_size=DIMS, max_size=DIMS).map(
    np.array
)


@st.composite
def trees(draw: st.DrawFn, flat: bool = False, plain: bool = False) -> QueueTree:
    """Up to 10 queues, each under none or an earlier one (``flat``: all top level);
    ``plain``: no capabilities, and a total that covers every guarantee."""
    count = draw(st.integers(1, 10))
    queues = []
    for i in range(count):
        parents = st.none() if flat or i == 0 else st.sampled_from([None, *range(i)])
        parent = draw(parents)
        queues.append(
            TreeQueue(
                f"q{i}",
                None if parent is None else f"q{parent}",
                draw(st.integers(1, 5)),
                None if plain else draw(st.none() | capability),
                None if flat else draw(st.none() | vector),
                None if flat else draw(st.none() | vector),
                draw(vector),
            )
        )
    total = draw(vector) * 3
    if plain:
        total += sum((q.guarantee for q in queues if q.guarantee is not None), np.zeros(DIMS))
    return build_tree(queues, total, RESOURCES)


def close_below(small: np.ndarray, big: np.ndarray) -> bool:
    return bool(np.all(small <= big + 1e-9 * (1 + np.abs(big))))


def parents(tree: QueueTree) -> list[str]:
    return [name for name, node in tree.nodes.items() if node.children]


@SETTINGS
@given(trees())
def test_children_never_deserve_more_than_their_parent(tree: QueueTree) -> None:
    for name in parents(tree):
        children = [tree.nodes[c].deserved for c in tree.nodes[name].children]
        assert close_below(np.sum(children, axis=0), tree.nodes[name].deserved), name


@SETTINGS
@given(trees())
def test_a_parent_s_share_is_all_divided_unless_its_children_are_met(tree: QueueTree) -> None:
    for name in parents(tree):
        children = [tree.nodes[c] for c in tree.nodes[name].children]
        wanted = np.sum(
            [np.maximum(c.guarantee, np.minimum(c.capability, c.request)) for c in children],
            axis=0,
        )
        expected = np.minimum(tree.nodes[name].deserved, wanted)
        got = np.sum([c.deserved for c in children], axis=0)
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9, err_msg=name)


@SETTINGS
@given(trees())
def test_no_queue_deserves_more_than_its_capability(tree: QueueTree) -> None:
    for name, node in tree.nodes.items():
        assert close_below(node.deserved, node.capability), name


@SETTINGS
@given(trees())
def test_a_guarantee_is_held_wherever_the_parent_has_room_for_all_of_them(
    tree: QueueTree,
) -> None:
    for name in parents(tree):
        children = [tree.nodes[c] for c in tree.nodes[name].children]
        fits = close_below(
            np.sum([c.guarantee for c in children], axis=0), tree.nodes[name].deserved
        )
        for child in children:
            assert not fits or close_below(child.guarantee, child.deserved + 1e-9), child.name


@SETTINGS
@given(trees(plain=True))
def test_every_guarantee_is_held_when_the_cluster_covers_them(tree: QueueTree) -> None:
    for name, node in tree.nodes.items():
        assert close_below(node.guarantee, node.deserved), name


@SETTINGS
@given(trees(flat=True))
def test_without_parents_the_shares_are_the_proportion_plugin_s_to_the_bit(
    tree: QueueTree,
) -> None:
    top = [tree.nodes[name] for name in tree.nodes[ROOT].children]
    flat = deserved_shares(
        tree.nodes[ROOT].deserved,
        {q.name: int(q.weight) for q in top},
        {q.name: q.request for q in top},
        {q.name: q.capability for q in top},
    )
    for queue in top:
        assert queue.deserved.tobytes() == flat[queue.name].tobytes(), queue.name


@st.composite
def held_trees(draw: st.DrawFn) -> tuple[QueueTree, dict[str, np.ndarray], np.ndarray]:
    tree = draw(trees())
    held = {name: draw(vector) for name in tree.leaves()}
    return tree, subtree_sums(tree, held), draw(vector)


@SETTINGS
@given(held_trees())
def test_reclaim_never_leaves_a_victim_or_its_ancestors_below_their_share(
    case: tuple[QueueTree, dict[str, np.ndarray], np.ndarray],
) -> None:
    tree, held, request = case
    short = rationed(tree)
    for reclaimer in tree.leaves():
        rings = victim_rings(tree, reclaimer)
        named = [leaf for ring in rings for leaf in ring]
        assert sorted(named) == sorted(set(tree.leaves()) - {reclaimer})
        for victim in named:
            if not may_lose(tree, victim, request, held, short, reclaimer):
                continue
            shared = set(tree.path(reclaimer))
            below = [name for name in tree.path(victim) if name not in shared]
            checked = (request > 1e-6) & short
            for name in below:
                left = held[name] - request
                assert close_below(tree.nodes[name].deserved[checked] - 1e-6, left[checked])


def lowest_shared(tree: QueueTree, leaf: str, other: str) -> str:
    """The nearest queue above both (the root at the last)."""
    theirs = set(tree.path(other))
    return next((name for name in tree.path(leaf) if name in theirs), ROOT)


@SETTINGS
@given(trees())
def test_each_ring_is_one_level_further_out(tree: QueueTree) -> None:
    for reclaimer in tree.leaves():
        rings = victim_rings(tree, reclaimer)
        shared = [{lowest_shared(tree, reclaimer, victim) for victim in ring} for ring in rings]
        assert all(len(above) == 1 for above in shared), shared
        depths = [tree.nodes[above.pop()].depth for above in shared]
        assert depths == sorted(set(depths), reverse=True)


@SETTINGS
@given(vector, vector, vector, st.lists(st.booleans(), min_size=DIMS, max_size=DIMS))
def test_a_single_queue_keeps_its_share_as_the_proportion_plugin_says(
    held: np.ndarray, deserved: np.ndarray, request: np.ndarray, short: list[bool]
) -> None:
    rationed_dims = np.array(short)
    assert keeps_share(held, deserved, request, rationed_dims) == keeps_deserved(
        held, deserved, request, rationed_dims
    )
