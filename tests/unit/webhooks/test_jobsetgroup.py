"""JobSets without a hand-written PodGroup: a JobSet labelled kbatch.io/queue has every
Job's pods pointed at one group named as the JobSet and is held itself; the group
kbatch makes for it; bad input refused naming the field."""

from typing import Any

import pytest

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.webhooks.admission import job, jobgroup, jobsetgroup
from unit.webhooks.world import World

HELD = job.HELD_ANNOTATION


def replicated(
    name: str, replicas: int = 1, parallelism: int = 2, **job_spec: Any
) -> dict[str, Any]:
    pod = {
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
            }
        ],
        "restartPolicy": "Never",
    }
    spec = {"parallelism": parallelism, "template": {"spec": pod}, **job_spec}
    return {"name": name, "replicas": replicas, "template": {"spec": spec}}


def jobset(
    name: str = "train", queue: str | None = "default", *entries: dict[str, Any]
) -> dict[str, Any]:
    """A JobSet as a user writes it: a queue label, no PodGroup, no schedulerName."""
    meta: dict[str, Any] = {"name": name, "namespace": "team"}
    if queue is not None:
        meta["labels"] = {jobgroup.QUEUE_LABEL: queue}
    replicated_jobs = list(entries) or [replicated("leader", 1, 1), replicated("workers", 2, 2)]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {"replicatedJobs": replicated_jobs},
    }


def templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["template"]["spec"]["template"] for e in obj["spec"]["replicatedJobs"]]


def test_every_jobs_pods_join_one_group_named_as_the_jobset_and_it_is_held() -> None:
    obj = jobset()
    answer = jobsetgroup.mutate(obj, World().view)
    assert answer.allowed
    created = answer.applied_to(obj)
    for template in templates(created):
        assert template["metadata"]["annotations"] == {GROUP_NAME_ANNOTATION: "train"}
        assert template["spec"]["schedulerName"] == "kbatch"
        assert template["spec"]["containers"][0]["name"] == "c", "the rest of the template kept"
    assert [e["name"] for e in created["spec"]["replicatedJobs"]] == ["leader", "workers"]
    assert created["spec"]["suspend"] is True
    assert created["metadata"]["annotations"][HELD].startswith(
        "PodGroup team/train does not exist yet; kbatch resumes the JobSet"
    )
    assert job.is_held(created)
    assert jobsetgroup.makes_group(created, frozenset({"kbatch"}))


def test_the_group_sums_every_replicated_jobs_pods() -> None:
    created = jobsetgroup.mutate(obj := jobset(), World().view).applied_to(obj)
    created["metadata"]["uid"] = "uid-train"
    group = jobsetgroup.pod_group_for(created)
    assert group["spec"] == {
        "minMember": 5,  # 1 × 1 + 2 × 2
        "queue": "default",
        "minResources": {"cpu": "5", "memory": "5Gi", "pods": "5"},
    }
    assert group["metadata"]["ownerReferences"] == [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "train",
         "uid": "uid-train", "controller": True}
    ]  # fmt: skip
    assert group["metadata"]["labels"] == {jobgroup.QUEUE_LABEL: "default"}


def test_a_jobs_completions_below_its_parallelism_bound_its_pods() -> None:
    obj = jobset("t", "default", replicated("w", replicas=3, parallelism=4, completions=2))
    assert jobsetgroup.min_member(obj) == 6


