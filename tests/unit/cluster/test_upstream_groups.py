"""Upstream's PodGroup (scheduling.k8s.io/v1alpha3) as the kbatch PodGroup it is
scheduled as, the pod's ``spec.schedulingGroup`` as its group, and kbatch's status as
upstream's ``PodGroupInitiallyScheduled`` condition: objects in, records out, bad input
refused naming the field."""

from typing import Any

import pytest

from kbatch.api.podgroup import (
    ConditionType,
    PodGroupCondition,
    PodGroupPhase,
    PodGroupStatus,
)
from kbatch.cluster import records, upstream_groups
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState

NOW = "2026-11-26T10:00:00Z"


def upstream(
    name: str = "g",
    policy: Any = None,
    labels: dict[str, str] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 2}
    if labels:
        meta["labels"] = labels
    obj: dict[str, Any] = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "PodGroup",
        "metadata": meta,
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 3}} if policy is None else policy,
            **spec,
        },
    }
    if conditions is not None:
        obj["status"] = {"conditions": conditions}
    return obj


def group_of(obj: dict[str, Any]) -> Any:
    return records.parse_pod_group(upstream_groups.kbatch_object(obj))


@pytest.mark.parametrize(
    ("obj", "min_member", "queue", "priority"),
    [
        (upstream(), 3, "default", None),
        (upstream(policy={"basic": {}}), 1, "default", None),
        (upstream(labels={"kbatch.io/queue": "research"}), 3, "research", None),
        (upstream(priorityClassName="high", priority=1000), 3, "default", "high"),
    ],
    ids=["gang", "basic", "queue-label", "priority-class"],
)
def test_an_upstream_group_becomes_a_kbatch_gang(
    obj: dict[str, Any], min_member: int, queue: str, priority: str | None
) -> None:
    group = group_of(obj)
    assert group.metadata.name == "g" and group.metadata.namespace == "ns"
    assert group.metadata.uid == "uid-g"
    assert group.spec.min_member == min_member
    assert group.spec.queue == queue
    assert group.spec.priority_class_name == priority
    assert group.status.phase is PodGroupPhase.PENDING
    assert upstream_groups.is_upstream(upstream_groups.kbatch_object(obj))


def test_a_topology_constraint_becomes_a_required_level() -> None:
    obj = upstream(schedulingConstraints={"topology": [{"key": "kbatch.io/rack"}]})
    group = group_of(obj)
    assert records.topology_of(group) is not None
    assert records.topology_of(group).level == "kbatch.io/rack"  # type: ignore[union-attr]


def test_a_group_upstream_says_was_placed_starts_admitted() -> None:
    placed = [{"type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled"}]
    assert group_of(upstream(conditions=placed)).status.phase is PodGroupPhase.INQUEUE
    waiting = [{"type": "PodGroupInitiallyScheduled", "status": "False", "reason": "x"}]
    assert group_of(upstream(conditions=waiting)).status.phase is PodGroupPhase.PENDING


def test_kbatch_status_kept_for_it_is_given_back() -> None:
    kept = {"phase": "Running", "running": 3}
    group = records.parse_pod_group(upstream_groups.kbatch_object(upstream(), kept))
    assert group.status.phase is PodGroupPhase.RUNNING and group.status.running == 3


@pytest.mark.parametrize(
    ("obj", "field", "why"),
    [
        (upstream(policy={}), "spec.schedulingPolicy", "required"),
        (upstream(policy={"gang": {"minCount": 2}, "basic": {}}), "spec.schedulingPolicy", "not both"),
        (upstream(policy={"gang": {"minCount": 0}}), "spec.schedulingPolicy.gang.minCount", "at least 1"),
        (upstream(policy={"gang": {"minCount": -2}}), "spec.schedulingPolicy.gang.minCount", "at least 1"),
        (upstream(policy={"gang": {}}), "spec.schedulingPolicy.gang.minCount", "required"),
        (upstream(policy={"gang": {"minCount": "3"}}), "spec.schedulingPolicy.gang.minCount", "integer"),
        (upstream(policy={"gang": 3}), "spec.schedulingPolicy.gang", "map"),
        (upstream(parentCompositePodGroupName="top"), "spec.parentCompositePodGroupName", "CompositePodGroup"),
        (upstream(schedulingConstraints={"topology": [{"key": "a"}, {"key": "b"}]}),
         "spec.schedulingConstraints.topology", "one"),
        (upstream(labels={"kbatch.io/queue": 7}), "metadata.labels.kbatch.io/queue", "string"),  # type: ignore[dict-item]
    ],
    ids=["no-policy", "both", "zero", "negative", "no-count", "text-count", "gang-not-map",
         "composite", "two-levels", "queue-not-text"],
)  # fmt: skip
def test_bad_input_is_refused_naming_the_field(obj: dict[str, Any], field: str, why: str) -> None:
    with pytest.raises(ObjectError) as refused:
        upstream_groups.kbatch_object(obj)
    assert refused.value.ref == "PodGroup ns/g"
    assert refused.value.field == field
    assert why in refused.value.why


