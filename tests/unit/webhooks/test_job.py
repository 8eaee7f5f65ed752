"""Delayed pod creation: a Job of a group not yet admitted is created suspended, and
released once the group is Inqueue — only when kbatch schedules its pods and holding
can end well; every other Job passes unchanged, or is only labelled."""

import pytest

from kbatch.api.podgroup import PodGroupPhase
from kbatch.webhooks.admission import job
from kbatch.webhooks.admission.result import merge
from unit.webhooks.world import World, job_obj

HELD = job.HELD_ANNOTATION
LABEL_ONLY = {"metadata": {"labels": {job.GROUP_LABEL: "g"}}}


def held_job(name: str, group: str = "g", world: World | None = None) -> dict[str, object]:
    obj = job_obj(name, group=group)
    return job.mutate(obj, (world or World()).view).applied_to(obj)


def test_a_job_without_the_group_annotation_passes_unchanged() -> None:
    answer = job.mutate(job_obj("plain"), World().view)
    assert (answer.allowed, answer.patch, answer.warnings) == (True, {}, ())


def test_a_job_of_a_pending_group_is_created_suspended_and_labelled() -> None:
    world = World().pod_group("g", min_member=2, phase="Pending")
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
    assert (answer.patch, answer.warnings) == (LABEL_ONLY, ())


def test_a_job_its_owner_suspended_is_not_marked_as_held() -> None:
    answer = job.mutate(job_obj("train", group="g", suspend=True), World().view)
    assert answer.patch == LABEL_ONLY
    assert not job.is_held(merge(job_obj("train", group="g", suspend=True), answer.patch))


def test_without_job_suspend_on_the_server_the_job_is_only_labelled() -> None:
    answer = job.mutate(job_obj("train", group="g"), World().view, suspend_supported=False)
    assert answer.patch == LABEL_ONLY


# --------------------------------------------------------------------------- whose Jobs
@pytest.mark.parametrize("scheduler", ["default-scheduler", "volcano", None])
def test_a_job_kbatch_does_not_schedule_passes_unchanged(scheduler: str | None) -> None:
    obj = job_obj("train", group="g")
    template = obj["spec"]["template"]["spec"]
    if scheduler is None:
        del template["schedulerName"]  # the default scheduler's
    else:
        template["schedulerName"] = scheduler
    answer = job.mutate(obj, World().pod_group("g", phase="Pending").view)
    assert (answer.patch, answer.warnings) == ({}, ())


def test_a_job_of_kbatchs_other_scheduler_name_is_held() -> None:
    obj = job_obj("train", group="g", scheduler="kube-batch")
    assert job.mutate(obj, World().view).patch["spec"] == {"suspend": True}


@pytest.mark.parametrize("name", ["My Group!", "g" * 64, "-g", "g-", "a/b"])
def test_a_group_name_that_is_no_label_value_is_not_labelled(name: str) -> None:
    answer = job.mutate(job_obj("train", group=name), World().view)
    assert "labels" not in answer.patch["metadata"] and answer.patch["spec"] == {"suspend": True}


@pytest.mark.parametrize("name", ["g", "a.b_c-1", "G" * 63, "0"])
def test_a_group_name_that_is_a_label_value_is_labelled(name: str) -> None:
    answer = job.mutate(job_obj("train", group=name), World().view)
    assert answer.patch["metadata"]["labels"] == {job.GROUP_LABEL: name}


# --------------------------------------------------------------------------- when to hold
def test_a_job_too_small_for_its_groups_min_member_is_not_held_saying_why() -> None:
    """kube-batch's example: parallelism 3 for minMember 6. Held, its group (no pods)
    would be admitted, then run 3 pods that can never make the gang."""
    world = World().pod_group("qj-1", min_member=6, phase="Pending")
    answer = job.mutate(job_obj("qj-1", group="qj-1", parallelism=3), world.view)
    assert answer.patch == {"metadata": {"labels": {job.GROUP_LABEL: "qj-1"}}}
    (warning,) = answer.warnings
    assert warning.startswith("Job not held: the Jobs of PodGroup default/qj-1 make 3 pods")
    assert "fewer than its minMember 6" in warning and "Unschedulable" in warning


def test_completions_below_parallelism_count_as_the_pods_made() -> None:
    obj = job_obj("train", group="g", parallelism=4)
    obj["spec"]["completions"] = 1
    world = World().pod_group("g", min_member=2, phase="Pending")
    assert "spec" not in job.mutate(obj, world.view).patch


def test_the_groups_jobs_together_may_make_min_member() -> None:
    world = World().pod_group("g", min_member=4, phase="Pending")
    world.jobs.append(held_job("first", world=World()))  # held before the group came
    answer = job.mutate(job_obj("second", group="g"), world.view)
    assert answer.patch["spec"] == {"suspend": True}


def test_a_job_is_not_held_once_a_sibling_was_let_through() -> None:
    """The sibling's pods exist: the group is admitted only once it has minMember pods,
    so holding this Job could wait forever."""
    world = World().pod_group("g", min_member=2, phase="Pending").job("first", "g")
    answer = job.mutate(job_obj("second", group="g"), world.view)
    assert "spec" not in answer.patch
    assert answer.warnings == (
        "Job not held: Job default/first of PodGroup default/g was not held (its pods exist), "
        "so the group's other Jobs are not held either",
    )


# --------------------------------------------------------------------------- when to release
def test_a_held_job_is_released_once_its_group_is_admitted() -> None:
    held = held_job("train")
    world = World()
    world.jobs.append(held)
    assert job.to_release([held], world.view) == []  # no group yet
    world.pod_group("g", min_member=2, phase="Pending")
    assert job.to_release([held], world.view) == []
    world.pod_group("g", min_member=2, phase="Inqueue")
    assert job.to_release([held], world.view) == [(held, "PodGroup default/g is Inqueue")]
    released = merge(held, job.release_patch())
    assert released["spec"]["suspend"] is False and HELD not in released["metadata"]["annotations"]
    assert not job.is_held(released) and job.to_release([released], world.view) == []


def test_a_held_job_is_released_when_its_group_comes_too_big_for_its_jobs() -> None:
    """Held before its group existed; the group then asks more pods than its Jobs make."""
    held = held_job("qj-1", group="qj-1")
    world = World()
    world.jobs.append(held)
    coming = job.Group("default", "qj-1", PodGroupPhase.PENDING, 6)  # being created
    ((released, why),) = job.to_release([held], world.view, coming)
    assert released is held and "make 2 pods, fewer than its minMember 6" in why


def test_a_job_its_owner_suspended_is_never_released() -> None:
    owned = job_obj("mine", group="g", suspend=True)
    world = World().pod_group("g", phase="Running")
    assert job.to_release([owned], world.view) == []


def test_a_group_being_created_decides_only_for_its_own_namespace() -> None:
    held = held_job("qj-1", group="qj-1")
    world = World()
    world.jobs.append(held)
    elsewhere = job.Group("other", "qj-1", PodGroupPhase.PENDING, 6)
    assert job.to_release([held], world.view, elsewhere) == []  # default/qj-1 is still unknown
