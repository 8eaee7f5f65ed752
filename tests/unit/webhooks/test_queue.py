"""Queue validation: accept, reject with a message naming the field."""

import pytest

from kbatch.webhooks.admission import queue
from unit.webhooks.world import World, queue_obj


def test_a_weighted_queue_is_admitted() -> None:
    assert queue.validate(queue_obj("q1", weight=3), World().view).allowed


@pytest.mark.parametrize("weight", [0, -2, "2", 1.5, None])
def test_weight_must_be_at_least_one(weight: object) -> None:
    answer = queue.validate(queue_obj("q1", weight=weight), World().view)
    assert not answer.allowed and answer.code == 422
    assert answer.message == (
        f"spec.weight: must be an integer ≥ 1 (the queue's share), not {weight!r}"
    )


def test_an_unused_queue_may_be_deleted() -> None:
    world = World().queue("q1").queue("q2").pod_group("g", queue="q2")
    assert queue.validate_delete(queue_obj("q1"), world.view).allowed


def test_the_default_queue_cannot_be_deleted() -> None:
    answer = queue.validate_delete(queue_obj("default"), World().view)
    assert not answer.allowed and answer.code == 403
    assert answer.message == (
        "metadata.name: the default queue cannot be deleted: PodGroups without spec.queue go there"
    )


def test_a_queue_with_pod_groups_cannot_be_deleted() -> None:
    world = World().queue("q1")
    for i in range(7):
        world.pod_group(f"g{i}", queue="q1", namespace="a" if i < 3 else "b")
    answer = queue.validate_delete(queue_obj("q1"), world.view)
    assert not answer.allowed
    assert answer.message == (
        "metadata.name: queue 'q1' cannot be deleted: 7 PodGroups still name it in "
        "spec.queue (a/g0, a/g1, a/g2, b/g3, b/g4, ...); delete them or wait for them to go first"
    )