def test_a_missing_spec_is_refused() -> None:
    obj = upstream()
    del obj["spec"]
    with pytest.raises(ObjectError, match=r"spec\.schedulingPolicy: required"):
        upstream_groups.kbatch_object(obj)


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", **spec.pop("meta", {})},
        "spec": {"schedulerName": "kbatch", "containers": [{"name": "c"}], **spec},
    }


def test_a_pod_joins_the_group_its_scheduling_group_names() -> None:
    record = records.parse_pod(pod(schedulingGroup={"podGroupName": "g"}))
    assert record.group == "g" and record.unit == "ns/g"
    assert records.parse_pod(pod()).group is None
    annotated = pod(
        schedulingGroup={"podGroupName": "g"},
        meta={"annotations": {"scheduling.k8s.io/group-name": "mine"}},
    )
    assert records.parse_pod(annotated).group == "mine", "kbatch's annotation first"
    with pytest.raises(ObjectError, match=r"spec\.schedulingGroup\.podGroupName"):
        records.parse_pod(pod(schedulingGroup={"podGroupName": 5}))


def waiting(message: str = "2/3 tasks in gang unschedulable") -> PodGroupStatus:
    told = PodGroupCondition(
        type=ConditionType.UNSCHEDULABLE, status="True", reason="NotEnoughResources",
        message=message,
    )  # fmt: skip
    return PodGroupStatus(phase=PodGroupPhase.INQUEUE, conditions=(told,))


def test_a_waiting_gang_is_told_unschedulable_with_kbatch_words() -> None:
    condition = upstream_groups.condition_to_write(waiting(), upstream(), NOW)
    assert condition == {
        "type": "PodGroupInitiallyScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "2/3 tasks in gang unschedulable",
        "lastTransitionTime": NOW,
        "observedGeneration": 2,
    }
    said = upstream(conditions=[{**condition, "lastTransitionTime": "earlier"}])
    assert upstream_groups.condition_to_write(waiting(), said, NOW) is None, "said already"
    other = upstream_groups.condition_to_write(waiting("1/3 tasks"), said, NOW)
    assert other is not None and other["message"] == "1/3 tasks"
    assert other["lastTransitionTime"] == "earlier", "the same status keeps its time"


def test_a_placed_gang_is_told_scheduled_and_that_is_final() -> None:
    running = PodGroupStatus(phase=PodGroupPhase.RUNNING, running=3)
    said = upstream(conditions=[upstream_groups.condition_to_write(waiting(), upstream(), "t0")])
    condition = upstream_groups.condition_to_write(running, said, NOW)
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "Scheduled")
    assert condition["lastTransitionTime"] == NOW
    final = upstream(conditions=[condition])
    assert upstream_groups.condition_to_write(waiting(), final, NOW) is None, "never back"


def test_a_status_that_says_nothing_writes_nothing() -> None:
    pending = PodGroupStatus(phase=PodGroupPhase.PENDING)
    assert upstream_groups.condition_to_write(pending, upstream(), NOW) is None


def test_a_kbatch_relist_keeps_the_upstream_groups() -> None:
    state = ClusterState()
    state.apply(upstream_groups.kbatch_object(upstream("up")))
    mine = {"apiVersion": "scheduling.incubator.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "mine", "namespace": "ns"}}  # fmt: skip
    state.replace("PodGroup", [mine])
    assert sorted(state.pod_groups()) == ["ns/mine", "ns/up"]
    state.replace("PodGroup", [])
    assert sorted(state.pod_groups()) == ["ns/up"]


def test_the_version_it_came_from_is_kept() -> None:
    beta = {**upstream(), "apiVersion": "scheduling.k8s.io/v1beta1"}
    made = upstream_groups.kbatch_object(beta)
    assert upstream_groups.origin_of(made) == "scheduling.k8s.io/v1beta1"
    assert upstream_groups.origin_of(upstream_groups.kbatch_object(upstream())) == (
        "scheduling.k8s.io/v1alpha3"
    )
    assert upstream_groups.origin_of({"metadata": {"name": "mine"}}) is None
    path = upstream_groups.status_path("ns", "g", "scheduling.k8s.io/v1beta1")
    assert path == "/apis/scheduling.k8s.io/v1beta1/namespaces/ns/podgroups/g/status"


def test_a_disruption_is_told_until_the_object_says_it() -> None:
    told = upstream_groups.disruption_to_write(upstream(), "kbatch evicts pod ns/p0", NOW)
    assert told == {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": "PreemptionByScheduler",
        "message": "kbatch evicts pod ns/p0",
        "lastTransitionTime": NOW,
        "observedGeneration": 2,
    }
    said = upstream(conditions=[told])
    assert upstream_groups.disruption_to_write(said, "again", NOW) is None
