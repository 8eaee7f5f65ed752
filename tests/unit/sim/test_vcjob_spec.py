"""What the simulated Volcano Job controller reads of a vcjob and makes of it
(``kbatch.sim.vcjob_spec``): Volcano's webhook defaults, its refusals naming the field,
the PodGroup (minMember, minTaskMember, queue, minResources as Volcano sums it) and the
pods (names, labels, annotations, scheduler name)."""

from typing import Any

import pytest

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.cluster.errors import ObjectError
from kbatch.sim import vcjob_policies, vcjob_spec

Json = dict[str, Any]


def task(name: str | None, replicas: int, cpu: str = "1", **extra: Any) -> Json:
    container = {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
    found: Json = {"replicas": replicas, "template": {"spec": {"containers": [container]}}}
    if name is not None:
        found["name"] = name
    return {**found, **extra}


def job(*tasks: Json, **spec: Any) -> Json:
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": "j", "namespace": "ns", "uid": "u1"},
            "spec": {"tasks": list(tasks), **spec}}  # fmt: skip


def no_priority(name: str) -> int:
    return 0


def test_volcanos_defaults() -> None:
    spec = vcjob_spec.vcjob_spec(job(task(None, 2), task("w", 3, minAvailable=1)))
    assert [(t.name, t.replicas, t.min_available) for t in spec.tasks] == [
        ("default0", 2, 2), ("w", 3, 1),
    ]  # fmt: skip
    assert spec.min_available == 3  # the tasks' minimums
    assert (spec.queue, spec.scheduler_name, spec.priority_class) == ("default", "volcano", "")
    assert spec.replicas == 5


@pytest.mark.parametrize(
    ("changed", "field", "why"),
    [
        ({"tasks": []}, "spec.tasks", "required"),
        ({"tasks": [task("a", 1), task("a", 1)]}, "spec.tasks[1].name", "duplicated"),
        ({"tasks": [task("a", -1)]}, "spec.tasks[0].replicas", "must be >= 0"),
        ({"tasks": [task("a", 1, minAvailable=2)]}, "spec.tasks[0].minAvailable", "more than"),
        ({"minAvailable": 3}, "spec.minAvailable", "more than the tasks' 2"),
        ({"minAvailable": -1}, "spec.minAvailable", "must be >= 0"),
        ({"minSuccess": 3}, "spec.minSuccess", "must be 1 to 2"),
        ({"tasks": [{"name": "a", "replicas": 1, "template": {}}]}, "spec.tasks[0].template.spec",
         "pod template"),
    ],
)  # fmt: skip
def test_bad_fields_are_refused_naming_them(changed: Json, field: str, why: str) -> None:
    bad = job(task("m", 1), task("w", 1))
    bad["spec"].update(changed)
    with pytest.raises(ObjectError) as caught:
        vcjob_spec.vcjob_spec(bad)
    assert caught.value.field == field and why in caught.value.why


def test_the_pod_group_as_volcanos_controller_makes_it() -> None:
    given = job(task("master", 1, cpu="2"), task("worker", 3), queue="q", priorityClassName="hi")
    given["metadata"]["labels"] = {"team": "a"}
    spec = vcjob_spec.vcjob_spec(given)
    group = vcjob_spec.pod_group(given, spec, no_priority)
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert group["metadata"]["name"] == "j-u1"
    assert group["metadata"]["labels"] == {"team": "a"}
    assert group["metadata"]["ownerReferences"][0]["uid"] == "u1"
    assert group["spec"] == {
        "minMember": 4, "minTaskMember": {"master": 1, "worker": 3}, "queue": "q",
        "minResources": {"cpu": "5"}, "priorityClassName": "hi",
    }  # fmt: skip


def test_an_elastic_jobs_min_resources_are_its_first_pods_highest_priority_first() -> None:
    given = job(task("master", 1, cpu="4"), task("worker", 3, cpu="1"), minAvailable=2)
    given["spec"]["tasks"][1]["template"]["spec"]["priorityClassName"] = "hi"
    spec = vcjob_spec.vcjob_spec(given)
    plain = vcjob_spec.min_resources(spec, no_priority)
    assert plain == {"cpu": "5"}  # the master, then one worker
    workers_first = vcjob_spec.min_resources(spec, lambda name: 10 if name == "hi" else 0)
    assert workers_first == {"cpu": "2"}  # two workers


def test_min_resources_fill_past_the_tasks_minimums_with_their_other_replicas() -> None:
    given = job(task("a", 2, cpu="1", minAvailable=1), task("b", 2, cpu="3", minAvailable=1),
                minAvailable=3)  # fmt: skip
    spec = vcjob_spec.vcjob_spec(given)
    assert vcjob_spec.min_resources(spec, no_priority) == {"cpu": "5"}  # a, b, then a again


