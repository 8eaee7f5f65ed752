"""Admission on objects kbatch cannot use: refused naming the field, in kbatch's words —
a negative quantity, a field of the wrong shape, a queue the scheduler ignores."""

import pytest

from kbatch.cluster.errors import ObjectError
from kbatch.webhooks.admission import chain, job, podgroup, queue
from kbatch.webhooks.admission.view import StateView
from unit.webhooks.world import World, job_obj, pod_group_obj, queue_obj


def capped(name: str, cpu: object) -> dict:
    obj = queue_obj(name)
    obj["spec"]["capability"] = {"cpu": cpu}
    return obj


@pytest.mark.parametrize("cpu", ["-5", -5])
def test_a_negative_capability_is_refused(cpu: object) -> None:
    answer = queue.validate(capped("q-capneg", cpu), World().view)
    assert not answer.allowed
    assert answer.message == "spec.capability.cpu: must not be negative, not -5"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"capability": "lots"}, "spec.capability: expected a map, not 'lots'"),
        ({"capability": {"cpu": [1]}}, "spec.capability.cpu: a quantity must be a string or"),
        ({"state": "Paused"}, "spec.state: must be 'Open' or 'Closed', not 'Paused'"),
        ({"reclaimable": "maybe"}, "spec.reclaimable: expected true or false, not 'maybe'"),
    ],
)
def test_a_queue_of_the_wrong_shape_is_refused_in_kbatch_words(spec: dict, message: str) -> None:
    obj = queue_obj("q")
    obj["spec"].update(spec)
    answer = chain.admit(obj, None, World().view)
    assert not answer.allowed
    assert answer.message.startswith(message)
    assert "pydantic" not in answer.message and "Input should" not in answer.message


def test_a_negative_min_resources_is_refused() -> None:
    obj = pod_group_obj("pg", queue="default", min_resources={"cpu": "-5"})
    answer = chain.admit(obj, None, World().view)
    assert answer.message == "spec.minResources.cpu: must not be negative, not -5"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"spec": "x"}, "spec: expected a map, not 'x'"),
        ({"metadata": ["x"]}, "metadata: expected a map, not ['x']"),
        ({"status": {"phase": 3}}, "status.phase: must be 'Pending', "),
        ({"spec": {"queue": ["q"]}}, "spec.queue: expected a string, not ['q']"),
    ],
)
def test_a_pod_group_of_the_wrong_shape_is_refused(change: dict, message: str) -> None:
    obj = {**pod_group_obj("pg"), **change}
    answer = chain.admit(obj, None, World().view)
    assert not answer.allowed
    assert answer.message.startswith(message)


def test_a_pod_group_naming_an_ignored_queue_is_told_why() -> None:
    world = World()
    with pytest.raises(ObjectError):
        world.state.apply(capped("q-capneg", "-5"))
    answer = podgroup.validate(pod_group_obj("pg", queue="q-capneg"), None, world.view)
    assert answer.message == (
        "spec.queue: queue 'q-capneg' is ignored by kbatch (spec.capability.cpu: must not be "
        "negative, not -5); fix the queue or name another"
    )


def test_a_queue_read_from_the_api_and_refused_is_named_too() -> None:
    """The webhook server reads a Queue the watch has not brought; kbatch refused it."""
    world = World()
    view = StateView(world.state, refused_queues={"q-new": "spec.weight: must be >= 1, not 0"})
    answer = podgroup.validate(pod_group_obj("pg", queue="q-new"), None, view)
    assert answer.message.startswith("spec.queue: queue 'q-new' is ignored by kbatch (spec.weight")


def test_a_job_of_the_wrong_shape_is_refused_or_passed_never_raised() -> None:
    world = World()
    labelled = job_obj("j", group="pg")
    labelled["metadata"]["labels"] = {"a": 1}
    answer = job.mutate(labelled, world.view)
    assert answer.message == "metadata.labels.a: expected a string (quote it), not 1"
    broken_template = job_obj("j", group="pg")
    broken_template["spec"]["template"]["metadata"] = "x"
    assert job.mutate(broken_template, world.view).allowed  # no group named: not kbatch's