def test_in_order_the_gang_is_the_first_replicated_job_and_the_room_is_for_all() -> None:
    """JobSet's controller makes the workers' Jobs only once the leader's pods run: a
    gang of all five would wait for ever. The room asked for is still everyone's."""
    obj = jobset()
    obj["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    created = jobsetgroup.mutate(obj, World().view).applied_to(obj)
    created["metadata"]["uid"] = "uid-train"
    spec = jobsetgroup.pod_group_for(created)["spec"]
    assert spec["minMember"] == 1
    assert spec["minResources"] == {"cpu": "5", "memory": "5Gi", "pods": "5"}


def test_replicated_jobs_that_depend_on_others_are_not_in_the_gang() -> None:
    obj = jobset()
    obj["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "leader", "status": "Ready"}]
    assert jobsetgroup.min_member(obj) == 1


def test_a_jobset_whose_group_is_admitted_is_not_held() -> None:
    world = World().pod_group("train", namespace="team", min_member=5, phase="Inqueue")
    answer = jobsetgroup.mutate(jobset(), world.view)
    assert answer.allowed and "suspend" not in answer.patch["spec"]
    assert "metadata" not in answer.patch


def test_a_jobset_its_owner_suspended_is_not_marked_held() -> None:
    obj = jobset()
    obj["spec"]["suspend"] = True
    created = jobsetgroup.mutate(obj, World().view).applied_to(obj)
    assert not job.is_held(created), "kbatch never releases what its owner suspended"


def test_unlabelled_jobsets_and_ones_naming_a_group_pass_unchanged() -> None:
    assert jobsetgroup.mutate(jobset(queue=None), World().view).patch == {}
    own = jobset()
    own["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = {
        "annotations": {GROUP_NAME_ANNOTATION: "mine"}
    }
    assert jobsetgroup.mutate(own, World().view).patch == {}


def test_another_schedulers_jobset_is_left_with_a_warning() -> None:
    obj = jobset()
    obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["schedulerName"] = (
        "volcano"
    )
    answer = jobsetgroup.mutate(obj, World().view)
    assert answer.allowed and answer.patch == {}
    (warning,) = answer.warnings
    assert warning.startswith(
        "spec.replicatedJobs[1].template.spec.template.spec.schedulerName: 'volcano'"
    )


def test_a_missing_queue_is_told_naming_the_label_and_the_jobset_held() -> None:
    answer = jobsetgroup.mutate(jobset(queue="later"), World().view)
    assert answer.allowed and answer.patch["spec"]["suspend"] is True
    assert any(
        w.startswith("metadata.labels[kbatch.io/queue]: queue 'later' does not exist")
        for w in answer.warnings
    )


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        (replicated("w", replicas=0), "spec.replicatedJobs[0].replicas"),
        (replicated("w", parallelism=0), "spec.replicatedJobs[0].template.spec.parallelism"),
        (replicated("w", completions=0), "spec.replicatedJobs[0].template.spec.completions"),
    ],
)
def test_no_pods_is_refused_naming_the_field(entry: dict[str, Any], field: str) -> None:
    answer = jobsetgroup.mutate(jobset("t", "default", entry), World().view)
    assert not answer.allowed
    assert answer.message.startswith(f"{field}: 0 pods make no gang")


def test_bad_input_is_refused_naming_the_field() -> None:
    unnamed = jobset()
    del unnamed["metadata"]["name"]
    unnamed["metadata"]["generateName"] = "train-"
    assert jobsetgroup.mutate(unnamed, World().view).message.startswith("metadata.name: ")
    assert jobsetgroup.mutate(jobset(queue=""), World().view).message.startswith(
        "metadata.labels[kbatch.io/queue]: empty"
    )
    empty = jobset()
    empty["spec"]["replicatedJobs"] = []
    assert jobsetgroup.mutate(empty, World().view).message.startswith("spec.replicatedJobs: empty")
    misshapen = jobset()
    misshapen["spec"]["replicatedJobs"][0]["replicas"] = "two"
    assert jobsetgroup.mutate(misshapen, World().view).message.startswith(
        "spec.replicatedJobs[0].replicas: "
    )


def test_a_held_jobset_is_released_once_its_group_is_admitted() -> None:
    created = jobsetgroup.mutate(obj := jobset(), World().view).applied_to(obj)
    assert jobsetgroup.to_release(created, World().view) is None
    pending = World().pod_group("train", namespace="team", min_member=5, phase="Pending")
    assert jobsetgroup.to_release(created, pending.view) is None
    admitted = World().pod_group("train", namespace="team", min_member=5, phase="Inqueue")
    assert jobsetgroup.to_release(created, admitted.view) == "PodGroup team/train is Inqueue"


def test_a_queue_with_children_is_told_naming_the_label_and_them() -> None:
    from unit.webhooks.test_queue_tree import tree_queue, world

    there = world(tree_queue("org"), tree_queue("a1", "org"))
    answer = jobsetgroup.mutate(jobset(queue="org"), there.view)
    assert answer.allowed and answer.patch["spec"]["suspend"] is True
    assert (
        "metadata.labels[kbatch.io/queue]: PodGroup team/train not made, the JobSet "
        "waits, suspended: queue 'org' has child queues (a1): PodGroups go in leaf queues "
        "only; name one of its leaves (the group is made once the label names a leaf queue)"
    ) in answer.warnings
    leaf = jobsetgroup.mutate(jobset(queue="a1"), there.view)
    assert not any("child queues" in w for w in leaf.warnings)
