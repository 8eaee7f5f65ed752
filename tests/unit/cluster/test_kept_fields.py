"""What the cluster state keeps of a watched object and which writes it passes on
(``kbatch.cluster.kept_fields``): no managedFields; a Node's heartbeat and a Job's
counts change nothing kbatch reads, so no generation and nothing recorded, while a
write that does change what it reads is both; a Node's images alone changed are
recorded, with no generation (``kbatch.cluster.node_images``)."""

import copy
from typing import Any

from kbatch.cluster import kept_fields
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from tests.unit.cluster.test_job_records import STARTED, job

MANAGED = [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]


def node(
    heartbeat: str = "2024-01-01T00:00:00Z", cpu: str = "8", image: str = "trainer:v1"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "resourceVersion": heartbeat, "managedFields": MANAGED},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "32Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": heartbeat}],
            "images": [{"names": [f"registry.example/{image}"], "sizeBytes": 123456789}],
        },
    }


def watched_state() -> tuple[ClusterState, list[str]]:
    told: list[str] = []
    state = ClusterState()

    class Observer:
        def applied(self, kind: str, key: str, obj: dict[str, Any]) -> None:
            told.append(f"{kind} {key}")

        def refused(self, obj: dict[str, Any]) -> None:
            told.append(f"refused {obj['kind']}")

        def dropped_object(self, kind: str, key: str) -> None:
            pass

        def assumed(self, op: str, key: str, value: str | float | None = None) -> None:
            pass

        def snapshotted(self) -> None:
            pass

    state.observer = Observer()
    return state, told


def test_trim_drops_managed_fields_and_nothing_else() -> None:
    obj = node()
    trimmed = kept_fields.trim(obj)
    assert trimmed is obj  # (in place: the caller owns it)
    assert "managedFields" not in obj["metadata"]
    assert obj["status"]["images"] == node()["status"]["images"]  # (image locality's)
    assert obj["status"]["allocatable"] == {"cpu": "8", "memory": "32Gi", "pods": "110"}
    assert obj["metadata"] == {"name": "n1", "resourceVersion": "2024-01-01T00:00:00Z"}
    odd = {"kind": "Node", "metadata": "junk", "status": ["junk"]}
    assert kept_fields.trim(copy.deepcopy(odd)) == odd  # (left for the parser to refuse)


def test_a_pull_is_recorded_with_no_generation_and_the_node_set_kept() -> None:
    state, told = watched_state()
    state.apply(node())
    before, generation = state.snapshot(), state.generation
    state.apply(node(heartbeat="2024-01-01T00:05:00Z", image="server:v2"))
    assert told == ["Node n1", "Node n1"]  # (a replay holds the same images)
    assert state.generation == generation
    after = state.snapshot()
    assert after.nodes.static_version is before.nodes.static_version
    assert dict(after.node_images) == {"n1": {"registry.example/server:v2": 123456789}}


def test_a_node_s_heartbeat_is_held_but_not_recorded_nor_a_new_generation() -> None:
    state, told = watched_state()
    state.apply(node())
    generation = state.generation
    state.apply(node(heartbeat="2024-01-01T00:05:00Z"))
    assert told == ["Node n1"]
    assert state.generation == generation
    held = state.get("Node", "", "n1")
    assert held is not None and held["metadata"]["resourceVersion"] == "2024-01-01T00:05:00Z"
    state.apply(node(heartbeat="2024-01-01T00:10:00Z", cpu="4"))  # (its room changed)
    assert told == ["Node n1", "Node n1"]
    assert state.generation == generation + 1


def test_a_job_s_counts_are_not_recorded_its_start_spec_and_metadata_are() -> None:
    state, told = watched_state()
    state.apply(job(activeDeadlineSeconds=60, status={"active": 0}))
    generation = state.generation
    state.apply(job(activeDeadlineSeconds=60, status={"active": 2, "ready": 1}))
    assert told == ["Job ns/j"] and state.generation == generation
    state.apply(job(activeDeadlineSeconds=60, status={"active": 2, "startTime": STARTED}))
    assert told == ["Job ns/j"] * 2
    state.apply(job(activeDeadlineSeconds=60, status={"startTime": STARTED, "succeeded": 2}))
    assert told == ["Job ns/j"] * 2
    released = job(activeDeadlineSeconds=60, suspend=False, status={"startTime": STARTED})
    state.apply(released)  # (the spec: what kbatch reads of a held Job)
    labelled = copy.deepcopy(released)
    labelled["metadata"]["annotations"] = {"kbatch.io/held": "no longer"}
    state.apply(labelled)
    assert told == ["Job ns/j"] * 4


def test_a_jobset_s_counts_are_not_recorded_its_hold_is() -> None:
    """JobSet's controller writes its status at each change of its Jobs; kbatch reads
    whether it holds it (an annotation and spec.suspend)."""
    state, told = watched_state()
    held = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "ns", "uid": "u1", "resourceVersion": "1",
                     "annotations": {"kbatch.io/held": "its group waits"}},
        "spec": {"suspend": True, "replicatedJobs": []},
    }  # fmt: skip
    state.apply(held)
    generation = state.generation
    counted = copy.deepcopy(held)
    counted["metadata"]["resourceVersion"] = "2"
    counted["status"] = {"replicatedJobsStatus": [{"name": "w", "active": 2}]}
    state.apply(counted)
    assert told == ["JobSet ns/js"] and state.generation == generation
    released = copy.deepcopy(counted)
    released["metadata"]["annotations"] = {}
    released["spec"]["suspend"] = False
    state.apply(released)
    assert told == ["JobSet ns/js"] * 2 and state.generation > generation


def test_a_job_refused_then_written_well_is_recorded_again() -> None:
    state, told = watched_state()
    state.apply(job(activeDeadlineSeconds=60))
    try:
        state.apply(job(activeDeadlineSeconds=0))
    except ObjectError:
        pass
    else:
        raise AssertionError("a deadline of 0 accepted")
    state.apply(job(activeDeadlineSeconds=60))  # (as held before the refusal)
    assert told == ["Job ns/j", "refused Job", "Job ns/j"]
    assert state.refusal("Job", "ns", "j") is None


def test_other_kinds_are_recorded_at_every_write() -> None:
    state, told = watched_state()
    queue = {"apiVersion": "scheduling.incubator.k8s.io/v1alpha1", "kind": "Queue",
             "metadata": {"name": "q1"}, "spec": {"weight": 1}}  # fmt: skip
    state.apply(queue)
    state.apply(queue)
    assert told == ["Queue q1", "Queue q1"]
