"""ClusterState: objects parsed once, bad ones refused with object and field named."""

import pytest

from kbatch.cluster.errors import ObjectError
from kbatch.cluster.podspec import pod_request
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.interface import OrphanPod

GiB = 2**30


def node(name: str, cpu: str = "4", memory: str = "16Gi") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod(
    name: str, cpu: str = "1", group: str | None = None, scheduler: str = "kbatch", **extra: object
) -> dict:
    meta: dict = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    spec = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
    }
    spec.update(extra)  # type: ignore[arg-type]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def pod_group(name: str, min_member: object = 1, **spec: object) -> dict:
    return {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member, **spec},
    }


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (
            {
                "containers": [
                    {"resources": {"requests": {"cpu": "1"}}},
                    {"resources": {"requests": {"cpu": "500m"}}},
                ]
            },
            {"cpu": 1500.0, "pods": 1.0},
        ),
        (
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [{"resources": {"requests": {"cpu": "2"}}}],
            },
            {"cpu": 2000.0, "pods": 1.0},
        ),
        (
            {"containers": [{"resources": {"limits": {"memory": "1Gi"}}}]},
            {"memory": float(GiB), "pods": 1.0},
        ),
        (
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "overhead": {"cpu": "250m"},
            },
            {"cpu": 1250.0, "pods": 1.0},
        ),
        (
            {"containers": [{"resources": {"requests": {"nvidia.com/gpu": 2}}}]},
            {"nvidia.com/gpu": 2.0, "pods": 1.0},
        ),
        ({"containers": [{"name": "c"}]}, {"pods": 1.0}),
    ],
)
def test_pod_request_follows_kubernetes(spec: dict, expected: dict) -> None:
    assert pod_request(spec) == expected


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            pod("p", cpu="abc"),
            "Pod default/p: spec.containers[0].resources.requests.cpu: 'abc' is not a Kubernetes quantity",
        ),
        (
            pod("p", cpu="-1"),
            "Pod default/p: spec.containers[0].resources.requests.cpu: must not be negative, not -1",
        ),
        (
            pod_group("g", min_member=0),
            "PodGroup default/g: spec.minMember: must be >= 1, not 0",
        ),
        (
            pod_group("g", min_member="6"),
            "PodGroup default/g: spec.minMember: expected an integer, not '6'",
        ),
        (pod_group("g", minResources={"cpu": "lots"}), "PodGroup default/g: spec.minResources.cpu"),
        (node("n", cpu="x"), "Node n: status.allocatable.cpu: 'x' is not a Kubernetes quantity"),
        ({"kind": "Pod", "metadata": {}}, "metadata.name: required"),
    ],
)
def test_bad_objects_name_object_and_field(obj: dict, message: str) -> None:
    state = ClusterState()
    with pytest.raises(ObjectError) as caught:
        state.apply(obj)
    assert message in str(caught.value)
    assert state.list(obj["kind"]) == []


def test_snapshot_groups_pods_and_counts_every_pod_on_nodes() -> None:
    state = ClusterState()
    for obj in (
        node("n1"),
        node("n2"),
        pod_group("g", min_member=2),
        pod("a", group="g"),
        pod("b", group="g", nodeName="n1"),
        pod("lonely"),
        pod("other", scheduler="default-scheduler", nodeName="n2", cpu="3"),
        pod("other-pending", scheduler="default-scheduler"),
        pod("orphan", group="missing"),
    ):
        state.apply(obj)
    snap = state.snapshot()
    assert set(snap.jobs) == {"default/g", "pod:default/lonely"}
    group = snap.jobs["default/g"]
    assert group.min_member == 2
    assert sorted(t.status for t in group.tasks.values()) == [TaskStatus.PENDING, TaskStatus.BOUND]
    assert snap.jobs["pod:default/lonely"].has_pod_group is False
    cpu = snap.dims.index["cpu"]
    assert snap.nodes.used[snap.nodes.index["n1"], cpu] == 1000
    assert snap.nodes.used[snap.nodes.index["n2"], cpu] == 3000
    assert snap.orphans == [OrphanPod("default", "orphan", "missing")]


def test_alike_pods_share_one_template() -> None:
    state = ClusterState()
    state.apply(node("n1"))
    state.apply(pod_group("g"))
    for name in ("a", "b", "c"):
        state.apply(pod(name, group="g"))
    state.apply(pod("d", group="g", cpu="2"))
    tasks = list(state.snapshot().jobs["default/g"].tasks.values())
    assert len({id(t.template) for t in tasks}) == 2


