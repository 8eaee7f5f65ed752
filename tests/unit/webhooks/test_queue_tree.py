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


ORG = tree_queue("org", capability={"cpu": "10", "memory": "8Gi"})
A1 = tree_queue("a1", "org", guarantee={"resource": {"cpu": "4"}})

GUARANTEES = [
    # (name, the queues there, the queue admitted, the refusal or None)
    ("children's guarantees within the capability", (ORG, A1),
     tree_queue("a2", "org", guarantee={"resource": {"cpu": "6"}}), None),
    ("a child's guarantee past what is left", (ORG, A1),
     tree_queue("a2", "org", guarantee={"resource": {"cpu": "6500m"}}),
     "spec.guarantee.resource.cpu: the guarantees of queue 'org''s children would add up "
     "to 10.5 (a1 4, a2 6500m), more than its spec.capability.cpu 10"),
    ("a child raising its own guarantee counts it once", (ORG, A1),
     tree_queue("a1", "org", guarantee={"resource": {"cpu": "10"}}), None),
    ("a resource the parent does not cap", (ORG, A1),
     tree_queue("a2", "org", guarantee={"resource": {"nvidia.com/gpu": "100"}}), None),
    ("a parent without a capability", (tree_queue("org"), A1),
     tree_queue("a2", "org", guarantee={"resource": {"cpu": "100"}}), None),
    ("a parent's capability lowered below its children's", (ORG, A1),
     tree_queue("org", capability={"cpu": "3"}),
     "spec.capability.cpu: 3 is less than its children's guarantees add up to, 4 (a1 4)"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("there", "admitted", "refusal"),
    [c[1:] for c in GUARANTEES],
    ids=[c[0] for c in GUARANTEES],
)
def test_children_s_guarantees_fit_in_the_parent_s_capability(
    there: tuple[Obj, ...], admitted: Obj, refusal: str | None
) -> None:
    answer = queue.validate(admitted, world(*there).view)
    assert (None if answer.allowed else answer.message) == refusal


def test_a_queue_with_children_cannot_be_deleted_naming_them() -> None:
    there = world(ORG, A1, tree_queue("a2", "org"), tree_queue("b", None))
    answer = queue.validate_delete(ORG, there.view)
    assert not answer.allowed and answer.code == 403
    assert answer.message == (
        "metadata.name: queue 'org' cannot be deleted: 2 queues still name it in "
        "spec.parent (a1, a2); delete them or give them another parent first"
    )
    assert queue.validate_delete(A1, there.view).allowed


def test_the_view_lists_a_queue_s_children() -> None:
    there = world(ORG, tree_queue("a2", "org"), A1, tree_queue("x", "a1"))
    assert there.view.queue_children("org") == ["a1", "a2"]
    assert there.view.queue_children("a1") == ["x"]
    assert there.view.queue_children("x") == []


def test_a_pod_group_naming_a_queue_with_children_is_refused_naming_them() -> None:
    from kbatch.webhooks.admission import podgroup
    from unit.webhooks.world import pod_group_obj

    there = world(ORG, A1, tree_queue("a2", "org"))
    answer = podgroup.validate(pod_group_obj("g", queue="org"), None, there.view)
    assert not answer.allowed and answer.code == 422
    assert answer.message == (
        "spec.queue: queue 'org' has child queues (a1, a2): PodGroups go in leaf queues "
        "only; name one of its leaves"
    )
    assert podgroup.validate(pod_group_obj("g", queue="a1"), None, there.view).allowed
    # a group already there (made before the children came) may still change
    old = pod_group_obj("g", queue="org")
    assert podgroup.validate(pod_group_obj("g", queue="org", min_member=2), old, there.view).allowed
