"""PodGroupMinResources and PodGroup validation: accept, mutate, reject with a message."""

import pytest

from kbatch.webhooks.admission import podgroup
from kbatch.webhooks.admission.result import merge
from unit.webhooks.world import World, job_obj, pod_group_obj


# --------------------------------------------------------------------------- minResources
def test_min_resources_are_filled_from_min_member_times_the_jobs_pod() -> None:
    world = World().job("train", group="g", cpu="500m", memory="1Gi")
    answer = podgroup.mutate(pod_group_obj("g", min_member=4), None, world.view)
    assert answer.allowed
    assert answer.patch == {"spec": {"minResources": {"cpu": "2", "memory": "4Gi", "pods": "4"}}}
    assert answer.applied_to(pod_group_obj("g", min_member=4))["spec"]["minResources"]["cpu"] == "2"


def test_min_resources_given_are_kept() -> None:
    world = World().job("train", group="g", cpu="1")
    obj = pod_group_obj("g", min_member=4, min_resources={"cpu": "1"})
    answer = podgroup.mutate(obj, None, world.view)
    assert (answer.allowed, answer.patch) == (True, {})


def test_without_a_known_job_nothing_is_filled() -> None:
    world = World().job("other", group="h", namespace="elsewhere")
    for obj in (pod_group_obj("g", min_member=3), pod_group_obj("h", min_member=3)):
        answer = podgroup.mutate(obj, None, world.view)
        assert (answer.allowed, answer.patch) == (True, {})


def test_jobs_with_different_pods_fill_the_smallest_request_and_warn() -> None:
    world = World().job("a", group="g", cpu="2", memory="1Gi").job("b", group="g", cpu="1")
    answer = podgroup.mutate(pod_group_obj("g", min_member=2), None, world.view)
    assert answer.patch == {"spec": {"minResources": {"cpu": "2", "pods": "2"}}}
    assert len(answer.warnings) == 1 and "2 Jobs" in answer.warnings[0]


@pytest.mark.parametrize("min_member", [0, "3", None, True])
def test_a_bad_min_member_fills_nothing(min_member: object) -> None:
    world = World().job("train", group="g")
    answer = podgroup.mutate(pod_group_obj("g", min_member=min_member), None, world.view)
    assert (answer.allowed, answer.patch) == (True, {})


def test_a_bad_quantity_is_rejected_naming_the_field() -> None:
    obj = pod_group_obj("g", min_resources={"cpu": "lots"})
    answer = podgroup.mutate(obj, None, World().view)
    assert not answer.allowed
    assert answer.message.startswith("spec.minResources.cpu: 'lots' is not a Kubernetes quantity")


# --------------------------------------------------------------------------- quota
def quota_world() -> World:
    world = World().quota(
        "compute", {"requests.cpu": "8", "limits.cpu": "1", "count/jobs.batch": "1"}
    )
    world.pod_group("a", min_resources={"cpu": "3"}).pod_group("b", min_resources={"cpu": "2"})
    world.pod_group("done", min_resources={"cpu": "100"}, phase="Completed")
    world.pod_group("other-ns", namespace="team-b", min_resources={"cpu": "100"})
    return world


def test_within_the_quota_is_admitted() -> None:
    obj = pod_group_obj("c", min_resources={"cpu": "3"})
    assert podgroup.mutate(obj, None, quota_world().view).allowed


def test_past_the_quota_is_rejected_naming_resource_quota_and_numbers() -> None:
    obj = pod_group_obj("c", min_resources={"cpu": "3500m"})
    answer = podgroup.mutate(obj, None, quota_world().view)
    assert not answer.allowed and answer.code == 403
    assert answer.message == (
        "spec.minResources.cpu: the PodGroups of namespace default would need 8500m "
        "(5 for 2 other PodGroups + 3500m for this one), more than ResourceQuota "
        "default/compute allows (hard requests.cpu: 8)"
    )


def test_a_filled_min_resources_is_checked_against_the_quota() -> None:
    world = World().quota("small", {"pods": "3"}).job("train", group="g")
    answer = podgroup.mutate(pod_group_obj("g", min_member=4), None, world.view)
    assert not answer.allowed
    assert answer.message == (
        "spec.minResources.pods: this PodGroup alone needs 4, more than ResourceQuota "
        "default/small allows (hard pods: 3)"
    )