def test_a_relist_replaces_a_kind_and_reports_what_it_cannot_use() -> None:
    state = ClusterState()
    state.apply(node("n1"))
    state.apply(pod("gone"))
    state.apply(pod("kept"))
    errors = state.replace("Pod", [pod("kept", cpu="2"), pod("new"), pod("broken", cpu="x")])
    assert [str(e).split(":")[0] for e in errors] == ["Pod default/broken"]
    assert sorted(p["metadata"]["name"] for p in state.list("Pod")) == ["kept", "new"]


def the_task(state: ClusterState, name: str = "p") -> tuple[TaskStatus, int]:
    (task,) = state.snapshot().jobs[f"pod:default/{name}"].tasks.values()
    return task.status, task.node


def test_an_assumed_bind_holds_until_an_update_shows_the_node() -> None:
    state = ClusterState()
    state.apply(node("n1"))
    state.apply(pod("p"))
    state.assume_bound("default", "p", "n1")
    assert the_task(state) == (TaskStatus.BOUND, 0)
    state.replace("Pod", [pod("p")])  # a relist before the bind shows: still assumed
    state.apply({**pod("p"), "status": {"phase": "Pending", "message": "x"}})
    assert the_task(state) == (TaskStatus.BOUND, 0), "an update without a node keeps it"
    state.apply(pod("p", nodeName="n1"))
    state.apply(pod("p"))  # (no real pod loses its node: the assumption is gone, though)
    assert the_task(state)[0] is TaskStatus.PENDING


def test_a_failed_bind_or_a_new_pod_of_that_name_ends_the_assumption() -> None:
    state = ClusterState()
    state.apply(node("n1"))
    state.apply(pod("p"))
    state.assume_bound("default", "p", "n1")
    state.forget("default", "p")
    assert the_task(state)[0] is TaskStatus.PENDING
    state.assume_bound("default", "p", "n1")
    again = pod("p")
    again["metadata"]["uid"] = "another"
    state.apply(again)
    assert the_task(state)[0] is TaskStatus.PENDING


def test_a_confirmed_assumption_the_watch_never_shows_expires() -> None:
    now = [100.0]
    state = ClusterState(clock=lambda: now[0], assumed_ttl=30)
    state.apply(node("n1"))
    state.apply(pod("p"))
    state.assume_bound("default", "p", "n1")
    now[0] += 1000  # still in flight: no expiry
    assert the_task(state)[0] is TaskStatus.BOUND
    state.confirmed("default", "p")
    now[0] += 29
    assert the_task(state)[0] is TaskStatus.BOUND
    now[0] += 2
    generation = state.generation
    assert state.has_work()  # (and the pod is pending again: a change, for the loop)
    assert state.generation > generation
    assert the_task(state)[0] is TaskStatus.PENDING


def test_a_confirmed_assumption_lasts_until_the_watch_shows_it_however_late() -> None:
    """By default (as kube-scheduler since kubernetes#106361) no time ends a confirmed
    bind: a watch that lags must not make the pod pending and bound a second time."""
    now = [100.0]
    state = ClusterState(clock=lambda: now[0])
    state.apply(node("n1"))
    state.apply(pod("p"))
    state.assume_bound("default", "p", "n1")
    state.keep_assumed("default", "p", 5)  # no answer: held for its back-off
    state.confirmed("default", "p")  # then the resent bind succeeded
    now[0] += 86_400
    assert not state.has_work()
    assert the_task(state)[0] is TaskStatus.BOUND
    state.apply(pod("p", nodeName="n1"))
    assert the_task(state)[0] is TaskStatus.BOUND
    state.apply(pod("p"))  # shown once: the watch is what counts from now on
    assert the_task(state)[0] is TaskStatus.PENDING


def test_a_bind_without_an_answer_is_assumed_for_its_back_off_only() -> None:
    now = [100.0]
    state = ClusterState(clock=lambda: now[0])
    state.apply(node("n1"))
    state.apply(pod("p"))
    state.assume_bound("default", "p", "n1")
    state.keep_assumed("default", "p", 5)
    now[0] += 4
    assert the_task(state)[0] is TaskStatus.BOUND
    now[0] += 2
    assert state.has_work()
    assert the_task(state)[0] is TaskStatus.PENDING


def running(name: str, **meta: object) -> dict:
    obj = pod(name, nodeName="n1")
    obj["metadata"].update(meta)
    return {**obj, "status": {"phase": "Running"}}


