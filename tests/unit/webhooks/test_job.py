"""Delayed pod creation: a Job of a group not yet admitted is created suspended, and
released once the group is Inqueue; every other Job passes unchanged."""

import pytest

from kbatch.api.podgroup import PodGroupPhase
from kbatch.webhooks.admission import job
from kbatch.webhooks.admission.result import merge
from unit.webhooks.world import World, job_obj

HELD = job.HELD_ANNOTATION


def test_a_job_without_the_group_annotation_passes_unchanged() -> None:
    answer = job.mutate(job_obj("plain"), World().view)
    assert (answer.allowed, answer.patch, answer.warnings) == (True, {}, ())


def test_a_job_of_a_pending_group_is_created_suspended_and_labelled() -> None:
    world = World().pod_group("g", phase="Pending")
    answer = job.mutate(job_obj("train", group="g"), world.view)
    assert answer.allowed
    assert answer.patch == {
        "metadata": {
            "labels": {job.GROUP_LABEL: "g"},
            "annotations": {
                HELD: "PodGroup default/g is Pending; kbatch creates the pods once it is Inqueue"
            },
        },
        "spec": {"suspend": True},
    }
    assert answer.warnings == (
        "Job suspended: PodGroup default/g is Pending; kbatch creates the pods once it is Inqueue",
    )
    assert job.is_held(answer.applied_to(job_obj("train", group="g")))


def test_a_job_whose_group_does_not_exist_yet_is_held() -> None:
    answer = job.mutate(job_obj("train", group="later"), World().view)
    assert answer.patch["spec"] == {"suspend": True}
    assert (
        "PodGroup default/later does not exist yet" in answer.patch["metadata"]["annotations"][HELD]
    )


@pytest.mark.parametrize("phase", ["Inqueue", "Running", "Unknown", "Completed"])
def test_a_job_of_an_admitted_group_is_only_labelled(phase: str) -> None:
    world = World().pod_group("g", phase=phase)
    answer = job.mutate(job_obj("train", group="g"), world.view)
    assert answer.patch == {"metadata": {"labels": {job.GROUP_LABEL: "g"}}}


def test_a_job_its_owner_suspended_is_not_marked_as_held() -> None:
    answer = job.mutate(job_obj("train", group="g", suspend=True), World().view)
    assert answer.patch == {"metadata": {"labels": {job.GROUP_LABEL: "g"}}}
    released = merge(job_obj("train", group="g", suspend=True), answer.patch)
    assert job.release_patch(released, PodGroupPhase.INQUEUE) is None


def test_without_job_suspend_on_the_server_the_job_is_only_labelled() -> None:
    answer = job.mutate(job_obj("train", group="g"), World().view, suspend_supported=False)
    assert answer.patch == {"metadata": {"labels": {job.GROUP_LABEL: "g"}}}


def test_a_group_name_too_long_for_a_label_is_not_labelled() -> None:
    name = "g" * 64
    answer = job.mutate(job_obj("train", group=name), World().view)
    assert "labels" not in answer.patch["metadata"] and answer.patch["spec"] == {"suspend": True}


def test_a_held_job_is_released_once_its_group_is_admitted() -> None:
    held = job.mutate(job_obj("train", group="g"), World().view).applied_to(
        job_obj("train", group="g")
    )
    for phase in (None, PodGroupPhase.PENDING):
        assert job.release_patch(held, phase) is None
    patch = job.release_patch(held, PodGroupPhase.INQUEUE)
    assert patch == {"metadata": {"annotations": {HELD: None}}, "spec": {"suspend": False}}
    released = merge(held, patch)
    assert released["spec"]["suspend"] is False and HELD not in released["metadata"]["annotations"]
    assert not job.is_held(released) and job.release_patch(released, PodGroupPhase.RUNNING) is None