def test_the_pods_as_volcanos_controller_makes_them() -> None:
    given = job(task("m", 1), task("w", 2), queue="q", priorityClassName="hi")
    given["metadata"]["annotations"] = {"kbatch.io/sim-duration": "1m"}
    given["spec"]["tasks"][1]["template"]["spec"]["schedulerName"] = "kbatch"
    spec = vcjob_spec.vcjob_spec(given)
    pod = vcjob_spec.pod_for(given, spec, spec.tasks[1], 1, 0)
    meta = pod["metadata"]
    assert (meta["name"], meta["namespace"]) == ("j-w-1", "ns")
    assert meta["annotations"][GROUP_NAME_ANNOTATION] == "j-u1"
    assert meta["annotations"]["volcano.sh/task-spec"] == "w"
    assert meta["annotations"]["volcano.sh/task-index"] == "1"
    assert meta["annotations"]["volcano.sh/job-version"] == "0"
    assert meta["annotations"]["kbatch.io/sim-duration"] == "1m"
    assert meta["labels"]["volcano.sh/job-namespace"] == "ns"
    assert meta["labels"]["volcano.sh/queue-name"] == "q"
    assert pod["spec"]["schedulerName"] == "kbatch"  # the template's kept
    assert pod["spec"]["priorityClassName"] == "hi"
    first = vcjob_spec.pod_for(given, spec, spec.tasks[0], 0, 0)
    assert first["spec"]["schedulerName"] == "volcano"


def test_fields_not_simulated_are_named() -> None:
    given = job(task("m", 1, dependsOn={"name": ["w"]}), task("w", 1),
                policies=[{"event": "PodPending", "action": "RestartJob"}], plugins={"ssh": []})  # fmt: skip
    named = [why.split(":")[0] for why in vcjob_spec.not_simulated(given, read(given))]
    assert named == ["spec.policies[0]", "spec.plugins", "spec.tasks[0].dependsOn"]
    plain = job(task("m", 1), maxRetry=5, policies=[{"event": "PodFailed", "action": "AbortJob"}])
    assert vcjob_spec.not_simulated(plain, read(plain)) == []
    assert read(plain).max_retry == 5 and read(job(task("m", 1))).max_retry == 3


def read(given: Json) -> vcjob_spec.VcJobSpec:
    return vcjob_spec.vcjob_spec(given)


def test_a_tasks_policy_comes_before_the_jobs() -> None:
    given = job(task("m", 1, policies=[{"events": ["PodFailed"], "action": "RestartJob"}]),
                task("w", 1), policies=[{"event": "PodFailed", "action": "AbortJob"},
                                        {"event": "TaskCompleted", "action": "CompleteJob"}])  # fmt: skip
    spec = read(given)
    tasks = {t.name: t.policies for t in spec.tasks}
    assert vcjob_policies.action_for("PodFailed", tasks["m"], spec.policies) == (
        "RestartJob",
        "task",
    )
    assert vcjob_policies.action_for("PodFailed", tasks["w"], spec.policies) == ("AbortJob", "job")
    assert vcjob_policies.action_for("PodEvicted", tasks["w"], spec.policies) is None


@pytest.mark.parametrize(
    ("policies", "field", "why"),
    [
        ([{"action": "AbortJob"}], "spec.policies[0]", "either event or exitCode"),
        ([{"event": "PodFailed", "exitCode": 2, "action": "AbortJob"}], "spec.policies[0]",
         "simultaneously"),
        ([{"event": "PodRunning", "action": "AbortJob"}], "spec.policies[0].event", "invalid"),
        ([{"event": "PodFailed", "action": "SyncJob"}], "spec.policies[0].action", "invalid"),
        ([{"event": "PodFailed", "action": "AbortJob"}, {"event": "PodFailed",
          "action": "RestartJob"}], "spec.policies[1]", "duplicate event"),
        ([{"event": "*", "action": "AbortJob"}, {"event": "PodFailed", "action": "RestartJob"}],
         "spec.policies", "with *"),
    ],
)  # fmt: skip
def test_bad_policies_are_refused_naming_them(policies: list[Json], field: str, why: str) -> None:
    with pytest.raises(ObjectError) as caught:
        read(job(task("m", 1), policies=policies))
    assert caught.value.field == field and why in caught.value.why


def test_network_topology_and_partitions_go_to_the_group_as_the_controller_puts_them() -> None:
    topology = {"mode": "hard", "highestTierAllowed": 1}
    given = job(task("m", 1), task("w", 4, partitionPolicy={"totalPartitions": 2,
                "partitionSize": 2}), networkTopology=topology)  # fmt: skip
    group = vcjob_spec.pod_group(given, vcjob_spec.vcjob_spec(given), no_priority)
    assert group["spec"]["networkTopology"] == topology
    assert group["spec"]["subGroupPolicy"] == [{"name": "w"}]
