"""The queue tree: building it, leaving out bad queues, and deserved shares top down.

Volcano's documented hierarchical-queue example (its website's "Hierarchical Queue"
page: child-queue-a and child-queue-b under root with deserved 64 cpu / 128Gi each,
subchild-queue-a1 and -a2 under child-queue-a with 32 cpu / 64Gi each) on a cluster
of 128 cpu / 256Gi (the sum of the top level's deserved shares, as Volcano advises);
the demands and the expected shares are ours.
"""

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from builders import DIMS, vec
from kbatch.operators.scheduler.core.framework.queue_tree import (
    ROOT,
    Refusal,
    TreeQueue,
    build_tree,
)
from kbatch.operators.scheduler.core.plugins.proportion import deserved_shares


def queue(name: str, parent: str | None = None, **fields: Any) -> TreeQueue:
    return TreeQueue(name, parent, **fields)


def deserved(queues: list[TreeQueue], total: np.ndarray) -> dict[str, np.ndarray]:
    tree = build_tree(queues, total, DIMS.names)
    return {name: node.deserved for name, node in tree.nodes.items() if name != ROOT}


def assert_shares(got: Mapping[str, np.ndarray], expected: Mapping[str, np.ndarray]) -> None:
    assert set(got) == set(expected)
    for name, share in expected.items():
        np.testing.assert_allclose(got[name], share, err_msg=name, atol=1e-6)


# --- Volcano's example ------------------------------------------------------------

CLUSTER = vec(128, 256)


def volcano(a1: np.ndarray, a2: np.ndarray, b: np.ndarray) -> list[TreeQueue]:
    """Volcano's tree, as its manifests say it (``parent: root`` included), the leaves
    asking ``a1``, ``a2`` and ``b``."""
    return [
        queue("child-queue-a", ROOT, deserved=vec(64, 128)),
        queue("child-queue-b", ROOT, deserved=vec(64, 128), request=b),
        queue("subchild-queue-a1", "child-queue-a", deserved=vec(32, 64), request=a1),
        queue("subchild-queue-a2", "child-queue-a", deserved=vec(32, 64), request=a2),
    ]


VOLCANO_CASES = [
    # (name, a1 asks, a2 asks, b asks, a, b, a1, a2 deserve)
    ("everyone asks more than there is: the explicit shares",
     vec(100, 200), vec(100, 200), vec(100, 200),
     vec(64, 128), vec(64, 128), vec(32, 64), vec(32, 64)),
    ("child-queue-b idle: team a takes the cluster, halved by weight",
     vec(100, 200), vec(100, 200), vec(),
     vec(128, 256), vec(), vec(64, 128), vec(64, 128)),
    ("a2 idle: its share stays in team a, with a1",
     vec(100, 200), vec(), vec(100, 200),
     vec(64, 128), vec(64, 128), vec(64, 128), vec()),
    ("a2 asks a little: a1 takes the rest of team a's share, b keeps its own",
     vec(100, 200), vec(10, 20), vec(100, 200),
     vec(64, 128), vec(64, 128), vec(54, 108), vec(10, 20)),
    ("job-a alone (1 cpu, 2Gi in a1): deserved is what is asked",
     vec(1, 2), vec(), vec(),
     vec(1, 2), vec(), vec(1, 2), vec()),
]  # fmt: skip


@pytest.mark.parametrize(
    ("a1", "a2", "b", "team_a", "team_b", "leaf_a1", "leaf_a2"),
    [case[1:] for case in VOLCANO_CASES],
    ids=[case[0] for case in VOLCANO_CASES],
)
def test_volcano_s_hierarchical_queue_example(
    a1: np.ndarray,
    a2: np.ndarray,
    b: np.ndarray,
    team_a: np.ndarray,
    team_b: np.ndarray,
    leaf_a1: np.ndarray,
    leaf_a2: np.ndarray,
) -> None:
    got = deserved(volcano(a1, a2, b), CLUSTER)
    assert_shares(
        got,
        {
            "child-queue-a": team_a,
            "child-queue-b": team_b,
            "subchild-queue-a1": leaf_a1,
            "subchild-queue-a2": leaf_a2,
        },
    )


