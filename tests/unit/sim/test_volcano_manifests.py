"""The simulator reads Volcano's scheduling.volcano.sh/v1beta1 PodGroup and Queue as
kbatch's own (``kbatch.cluster.volcano``): the same fields mapped, Volcano's defaults,
harmless Volcano-only fields left out with one note, the rest refused naming the field."""

from typing import Any

import pytest

from kbatch.api import API_VERSION
from kbatch.cluster import volcano
from kbatch.sim import manifests, runner, validation

V1BETA1 = "scheduling.volcano.sh/v1beta1"


def queue(name: str, spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": V1BETA1,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
        **extra,
    }


def group(name: str, spec: dict[str, Any], **extra: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": "ns"}
    return {"apiVersion": V1BETA1, "kind": "PodGroup", "metadata": meta, "spec": spec, **extra}


def only(documents: list[Any]) -> manifests.Manifests:
    return manifests.load_documents(documents)


def test_a_queue_reads_as_kbatchs_own_with_its_tree_fields() -> None:
    spec = {
        "weight": 3,
        "parent": "team",
        "capability": {"cpu": "8"},
        "guarantee": {"resource": {"cpu": "2"}},
        "deserved": {"cpu": "4"},
        "reclaimable": False,
    }
    (item,) = only([queue("q", spec)]).objects
    assert item.obj["apiVersion"] == API_VERSION
    assert item.obj["spec"] == spec
    assert item.obj["metadata"]["annotations"] == {volcano.ORIGIN_ANNOTATION: V1BETA1}
    assert validation.refusal(item.obj) is None


def test_volcanos_defaults_and_a_closed_state() -> None:
    closed = queue("q", {"weight": 0}, status={"state": "Closed", "running": 2})
    (item,) = only([closed]).objects
    assert item.obj["spec"] == {"state": "Closed"}  # weight 0 is Volcano's 1, kbatch's default
    assert "status" not in item.obj  # the scheduler's to write


def test_a_podgroup_keeps_its_spec_and_status() -> None:
    spec = {"minMember": 2, "minTaskMember": {"w": 2}, "queue": "q", "minResources": {"cpu": "2"}}
    status = {"phase": "Running", "running": 2}
    (item,) = only([group("g", {**spec, "priorityClassName": "high"}, status=status)]).objects
    assert item.obj["spec"] == {**spec, "priorityClassName": "high"}
    assert item.obj["status"] == status
    assert item.obj["metadata"]["namespace"] == "ns"


def test_a_podgroup_of_volcanos_job_controller_reserves_its_plain_resources() -> None:
    # What Volcano's Job controller (v1.15.1) writes for 4 pods of 1 cpu, 1Gi and a GPU
    # limit: a pod's ResourceQuota usage times 4. Read as Volcano's scheduler reads it.
    written = {
        "count/pods": "4",
        "cpu": "4",
        "limits.nvidia.com/gpu": "4",
        "memory": "4Gi",
        "nvidia.com/gpu": "4",
        "pods": "4",
        "requests.cpu": "4",
        "requests.memory": "4Gi",
        "requests.nvidia.com/gpu": "4",
    }
    spec = {"minMember": 4, "minTaskMember": {"master": 1, "worker": 3}, "minResources": written}
    (item,) = only([group("g", spec, status={})]).objects
    assert item.obj["spec"]["minResources"] == {
        "cpu": "4",
        "memory": "4Gi",
        "nvidia.com/gpu": "4",
        "pods": "4",
    }
    assert validation.refusal(item.obj) is None


def test_role_minimums_past_min_member_are_left_out_as_volcanos_scheduler_skips_them() -> None:
    # An elastic vcjob (minAvailable 2 of a master and three workers, no minAvailable per
    # task): Volcano's Job controller writes each task's replicas as its minimum.
    elastic = {"minMember": 2, "minTaskMember": {"master": 1, "worker": 3}}
    (item,) = only([group("g", elastic)]).objects
    assert item.obj["spec"] == {"minMember": 2}
    whole = {"minMember": 4, "minTaskMember": {"master": 1, "worker": 3}}
    (item,) = only([group("g", whole)]).objects
    assert item.obj["spec"] == whole
    bad = {"minMember": 2, "minTaskMember": {"master": "1", "worker": 3}}
    (item,) = only([group("g", bad)]).objects
    why = validation.refusal(item.obj)
    assert why is not None and why.startswith("spec.minTaskMember"), why


def test_a_harmless_volcano_field_is_left_out_with_one_note() -> None:
    loaded = only([queue("a", {"type": "x"}), queue("b", {"type": "y"})])
    assert [item.obj["spec"] for item in loaded.objects] == [{}, {}]
    assert loaded.ignored == {"Queue spec.type": 2}
    (note,) = runner.skipped_notes(loaded)
    assert note.startswith("left out Queue spec.type of 2 objects: a Volcano field")


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        (queue("q", {"extendClusters": [{"name": "c"}]}), "spec.extendClusters"),
        (queue("q", {"priority": 5}), "spec.priority"),
        (queue("q", {"dequeueStrategy": "fifo"}), "spec.dequeueStrategy"),
        (queue("q", {"somethingNew": 1}), "spec.somethingNew"),
        (queue("q", {"weight": -1}), "spec.weight"),
        (group("g", {"networkTopology": {"mode": "hard"}}), "spec.networkTopology"),
        (group("g", {"subGroupPolicy": []}), "spec.subGroupPolicy"),
        (group("g", {"minMember": 0}), "spec.minMember"),
        (group("g", {"minResources": {"requests.cpu": "4"}}), "spec.minResources.requests.cpu"),
    ],
)
def test_what_kbatch_cannot_honour_is_refused_naming_the_field(obj: Any, field: str) -> None:
    (item,) = only([obj]).objects
    why = validation.refusal(item.obj)
    assert why is not None and why.startswith(f"{field}:"), why


def test_what_kbatch_does_itself_is_accepted() -> None:
    (item,) = only([queue("q", {"priority": 0, "dequeueStrategy": "traverse"})]).objects
    assert item.obj["spec"] == {}
    assert validation.refusal(item.obj) is None


def test_other_volcano_versions_are_skipped() -> None:
    old = {**queue("q", {}), "apiVersion": "scheduling.volcano.sh/v1alpha2"}
    loaded = only([old])
    assert loaded.objects == []
    assert loaded.skipped == {"Queue (scheduling.volcano.sh/v1alpha2)": 1}