def test_an_assumed_eviction_is_releasing_until_the_watch_shows_the_deletion() -> None:
    state = ClusterState()
    state.apply(node("n1"))
    state.apply(running("v"))
    assert the_task(state, "v") == (TaskStatus.RUNNING, 0)
    state.assume_releasing("default", "v")
    assert the_task(state, "v") == (TaskStatus.RELEASING, 0)
    state.replace("Pod", [running("v")])
    assert the_task(state, "v")[0] is TaskStatus.RELEASING, "a relist keeps it"
    state.forget("default", "v")  # the DELETE failed
    assert the_task(state, "v")[0] is TaskStatus.RUNNING
    state.assume_releasing("default", "v")
    deleting = pod("v", nodeName="n1", status={"phase": "Running"})
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    state.apply(deleting)
    state.apply(running("v"))
    assert the_task(state, "v")[0] is TaskStatus.RUNNING, "shown once: no longer assumed"


def test_work_is_a_pending_pod_of_ours_or_a_group_not_yet_admitted() -> None:
    state = ClusterState()
    state.apply(node("n1"))
    assert not state.has_work()
    state.apply(pod("other", scheduler="default-scheduler"))
    assert not state.has_work()
    state.apply(pod("mine"))
    assert state.has_work()
    state.assume_bound("default", "mine", "n1")
    assert not state.has_work()
    state.forget("default", "mine")
    assert state.has_work()
    state.apply(pod("mine", nodeName="n1"))
    assert not state.has_work()
    group = pod_group("g")
    state.apply(group)
    assert state.has_work()  # Pending: enqueue may admit it
    assert not state.has_work(decided_groups={"default/g"}), "a session decided it already"
    assert state.has_work(decided_groups={"default/other"})
    state.apply({**group, "status": {"phase": "Inqueue"}})
    assert not state.has_work()
    state.apply(pod("late"))
    state.delete("Pod", "default", "late")
    assert not state.has_work()


def test_a_group_whose_pods_are_all_another_schedulers_gets_no_status_from_us() -> None:
    """Two kbatch deployments (different --scheduler-name) must not overwrite each other's
    PodGroup status; a group with no pods yet still gets ours (it may be ours)."""
    from builders import FakeCluster
    from kbatch.operators.scheduler.core import runner

    state = ClusterState(frozenset({"kbatch"}))
    state.apply(node("n1"))
    for name in ("mine", "theirs", "empty", "mixed"):
        state.apply(pod_group(name))
    state.apply(pod("m", group="mine"))
    state.apply(pod("t", group="theirs", scheduler="kbatch-b"))
    state.apply(pod("x1", group="mixed", scheduler="kbatch-b"))
    state.apply(pod("x2", group="mixed"))
    snapshot = state.snapshot()
    assert snapshot.foreign_groups == {"default/theirs"}
    session = runner.open_session(snapshot, runner.default_conf(), now=1.0, uid="s")
    cluster = FakeCluster(outcome=runner.close_session(session))
    assert sorted(cluster.pod_groups) == ["default/empty", "default/mine", "default/mixed"]


def test_foreign_groups_follow_other_schedulers_pods_as_they_come_change_and_go() -> None:
    """The state keeps which grouped pods are another scheduler's, to skip looking for
    foreign groups while there is none: after each change, the snapshot's foreign groups
    are still those its pods make."""
    steps: list[tuple[str, dict | None, set[str]]] = [
        ("t", pod("t", group="g", scheduler="kbatch-b"), {"default/g"}),
        ("m", pod("m", group="g"), set()),  # g has a pod of ours now
        ("t", None, set()),
        ("u", pod("u", group="h", scheduler="kbatch-b"), {"default/h"}),
        ("u", pod("u", group="h"), set()),  # the same pod, now ours
        ("v", pod("v", scheduler="kbatch-b"), set()),  # no group: no foreign group
        ("w", pod("w", group="h", scheduler="kbatch-b"), set()),
        ("u", None, {"default/h"}),
        ("w", None, set()),
    ]
    state = ClusterState(frozenset({"kbatch"}))
    for name, obj, foreign in steps:
        if obj is None:
            state.delete("Pod", "default", name)
        else:
            state.apply(obj)
        assert state.snapshot().foreign_groups == foreign, name


def test_pod_groups_are_indexed_by_queue_and_namespace_as_they_change() -> None:
    def group(name: str, queue: str, namespace: str = "a") -> dict:
        return {
            "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": 1, "queue": queue},
        }

    state = ClusterState()
    state.apply(group("g1", "q1"))
    state.apply(group("g2", "q1", namespace="b"))
    state.apply(group("g3", "q2"))
    assert state.pod_groups_in_queue("q1") == ["a/g1", "b/g2"]
    state.apply(group("g1", "q2"))  # moved to another queue
    assert state.pod_groups_in_queue("q1") == ["b/g2"]
    assert state.pod_groups_in_queue("q2") == ["a/g1", "a/g3"]
    state.delete("PodGroup", "a", "g3")
    assert state.pod_groups_in_queue("q2") == ["a/g1"]
    assert [g.spec.queue for g in state.pod_groups_in_namespace("a")] == ["q2"]
    state.replace("PodGroup", [group("g9", "q3", namespace="b")])
    assert state.pod_groups_in_queue("q1") == state.pod_groups_in_queue("q2") == []
    assert state.pod_groups_in_queue("q3") == ["b/g9"]
    assert state.pod_groups_in_namespace("a") == []
    assert state.pod_group("b/g9") is state.pod_groups()["b/g9"]
    assert state.pod_group("a/g1") is None


