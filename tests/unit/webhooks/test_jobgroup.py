"""Jobs without a hand-written PodGroup: a Job labelled kbatch.io/queue is pointed at a
group named as itself and held; the group kbatch makes for it; bad input refused
naming the field."""

from typing import Any

import pytest

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.webhooks.admission import chain, job, jobgroup
from unit.webhooks.world import World, job_obj

HELD = job.HELD_ANNOTATION


def labelled(name: str = "train", queue: str = "default", **fields: Any) -> dict[str, Any]:
    obj = job_obj(name, **fields)
    obj["metadata"]["labels"] = {jobgroup.QUEUE_LABEL: queue}
    return obj


def unset_scheduler(obj: dict[str, Any]) -> dict[str, Any]:
    del obj["spec"]["template"]["spec"]["schedulerName"]
    return obj


def test_a_labelled_job_joins_a_group_named_as_itself_and_is_held() -> None:
    obj = unset_scheduler(labelled())
    answer = job.mutate(obj, World().view)
    assert answer.allowed
    created = answer.applied_to(obj)
    template = created["spec"]["template"]
    assert template["metadata"]["annotations"] == {GROUP_NAME_ANNOTATION: "train"}
    assert template["spec"]["schedulerName"] == "kbatch"
    assert created["metadata"]["labels"] == {
        jobgroup.QUEUE_LABEL: "default",
        job.GROUP_LABEL: "train",
    }
    assert job.is_held(created)
    assert "PodGroup default/train does not exist yet" in created["metadata"]["annotations"][HELD]
    assert jobgroup.makes_group(created, World().view.scheduler_names())


@pytest.mark.parametrize(
    ("written", "kept"),
    [("default-scheduler", "kbatch"), ("kube-batch", "kube-batch"), ("", "kbatch")],
)
def test_kbatchs_scheduler_name_replaces_only_the_default(written: str, kept: str) -> None:
    obj = labelled(scheduler=written)
    created = job.mutate(obj, World().view).applied_to(obj)
    assert created["spec"]["template"]["spec"]["schedulerName"] == kept


def test_a_job_another_scheduler_runs_is_left_alone_with_a_warning() -> None:
    answer = job.mutate(labelled(scheduler="volcano"), World().view)
    assert answer.allowed and answer.patch == {}
    assert answer.warnings == (
        "spec.template.spec.schedulerName: 'volcano' schedules this Job's pods, not kbatch; "
        "its label kbatch.io/queue is ignored",
    )


def test_a_labelled_job_that_names_its_own_group_keeps_it() -> None:
    obj = labelled(group="mine")
    created = job.mutate(obj, World().view).applied_to(obj)
    annotations = created["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {GROUP_NAME_ANNOTATION: "mine"}
    assert job.is_held(created)  # the usual delayed pod creation for its group
    assert not jobgroup.makes_group(created, World().view.scheduler_names())


@pytest.mark.parametrize("count", ["parallelism", "completions"])
def test_zero_pods_is_refused_naming_the_field(count: str) -> None:
    obj = labelled()
    obj["spec"][count] = 0
    answer = chain.admit(obj, None, World().view)
    assert not answer.allowed and answer.code == 422
    assert answer.message.startswith(f"spec.{count}: 0 pods make no gang")


def test_a_job_without_a_name_is_refused_naming_it() -> None:
    obj = labelled()
    obj["metadata"] = {"generateName": "train-", "labels": obj["metadata"]["labels"]}
    answer = job.mutate(obj, World().view)
    assert not answer.allowed and answer.message.startswith("metadata.name: a Job labelled")


def test_an_empty_queue_label_is_refused_naming_it() -> None:
    answer = job.mutate(labelled(queue=""), World().view)
    assert not answer.allowed
    assert answer.message.startswith("metadata.labels[kbatch.io/queue]: empty")


def test_a_missing_queue_is_told_naming_the_label_and_the_job_is_held() -> None:
    obj = labelled(queue="nope")
    answer = job.mutate(obj, World().view)
    assert answer.allowed and job.is_held(answer.applied_to(obj))
    assert answer.warnings[0] == (
        "metadata.labels[kbatch.io/queue]: queue 'nope' does not exist; the Job waits, "
        "suspended, until it does (its PodGroup is made then)"
    )
    known = job.mutate(labelled(queue="q1"), World().queue("q1").view)
    assert not any(w.startswith(jobgroup.QUEUE_FIELD) for w in known.warnings)


def test_a_job_without_the_label_passes_as_before() -> None:
    assert job.mutate(job_obj("plain"), World().view).patch == {}


# --------------------------------------------------------------------------- the group
def made(obj: dict[str, Any]) -> dict[str, Any]:
    created = job.mutate(obj, World().view).applied_to(obj)
    created["metadata"].update(uid="uid-1", namespace="team")
    return jobgroup.pod_group_for(created, job.pods_made(created))


def test_the_group_is_owned_by_the_job_in_the_labels_queue() -> None:
    group = made(labelled(queue="research", cpu="500m", memory="1Gi", parallelism=4))
    assert group["metadata"] == {
        "name": "train",
        "namespace": "team",
        "labels": {jobgroup.QUEUE_LABEL: "research"},
        "ownerReferences": [
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "train",
                "uid": "uid-1",
                "controller": True,
            }
        ],
    }
    assert group["spec"] == {
        "minMember": 4,
        "queue": "research",
        "minResources": {"cpu": "2", "memory": "4Gi", "pods": "4"},
    }