@pytest.mark.parametrize(
    ("hard", "need", "allowed"),
    [
        ({"cpu": "2"}, {"cpu": "3"}, False),
        ({"requests.memory": "1Gi"}, {"memory": "2Gi"}, False),
        ({"requests.nvidia.com/gpu": "1"}, {"nvidia.com/gpu": "2"}, False),
        ({"limits.cpu": "1"}, {"cpu": "3"}, True),  # minResources are requests
        ({"requests.storage": "1"}, {"storage": "3"}, True),  # volumes' storage
        ({"cpu": "2"}, {"memory": "3Gi"}, True),  # a resource the quota does not bound
    ],
)
def test_quota_keys_bound_the_resources_pods_request(
    hard: dict[str, str], need: dict[str, str], allowed: bool
) -> None:
    world = World().quota("q", hard)
    assert (
        podgroup.mutate(pod_group_obj("g", min_resources=need), None, world.view).allowed is allowed
    )


def test_an_update_is_checked_only_when_min_resources_change() -> None:
    world = quota_world().pod_group("c", min_resources={"cpu": "9"})  # set before the quota
    old = pod_group_obj("c", min_resources={"cpu": "9"})
    relabelled = pod_group_obj("c", min_resources={"cpu": "9"}, min_member=2)
    assert podgroup.mutate(relabelled, old, world.view).allowed
    grown = pod_group_obj("c", min_resources={"cpu": "10"})
    answer = podgroup.mutate(grown, old, world.view)
    assert not answer.allowed and "(5 for 2 other PodGroups + 10 for this one)" in answer.message


