"""The live cluster as simulator input: times shifted to now = 0, runtimes as durations."""

from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.sim import clock
from kbatch.visibility import eta_input
from kbatch.visibility import standing as visibility
from scenarios import objects as o
from scenarios import volume_objects as v

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def at(seconds_ago: float) -> str:
    return clock.timestamp(NOW - seconds_ago)


def running(name: str, group: str | None, started_ago: float, **extra) -> dict:
    pod = o.pod(
        name, group=group, duration="1h", nodeName="n1", **extra
    )  # a live sim hint, dropped
    pod["metadata"]["namespace"] = "default"
    pod["metadata"]["creationTimestamp"] = at(started_ago + 5)
    pod["status"] = {"phase": "Running", "startTime": at(started_ago)}
    return pod


def plan(*documents: dict) -> eta_input.Plan:
    kinds: dict[str, list[dict]] = {}
    for doc in documents:
        kinds.setdefault(doc["kind"], []).append(doc)
    objects = visibility.ClusterObjects(
        now=NOW,
        nodes=kinds.get("Node", []),
        pods=kinds.get("Pod", []),
        pod_groups=kinds.get("PodGroup", []),
        queues=kinds.get("Queue", []),
        claims=kinds.get("PersistentVolumeClaim", []),
        volumes=kinds.get("PersistentVolume", []),
        storage_classes=kinds.get("StorageClass", []),
        csi_nodes=kinds.get("CSINode", []),
    )
    session, _ = visibility.open_session(objects, default_conf())
    return eta_input.plan_of(session, objects)


def by_name(result: eta_input.Plan) -> dict[str, dict]:
    return {obj["metadata"]["name"]: obj for obj in result.objects}


def test_a_running_pod_starts_in_the_past_and_runs_what_it_has_left() -> None:
    group = o.pod_group("g", 1)
    group["metadata"].update(namespace="default", creationTimestamp=at(700))
    result = plan(o.node("n1"), group, running("g-0", "g", 600, activeDeadlineSeconds=900))
    pod = by_name(result)["g-0"]
    assert pod["status"] == {"phase": "Running", "startTime": "1969-12-31T23:50:00Z"}
    assert pod["metadata"]["annotations"] == {
        "scheduling.k8s.io/group-name": "g",
        "kbatch.io/sim-duration": "300.000s",
    }
    assert result.stamps[("PodGroup", "default", "g")] == "1969-12-31T23:48:20Z"
    assert [r.seconds for r in result.running["default/g"]] == [300.0]


def test_a_deleting_pod_holds_its_room_until_its_grace_period_ends() -> None:
    pod = running("leaving", None, 60)
    pod["metadata"]["deletionTimestamp"] = at(-20)  # 20 s from now
    converted = by_name(plan(o.node("n1"), pod))["leaving"]
    assert "deletionTimestamp" not in converted["metadata"]
    assert converted["metadata"]["annotations"]["kbatch.io/sim-duration"] == "20.000s"


def test_what_is_over_or_not_ours_to_place_is_left_out() -> None:
    other = o.pod("theirs", scheduler="default-scheduler")
    done = o.pod("done-0", group="done")
    done["status"] = {"phase": "Succeeded"}
    finished_group = o.pod_group("done", 1)
    finished_group["status"] = {"phase": "Completed"}
    kept = by_name(plan(o.node("n1"), other, done, finished_group, running("x", None, 5)))
    assert set(kept) == {"n1", "x"}


def test_a_pod_with_no_known_runtime_runs_for_ever() -> None:
    result = plan(o.node("n1"), running("endless", None, 30))
    assert "kbatch.io/sim-duration" not in by_name(result)["endless"]["metadata"]["annotations"]
    assert result.unknown_running == 1


def test_a_pending_pods_claims_their_volumes_and_classes_go_forward() -> None:
    """As they are (CSINodes too), but for the claim uid a PV's claimRef names (a bind's, in flight):
    the forward run gives the claim its own."""
    claim = v.claim("data", "local")
    claim["metadata"].update(namespace="default", uid="live-uid")
    chosen = v.volume("pv-1", "local")
    chosen["spec"]["claimRef"] = {"namespace": "default", "name": "data", "uid": "live-uid"}
    chosen["status"] = {"phase": "Available"}
    waiting = v.mounting(o.pod("user", namespace="default"), "data")
    waiting["metadata"]["creationTimestamp"] = at(10)
    local = v.storage_class("local", v.NO_PROVISIONER)
    limits = {"kind": "CSINode", "metadata": {"name": "n1"}, "spec": {"drivers": []}}
    planned = plan(o.node("n1"), local, chosen, claim, waiting, limits)
    (made,) = [obj for obj in planned.objects if obj["kind"] == "CSINode"]
    assert (made["metadata"]["name"], made["spec"]) == ("n1", limits["spec"])
    result = by_name(planned)
    assert result["local"]["provisioner"] == v.NO_PROVISIONER
    assert result["pv-1"]["spec"]["claimRef"] == {"namespace": "default", "name": "data"}
    assert result["pv-1"]["status"] == {"phase": "Available"}
    assert "uid" not in result["data"]["metadata"]
    assert result["user"]["spec"]["volumes"] == waiting["spec"]["volumes"]