def test_min_member_is_the_pods_the_job_runs_at_once() -> None:
    obj = labelled(parallelism=4)
    obj["spec"]["completions"] = 2  # Kubernetes runs 2 pods at once, never 4
    assert made(obj)["spec"]["minMember"] == 2
    unset = labelled()
    del unset["spec"]["parallelism"]  # Kubernetes' default: 1
    assert made(unset)["spec"]["minMember"] == 1


def test_min_resources_follow_kubernetes_pod_request_rule() -> None:
    """max(sum of the containers, the largest init container) + overhead, per pod."""
    obj = labelled(cpu="1", parallelism=2)
    spec = obj["spec"]["template"]["spec"]
    spec["initContainers"] = [
        {"name": "fetch", "image": "busybox", "resources": {"requests": {"cpu": "3"}}}
    ]
    spec["overhead"] = {"cpu": "250m"}
    spec["priorityClassName"] = "high"
    group = made(obj)
    assert group["spec"]["minResources"] == {"cpu": "6500m", "pods": "2"}
    assert group["spec"]["priorityClassName"] == "high"


def test_a_refused_queue_is_told_as_the_label() -> None:
    obj = {"metadata": {"name": "train", "namespace": "team"}}
    told = jobgroup.refusal_message(
        obj, "HTTP 422: spec.queue: queue 'x' does not exist; create it or name another queue"
    )
    assert told == (
        "metadata.labels[kbatch.io/queue]: PodGroup team/train not made, the Job waits, "
        "suspended: spec.queue: queue 'x' does not exist; create it or name another queue"
    )
    quota = jobgroup.refusal_message(obj, "HTTP 403: spec.minResources.cpu: more than allowed")
    assert quota.startswith("PodGroup team/train not made") and "spec.minResources.cpu" in quota


def test_a_queue_with_children_is_told_naming_the_label_and_them() -> None:
    from unit.webhooks.test_queue_tree import tree_queue, world

    there = world(tree_queue("org"), tree_queue("a1", "org"), tree_queue("a2", "org"))
    obj = labelled(queue="org")
    answer = job.mutate(obj, there.view)
    assert answer.allowed and job.is_held(answer.applied_to(obj))
    assert (
        "metadata.labels[kbatch.io/queue]: PodGroup default/train not made, the Job waits, "
        "suspended: queue 'org' has child queues (a1, a2): PodGroups go in leaf queues only; "
        "name one of its leaves (the group is made once the label names a leaf queue)"
    ) in answer.warnings
    leaf = job.mutate(labelled(queue="a1"), there.view)
    assert not any("child queues" in w for w in leaf.warnings)