# --------------------------------------------------------------------------- quota scopes
def _selector(operator: str, *values: str) -> dict[str, object]:
    expression: dict[str, object] = {"scopeName": "PriorityClass", "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"scopeSelector": {"matchExpressions": [expression]}}


@pytest.mark.parametrize(
    ("scoping", "priority_class", "applies"),
    [
        ({}, None, True),  # unscoped: every PodGroup
        ({"scopes": ["BestEffort"]}, None, False),  # scopes kbatch cannot judge: skipped
        ({"scopes": ["NotBestEffort"]}, "high", False),
        ({"scopes": ["Terminating"]}, None, False),
        ({"scopes": ["NotTerminating"]}, None, False),
        ({"scopes": ["PriorityClass"]}, "high", True),  # listed: Exists
        ({"scopes": ["PriorityClass"]}, None, False),
        (_selector("In", "high", "top"), "high", True),
        (_selector("In", "high"), "low", False),
        (_selector("In", "high"), None, False),
        (_selector("NotIn", "low"), "high", True),
        (_selector("NotIn", "high"), "high", False),
        (_selector("NotIn", "low"), None, True),
        (_selector("Exists"), "low", True),
        (_selector("Exists"), None, False),
        (_selector("DoesNotExist"), None, True),
        (_selector("DoesNotExist"), "high", False),
        ({"scopeSelector": {"matchExpressions": [{"scopeName": "BestEffort", "operator": "Exists"}]}},
         None, False),
    ],
)  # fmt: skip
def test_a_quota_applies_only_to_the_pod_groups_its_scope_selects(
    scoping: dict[str, object], priority_class: str | None, applies: bool
) -> None:
    """Kubernetes' semantics, for the PodGroup's priorityClassName: 3 cpu past a quota
    of 2 is refused where the quota applies."""
    world = World().quota("scoped", {"requests.cpu": "2"}, **scoping)
    obj = pod_group_obj("b", min_resources={"cpu": "3"}, priority_class=priority_class)
    assert podgroup.mutate(obj, None, world.view).allowed is not applies


def test_a_scoped_quota_counts_only_the_pod_groups_it_selects() -> None:
    world = World().quota("scoped", {"requests.cpu": "2"}, **_selector("In", "low"))
    world.pod_group("a", min_resources={"cpu": "2"}, priority_class="high")  # not counted
    world.pod_group("c", min_resources={"cpu": "1"}, priority_class="low")
    within = pod_group_obj("b", min_resources={"cpu": "1"}, priority_class="low")
    assert podgroup.mutate(within, None, world.view).allowed
    past = pod_group_obj("b", min_resources={"cpu": "2"}, priority_class="low")
    answer = podgroup.mutate(past, None, world.view)
    assert not answer.allowed
    assert "would need 3 (1 for 1 other PodGroup + 2 for this one)" in answer.message


# --------------------------------------------------------------------------- a Job after its group
def test_a_job_fills_the_min_resources_of_its_group_created_before_it() -> None:
    world = World().pod_group("g", min_member=3)  # no Job known when it was created
    fill = podgroup.fill_from_job(job_obj("train", group="g", cpu="500m"), world.view)
    assert fill == ("default", "g", {"spec": {"minResources": {"cpu": "1500m", "pods": "3"}}})


def test_a_job_fills_nothing_where_min_resources_are_set_or_there_is_no_group() -> None:
    world = World().pod_group("set", min_resources={"cpu": "1"})
    assert podgroup.fill_from_job(job_obj("a", group="set"), world.view) is None
    assert podgroup.fill_from_job(job_obj("b", group="none"), world.view) is None
    other = job_obj("c", group="set", scheduler="default-scheduler")
    assert podgroup.fill_from_job(other, World().pod_group("set").view) is None


def test_the_fill_goes_through_the_quota_as_an_update() -> None:
    world = World().quota("small", {"requests.cpu": "1"}).pod_group("g", min_member=2)
    old = pod_group_obj("g", min_member=2)
    fill = podgroup.fill_from_job(job_obj("train", group="g"), world.view)
    assert fill is not None
    answer = podgroup.mutate(merge(old, fill[2]), old, world.view)
    assert not answer.allowed
    assert "this PodGroup alone needs 2, more than ResourceQuota default/small" in answer.message


# --------------------------------------------------------------------------- validation
def test_a_valid_pod_group_is_admitted() -> None:
    world = World().queue("q1")
    assert podgroup.validate(pod_group_obj("g", min_member=2, queue="q1"), None, world.view).allowed
    assert podgroup.validate(pod_group_obj("g"), None, world.view).allowed  # the default queue


@pytest.mark.parametrize("min_member", [0, -1, "2", 1.5, True])
def test_min_member_must_be_at_least_one(min_member: object) -> None:
    answer = podgroup.validate(pod_group_obj("g", min_member=min_member), None, World().view)
    assert not answer.allowed and answer.code == 422
    assert answer.message.startswith("spec.minMember: must be an integer ≥ 1")
    assert repr(min_member) in answer.message


def test_the_queue_must_exist() -> None:
    answer = podgroup.validate(pod_group_obj("g", queue="nope"), None, World().view)
    assert not answer.allowed
    assert answer.message == (
        "spec.queue: queue 'nope' does not exist; create it or name another queue"
    )


def test_a_closed_queue_admits_no_new_pod_groups() -> None:
    world = World().queue("shut", state="Closed")
    answer = podgroup.validate(pod_group_obj("g", queue="shut"), None, world.view)
    assert not answer.allowed
    assert answer.message == "spec.queue: queue 'shut' is Closed: it admits no new PodGroups"
    # a group it holds already may still change
    old = pod_group_obj("g", queue="shut")
    assert podgroup.validate(
        pod_group_obj("g", queue="shut", min_member=2), old, world.view
    ).allowed
    # but no group may move into it
    moved = podgroup.validate(pod_group_obj("g", queue="shut"), pod_group_obj("g"), world.view)
    assert not moved.allowed


def test_a_queue_created_after_the_watch_is_seen_through_the_extra_queues() -> None:
    from kbatch.api.queue import Queue
    from kbatch.webhooks.admission.view import StateView
    from unit.webhooks.world import queue_obj

    world = World()
    view = StateView(world.state, queues={"fresh": Queue.model_validate(queue_obj("fresh"))})
    assert podgroup.validate(pod_group_obj("g", queue="fresh"), None, view).allowed