def test_a_node_written_as_it_reads_changes_nothing_a_snapshot_reads() -> None:
    """A kubelet reports its Node every while: its heartbeat's times and a new
    resourceVersion, the same allocatable, conditions, labels and taints. Such a write
    moves no generation (the loop's backlog stays settled) and the next snapshot keeps
    the node set (its per-template results stand); a change that is read does not."""
    state = ClusterState()
    state.apply(node("a"))
    state.apply(node("b"))
    before = state.snapshot()
    generation = state.generation
    beat = node("a")
    beat["metadata"]["resourceVersion"] = "42"
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-01-01T00:00:10Z"
    state.apply(beat)
    assert state.generation == generation
    assert state.get("Node", "", "a")["metadata"]["resourceVersion"] == "42"
    after = state.snapshot()
    assert after.nodes.static_version is before.nodes.static_version
    # Read: a label; the node set is made anew.
    labelled = node("a")
    labelled["metadata"]["labels"] = {"zone": "z1"}
    state.apply(labelled)
    assert state.generation > generation
    made = state.snapshot()
    assert made.nodes.static_version is not after.nodes.static_version
    assert made.nodes.infos[made.nodes.index["a"]].labels["zone"] == "z1"
    # A refused write leaves the last good version; that version written again is news:
    # the refusal it ends is read (``ClusterState.refusal``).
    with pytest.raises(ObjectError):
        state.apply({**labelled, "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]}})
    refused = state.generation
    state.apply(labelled)
    assert state.generation > refused and state.refusal("Node", "", "a") is None


def test_the_resource_names_counted_are_those_the_objects_held_say_in_order() -> None:
    """Each write and delete counts its object's resource names in place of its last
    version's: the names a snapshot works under are those of the objects held, in order
    of first appearance, and a name no object says any more is left out."""
    state = ClusterState()
    state.apply(node("n1"))
    state.apply(pod("a"))
    gpu_pod = pod("b")
    gpu_pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    state.apply(gpu_pod)
    state.apply(pod_group("g", minResources={"example.com/fpga": "1"}))

    def names() -> list[str]:
        return state._snapshot_inputs()[0]

    assert names() == ["cpu", "memory", "pods", "nvidia.com/gpu", "example.com/fpga"]
    state.apply(pod("b"))  # the gpu request is gone from its one pod
    assert names() == ["cpu", "memory", "pods", "example.com/fpga"]
    state.delete("PodGroup", "default", "g")
    state.apply(gpu_pod)  # said again: counted again, in its first place
    assert names() == ["cpu", "memory", "pods", "nvidia.com/gpu"]
    state.delete("Pod", "default", "b")
    state.delete("Pod", "default", "a")
    assert names() == ["cpu", "memory", "pods"]  # (the node's)
    assert state._names._counts == {"cpu": 1, "memory": 1, "pods": 1, "nvidia.com/gpu": 0,
                            "example.com/fpga": 0}  # fmt: skip


def test_snapshots_get_the_same_node_list_until_a_node_is_written() -> None:
    """While no Node is written the builder is given the very list of the last snapshot
    (its sign that the nodes are the same); a Node written anew, dropped or added gives a
    new list, which the snapshot shows; a write that reads as before keeps it."""
    state = ClusterState()
    state.apply(node("n1"))
    state.apply(node("n2"))
    state.apply(pod("p"))
    first = state._nodes_in_order()
    state.snapshot()
    state.apply(pod("q"))
    assert state._nodes_in_order() is first
    state.apply(node("n2"))  # as it reads already: the same record
    assert state._nodes_in_order() is first
    state.apply(node("n2", cpu="8"))
    second = state._nodes_in_order()
    assert second is not first and [n.name for n in second] == ["n1", "n2"]
    assert state.snapshot().nodes.allocatable[1, 0] == 8000.0
    state.apply(node("n3"))
    assert [n.name for n in state._nodes_in_order()] == ["n1", "n2", "n3"]
    assert len(state.snapshot().nodes) == 3
    state.delete("Node", "", "n1")
    assert [n.name for n in state._nodes_in_order()] == ["n2", "n3"]
    assert state.snapshot().nodes.names == ["n2", "n3"]
