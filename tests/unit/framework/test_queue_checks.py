"""What the queue tree allows: placing under every ancestor's capability, deserved share
and the other subtrees' guarantees; reclaim's order of victims and what a victim keeps.

The reclaim order is Volcano's capacity-plugin design's example: a job in a leaf of
team a reclaims first from its sibling leaf in team a, then from team b.
"""

import numpy as np
import pytest

from builders import DIMS, vec
from kbatch.operators.scheduler.core.framework import queue_checks
from kbatch.operators.scheduler.core.framework.queue_checks import (
    HeldBack,
    held_back,
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

Amounts = dict[str, np.ndarray]
CPU = np.array([True, False, False, False])


def teams(**requests: np.ndarray) -> QueueTree:
    """16 cpu: team-a (capability 12 cpu) with a1 and a2, team-b (guarantee 4 cpu) with b1."""
    return build_tree(
        [
            TreeQueue("team-a", capability=vec(12, np.inf, np.inf, np.inf)),
            TreeQueue("a1", "team-a", request=requests.get("a1")),
            TreeQueue("a2", "team-a", request=requests.get("a2")),
            TreeQueue("team-b", guarantee=vec(4)),
            TreeQueue("b1", "team-b", request=requests.get("b1")),
        ],
        vec(16, 64),
        DIMS.names,
    )


def guarded(**requests: np.ndarray) -> QueueTree:
    """16 cpu: team-a with a1, team-b (guarantee 4 cpu) with b1."""
    return build_tree(
        [
            TreeQueue("team-a"),
            TreeQueue("a1", "team-a", request=requests.get("a1")),
            TreeQueue("team-b", guarantee=vec(4)),
            TreeQueue("b1", "team-b", request=requests.get("b1")),
        ],
        vec(16, 64),
        DIMS.names,
    )


def sums(tree: QueueTree, **held: np.ndarray) -> Amounts:
    return subtree_sums(tree, held)


# --- placing --------------------------------------------------------------------------

HOLDS = [
    # (name, requests, held, the leaf, its request, the answer)
    ("within everything", {"a1": vec(4), "a2": vec(4)}, {"a1": vec(2)},
     "a1", vec(1), None),
    ("a parent at its capability",
     {"a1": vec(20), "a2": vec(20), "b1": vec(1)}, {"a1": vec(8), "a2": vec(4)},
     "a2", vec(1), "team-a is at its capability cpu 12"),
    ("the leaf at its deserved share in a rationed resource",
     {"a1": vec(20), "a2": vec(20), "b1": vec(20)}, {"a1": vec(6)},
     "a1", vec(1), "a1 is at its deserved share cpu 3"),
    ("the team at its deserved share, the leaf not",
     {"a1": vec(20), "a2": vec(2), "b1": vec(20)}, {"a1": vec(5), "a2": vec(1)},
     "a2", vec(0.5), "team-a is at its deserved share cpu 6"),
    ("over the deserved share in a resource nobody is short of: no limit",
     {"a1": vec(2, 8), "b1": vec(2, 8)}, {"a1": vec(2, 8)},
     "a1", vec(0, 1), None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("requests", "held", "leaf", "asked", "answer"),
    [case[1:] for case in HOLDS],
    ids=[case[0] for case in HOLDS],
)
def test_held_back_names_the_nearest_queue_and_why(
    requests: Amounts, held: Amounts, leaf: str, asked: np.ndarray, answer: str | None
) -> None:
    tree = teams(**requests)
    found = held_back(tree, leaf, asked, sums(tree, **held), rationed(tree))
    assert (None if found is None else str(found)) == answer


def test_no_placement_eats_into_another_subtree_s_unused_guarantee() -> None:
    # a1 holds 10 of the 16 cpu; team-b's idle guarantee keeps 4 of the 6 left.
    tree = guarded(a1=vec(20))
    held = sums(tree, a1=vec(10))
    nothing_short = np.zeros(4, dtype=bool)
    assert held_back(tree, "a1", vec(2), held, nothing_short) is None
    found = held_back(tree, "a1", vec(3), held, nothing_short)
    assert found == HeldBack("team-b", queue_checks.GUARANTEE, "cpu", 4000.0)
    assert str(found) == "team-b's unused guarantee keeps cpu 4 free"


def test_a_guarantee_keeps_only_the_room_its_subtree_does_not_hold() -> None:
    tree = guarded(a1=vec(20), b1=vec(3))
    held = sums(tree, a1=vec(11), b1=vec(3))  # 2 cpu left; team-b holds 3 of its 4: 1 is kept
    nothing_short = np.zeros(4, dtype=bool)
    assert held_back(tree, "a1", vec(1), held, nothing_short) is None
    found = held_back(tree, "a1", vec(1.5), held, nothing_short)
    assert str(found) == "team-b's unused guarantee keeps cpu 1 free"
    assert held_back(tree, "b1", vec(2), held, nothing_short) is None  # its own guarantee
    assert held_back(tree, "a1", vec(0, 1), held, nothing_short) is None  # memory: not kept


def test_capability_comes_before_the_deserved_share() -> None:
    tree = teams(a1=vec(20), a2=vec(20), b1=vec(20))
    held = sums(tree, a1=vec(8), a2=vec(4))
    found = held_back(tree, "a1", vec(1), held, rationed(tree))
    assert found is not None and (found.queue, found.kind) == ("team-a", "capability")


# --- reclaim ----------------------------------------------------------------------------


def three_levels() -> QueueTree:
    """root: org (a: a1, a2; c: c1), b: b1."""
    return build_tree(
        [
            TreeQueue("org"),
            TreeQueue("a", "org"),
            TreeQueue("a1", "a"),
            TreeQueue("a2", "a"),
            TreeQueue("c", "org"),
            TreeQueue("c1", "c"),
            TreeQueue("b"),
            TreeQueue("b1", "b"),
        ],
        vec(16),
        DIMS.names,
    )


@pytest.mark.parametrize(
    ("reclaimer", "rings"),
    [
        ("a1", [["a2"], ["c1"], ["b1"]]),
        ("c1", [["a1", "a2"], ["b1"]]),
        ("b1", [["a1", "a2", "c1"]]),
    ],
)
def test_victims_come_from_the_nearest_relatives_first(
    reclaimer: str, rings: list[list[str]]
) -> None:
    assert victim_rings(three_levels(), reclaimer) == rings


def test_volcano_s_reclaim_order() -> None:
    # Volcano's capacity design: root (a: job A's leaf and job B's; job C's queue).
    tree = build_tree(
        [
            TreeQueue("a"),
            TreeQueue("job-a-queue", "a"),
            TreeQueue("job-b-queue", "a"),
            TreeQueue("job-c-queue"),
        ],
        vec(8),
        DIMS.names,
    )
    assert victim_rings(tree, "job-a-queue") == [["job-b-queue"], ["job-c-queue"]]


def reclaim_tree() -> QueueTree:
    """16 cpu, everyone asks 8: a1, a2 (team a) and b1 (team b) deserve 4, 4 and 8."""
    return build_tree(
        [
            TreeQueue("a"),
            TreeQueue("a1", "a", request=vec(8)),
            TreeQueue("a2", "a", request=vec(8)),
            TreeQueue("b"),
            TreeQueue("b1", "b", request=vec(8)),
        ],
        vec(16),
        DIMS.names,
    )


LOSSES = [
    # (name, held by a1, a2, b1, victim, reclaimer, may lose 1 cpu)
    ("over its share, and its team over too", vec(6), vec(4), vec(6), "a1", "b1", True),
    ("down to its share but not below", vec(5), vec(4), vec(6), "a1", "b1", True),
    ("not over its share", vec(4), vec(4), vec(6), "a1", "b1", False),
    ("over, but its team would go below its share", vec(6), vec(2), vec(7), "a1", "b1", False),
    ("the same, for a sibling: the team's share does not move", vec(6), vec(2), vec(7),
     "a1", "a2", True),
    ("without a reclaimer every ancestor is checked", vec(6), vec(2), vec(7), "a1", None, False),
]  # fmt: skip


@pytest.mark.parametrize(
    ("a1", "a2", "b1", "victim", "reclaimer", "allowed"),
    [case[1:] for case in LOSSES],
    ids=[case[0] for case in LOSSES],
)
def test_a_victim_and_its_ancestors_keep_their_deserved_shares(
    a1: np.ndarray,
    a2: np.ndarray,
    b1: np.ndarray,
    victim: str,
    reclaimer: str | None,
    allowed: bool,
) -> None:
    tree = reclaim_tree()
    held = subtree_sums(tree, {"a1": a1, "a2": a2, "b1": b1})
    assert may_lose(tree, victim, vec(1), held, rationed(tree), reclaimer) is allowed


def test_the_reclaim_tree_deserves_what_the_cases_say() -> None:
    tree = reclaim_tree()
    shares = {name: tree.nodes[name].deserved[0] / 1000 for name in tree.nodes if name != ROOT}
    assert shares == {"a": 8, "a1": 4, "a2": 4, "b": 8, "b1": 8}
    np.testing.assert_array_equal(rationed(tree), CPU)
