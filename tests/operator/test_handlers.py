"""Operator handlers called directly with real object dicts."""

from kbatch.operators.queue import controller as queues
from kbatch.operators.scheduler.core.framework import podgroup_status as podgroups


def test_a_new_pod_group_gets_a_pending_status_once() -> None:
    fresh = {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"},
        "spec": {"minMember": 2},
    }
    assert podgroups.needs_initial_status(fresh)
    assert podgroups.INITIAL_STATUS["phase"] == "Pending"
    assert podgroups.INITIAL_STATUS["running"] == 0
    running = {**fresh, "status": {"phase": "Running"}}
    assert not podgroups.needs_initial_status(running)


def test_the_default_queue_is_a_valid_open_queue() -> None:
    from kbatch.api.queue import Queue, QueueState

    queue = Queue.model_validate(queues.DEFAULT_QUEUE_OBJECT)
    assert queue.metadata.name == "default"
    assert (queue.spec.weight, queue.spec.state) == (1, QueueState.OPEN)
