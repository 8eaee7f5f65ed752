"""Queue validation in the queue tree: the parent must exist and lead up to the root
without a cycle; a guarantee within the capability; no queue named root."""

from typing import Any

import pytest

from kbatch.api import API_VERSION
from kbatch.webhooks.admission import queue
from unit.webhooks.world import World

Obj = dict[str, Any]


def tree_queue(name: str, parent: str | None = None, **spec: Any) -> Obj:
    if parent is not None:
        spec["parent"] = parent
    return {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def world(*queues: Obj) -> World:
    built = World()
    for obj in queues:
        built.state.apply(obj)
    return built


TEAMS = (tree_queue("org"), tree_queue("team-a", "org"))

CASES = [
    # (name, the queues there, the queue admitted, the refusal or None)
    ("a top-level queue", (), tree_queue("team-a"), None),
    ("Volcano's explicit root", (), tree_queue("team-a", "root"), None),
    ("under an existing queue", TEAMS, tree_queue("a1", "team-a"), None),
    ("Volcano's tree fields", TEAMS,
     tree_queue("a1", "team-a", guarantee={"resource": {"cpu": "2"}}, deserved={"cpu": 32},
                capability={"cpu": "4"}, borrowingLimit={"cpu": 1}, lendingLimit={"cpu": 1}),
     None),
    ("a missing parent", TEAMS, tree_queue("a1", "team-x"),
     "spec.parent: queue 'team-x' does not exist"),
    ("itself as its parent", (), tree_queue("a1", "a1"),
     "spec.parent: queue 'a1' cannot be its own parent"),
    ("a cycle made by an update", TEAMS, tree_queue("org", "team-a"),
     "spec.parent: a cycle of parents: org → team-a → org"),
    ("an ancestor with a missing parent", (tree_queue("team-a", "gone"),),
     tree_queue("a1", "team-a"),
     "spec.parent: its ancestor 'team-a' names a queue that does not exist, 'gone'"),
    ("a guarantee above the capability", (),
     tree_queue("a1", capability={"cpu": "2"}, guarantee={"resource": {"cpu": "3"}}),
     "spec.guarantee.resource.cpu: 3 is above spec.capability.cpu (2): a guarantee is room "
     "the queue may use, so at most its capability"),
    ("the root's name", (), tree_queue("root"),
     "metadata.name: 'root' is the queue tree's root, kept by the scheduler: a top-level "
     "queue leaves spec.parent out (or names root)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("there", "admitted", "refusal"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_a_queue_s_place_in_the_tree(
    there: tuple[Obj, ...], admitted: Obj, refusal: str | None
) -> None:
    answer = queue.validate(admitted, world(*there).view)
    assert (None if answer.allowed else answer.message) == refusal
    assert answer.allowed or answer.code == 422


def test_a_quantity_the_pattern_lets_through_is_refused_naming_the_field() -> None:
    answer = queue.validate(tree_queue("a1", deserved={"cpu": "1e100000"}), World().view)
    assert not answer.allowed
    assert answer.message.startswith("spec.deserved.cpu: ")