def test_volcano_s_tree_has_its_leaves_and_subtree_requests() -> None:
    tree = build_tree(volcano(vec(3), vec(4), vec(5)), CLUSTER, DIMS.names)
    assert tree.leaves() == ["child-queue-b", "subchild-queue-a1", "subchild-queue-a2"]
    assert tree.path("subchild-queue-a2") == ["subchild-queue-a2", "child-queue-a"]
    np.testing.assert_array_equal(tree.nodes["child-queue-a"].request, vec(7))
    np.testing.assert_array_equal(tree.nodes[ROOT].request, vec(12))
    np.testing.assert_array_equal(tree.nodes[ROOT].deserved, CLUSTER)
    assert tree.not_a_leaf("child-queue-a") == (
        "queue child-queue-a has child queues (subchild-queue-a1, subchild-queue-a2): "
        "PodGroups go in leaf queues only"
    )
    assert tree.not_a_leaf("subchild-queue-a1") is None
    assert tree.refused == {}


# --- the rules, one at a time -------------------------------------------------------

RULES = [
    ("flat, by weight: kube-batch's notes' example",
     [queue("q1", weight=2, request=vec(5, 10)), queue("q2", weight=4, request=vec(10, 20))],
     vec(9, 27), {"q1": vec(3, 9), "q2": vec(6, 18)}),
    ("a team keeps its share: a2's unused part goes to a1, not to b",
     [queue("a"), queue("a1", "a", request=vec(12)), queue("a2", "a", request=vec(2)),
      queue("b", request=vec(12))],
     vec(12), {"a": vec(6), "a1": vec(4), "a2": vec(2), "b": vec(6)}),
    ("the same queues flat: a1 and b split what a2 leaves",
     [queue("a1", request=vec(12)), queue("a2", request=vec(2)), queue("b", request=vec(12))],
     vec(12), {"a1": vec(5), "a2": vec(2), "b": vec(5)}),
    ("weights divide among siblings only",
     [queue("a", weight=1), queue("a1", "a", weight=3, request=vec(20)),
      queue("a2", "a", weight=1, request=vec(20)), queue("b", weight=1, request=vec(20))],
     vec(16), {"a": vec(8), "a1": vec(6), "a2": vec(2), "b": vec(8)}),
    ("a guarantee is kept while its queue is idle",
     [queue("a", guarantee=vec(8)), queue("b", request=vec(16))],
     vec(16), {"a": vec(8), "b": vec(8)}),
    ("a guarantee comes before the weights",
     [queue("a", guarantee=vec(6), request=vec(16)), queue("b", request=vec(16))],
     vec(16), {"a": vec(11), "b": vec(5)}),
    ("children's guarantees are their parent's too",
     [queue("a"), queue("a1", "a", guarantee=vec(3)), queue("a2", "a", guarantee=vec(3)),
      queue("b", request=vec(16))],
     vec(16), {"a": vec(6), "a1": vec(3), "a2": vec(3), "b": vec(10)}),
    ("guarantees above the total: a part in proportion to each",
     [queue("a", guarantee=vec(12)), queue("b", guarantee=vec(4))],
     vec(8), {"a": vec(6), "b": vec(2)}),
    ("a guarantee above the capability counts up to the capability",
     [queue("a", guarantee=vec(12), capability=vec(4, np.inf)), queue("b", request=vec(16))],
     vec(16), {"a": vec(4), "b": vec(12)}),
    ("an explicit deserved share is claimed first, the rest goes by weight",
     [queue("a", deserved=vec(6), request=vec(10)), queue("b", weight=3, request=vec(10))],
     vec(10), {"a": vec(7), "b": vec(3)}),
    ("an explicit deserved share's idle part goes to the siblings",
     [queue("a", deserved=vec(6), request=vec(2)), queue("b", request=vec(10))],
     vec(10), {"a": vec(2), "b": vec(8)}),
    ("explicit shares above the total: a part in proportion to each",
     [queue("a", deserved=vec(9), request=vec(20)), queue("b", deserved=vec(3), request=vec(20))],
     vec(8), {"a": vec(6), "b": vec(2)}),
    ("a parent's capability caps its subtree, the rest goes elsewhere",
     [queue("a", capability=vec(4, np.inf)), queue("a1", "a", request=vec(10)),
      queue("a2", "a", request=vec(10)), queue("b", request=vec(20))],
     vec(16), {"a": vec(4), "a1": vec(2), "a2": vec(2), "b": vec(12)}),
    ("resources are divided each on its own",
     [queue("a", request=vec(1, 100)), queue("b", request=vec(100, 1))],
     vec(10, 10), {"a": vec(1, 9), "b": vec(9, 1)}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("queues", "total", "expected"),
    [case[1:] for case in RULES],
    ids=[case[0] for case in RULES],
)
def test_deserved_shares(
    queues: list[TreeQueue], total: np.ndarray, expected: dict[str, np.ndarray]
) -> None:
    assert_shares(deserved(queues, total), expected)


def test_the_flat_case_is_the_proportion_plugin_s_to_the_bit() -> None:
    queues = [
        queue("q1", weight=2, request=vec(5, 10)),
        queue("q2", weight=4, request=vec(10, 20), capability=vec(7, np.inf, np.inf, np.inf)),
        queue("q3", weight=3, request=vec(1, 30)),
    ]
    total = vec(9.7, 27.3)
    got = deserved(queues, total)
    flat = deserved_shares(
        total,
        {q.name: q.weight for q in queues},
        {q.name: q.request for q in queues if q.request is not None},
        {q.name: np.full(4, np.inf) if q.capability is None else q.capability for q in queues},
    )
    assert {name: share.tobytes() for name, share in got.items()} == {
        name: share.tobytes() for name, share in flat.items()
    }


# --- queues left out -------------------------------------------------------------------

REFUSED = [
    ("a missing parent",
     [queue("a", "nope"), queue("b", request=vec(4))],
     {"a": "spec.parent: queue 'nope' does not exist"}),
    ("itself as its parent",
     [queue("a", "a"), queue("b", request=vec(4))],
     {"a": "spec.parent: a cycle of parents: a → a"}),
    ("a cycle, and a queue under it",
     [queue("x", "y"), queue("y", "z"), queue("z", "y"), queue("b", request=vec(4))],
     {"y": "spec.parent: a cycle of parents: y → z → y",
      "z": "spec.parent: a cycle of parents: z → y → z",
      "x": "spec.parent: its parent 'y' is left out of the tree "
           "(spec.parent: a cycle of parents: y → z → y)"}),
    ("two levels under a missing parent: the first cause is named",
     [queue("u", "w"), queue("w", "nope"), queue("v", "u"), queue("b", request=vec(4))],
     {"w": "spec.parent: queue 'nope' does not exist",
      "u": "spec.parent: its parent 'w' is left out of the tree "
           "(spec.parent: queue 'nope' does not exist)",
      "v": "spec.parent: its parent 'u' is left out of the tree "
           "(spec.parent: queue 'nope' does not exist)"}),
    ("a queue named root",
     [queue(ROOT), queue("b", ROOT, request=vec(4))],
     {ROOT: "metadata.name: root is the tree's root, kept by the scheduler"}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("queues", "refused"), [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED]
)
def test_bad_queues_are_left_out_naming_the_field_and_the_rest_works(
    queues: list[TreeQueue], refused: dict[str, str]
) -> None:
    tree = build_tree(queues, vec(10), DIMS.names)
    assert {name: str(why) for name, why in tree.refused.items()} == refused
    assert all(isinstance(why, Refusal) and why.queue == name for name, why in tree.refused.items())
    assert set(tree.nodes) == {ROOT, "b"}
    np.testing.assert_allclose(tree.nodes["b"].deserved, vec(4))
