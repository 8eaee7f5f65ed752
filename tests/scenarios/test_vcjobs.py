"""vcjobs in the simulator (``kbatch.sim.vcjobs``): the simulator plays Volcano's Job
controller beside kbatch serving ``volcano``. The PodGroup comes first, the pods only
once it is admitted, bound whole; the vcjob goes Pending, Running, Completed (or
Failed), and a finished one's PodGroup is deleted. Bad fields are refused naming them;
fields not simulated are named in a warning and the rest runs.

``test_the_e2e_vcjobs_end_as_on_a_live_cluster`` runs the manifests of
``tests/e2e/test_volcano_controllers.py`` (two nodes of 4 cpu, Volcano's chart conf,
a master and three workers, ``minAvailable: 4``) and checks what that test asserts on
a live cluster with Volcano's own controller."""

from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.sim import runner, simulate
from kbatch.sim.manifests import load_documents
from scenarios.objects import at, node
from scenarios.test_volcano_conf import VOLCANO_DEFAULT

Json = dict[str, Any]
QUEUE = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
         "metadata": {"name": "vc"}, "spec": {"weight": 1}}  # fmt: skip


def vcjob(
    name: str, cpu: str = "1", min_available: int | None = 4, duration: str | None = "60s",
    **spec: Any,
) -> Json:  # fmt: skip
    """A master and three workers of ``cpu`` each, as the e2e test writes them."""

    def task(role: str, replicas: int) -> Json:
        container = {"name": role, "image": "x", "resources": {"requests": {"cpu": cpu}}}
        template: Json = {"spec": {"containers": [container], "restartPolicy": "Never"}}
        if duration is not None:
            template["metadata"] = {"annotations": {"kbatch.io/sim-duration": duration}}
        return {"name": role, "replicas": replicas, "template": template}

    body: Json = {"schedulerName": "volcano", "queue": "vc",
                  "tasks": [task("master", 1), task("worker", 3)], **spec}  # fmt: skip
    if min_available is not None:
        body["minAvailable"] = min_available
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default"}, "spec": body}  # fmt: skip


def run(*docs: Json, nodes: int = 2, cpu: str = "4", until: float = 300.0) -> runner.Outcome:
    loaded = load_documents([*(node(f"n{i}", cpu=cpu) for i in range(nodes)), QUEUE, *docs])
    options = runner.Options(until=until)
    return runner.Simulation(loaded, runner.resolve_conf(None, loaded), options).run()


def status(outcome: runner.Outcome, name: str) -> Json:
    assert outcome.vcjobs is not None
    return dict(outcome.vcjobs.records["default", name].obj["status"])


def told(outcome: runner.Outcome, name: str) -> list[tuple[float, str, str]]:
    return [(e.time, e.reason, e.message) for e in outcome.cluster.event_log
            if (e.kind, e.name) == ("Job", name)]  # fmt: skip


def binds(outcome: runner.Outcome) -> dict[str, float]:
    return {e.name: e.time for e in outcome.cluster.event_log
            if e.kind == "Pod" and e.reason == "Scheduled"}  # fmt: skip


def test_a_gang_vcjob_gets_its_group_then_its_pods_bound_whole_and_completes() -> None:
    outcome = run(vcjob("train"), until=30.0)
    (group,) = [g for g in outcome.cluster.state.list("PodGroup") if g["metadata"]["name"]
                .startswith("train-")]  # fmt: skip
    assert group["spec"]["minMember"] == 4
    assert group["spec"]["minTaskMember"] == {"master": 1, "worker": 3}
    assert group["spec"]["queue"] == "vc"
    assert group["spec"]["minResources"]["cpu"] in ("4", "4000m")
    name = group["metadata"]["name"]
    assert name == f"train-{status_uid(outcome, 'train')}"
    pods = {p["metadata"]["name"]: p for p in outcome.cluster.state.list("Pod")}
    assert sorted(pods) == ["train-master-0", "train-worker-0", "train-worker-1",
                            "train-worker-2"]  # fmt: skip
    worker = pods["train-worker-2"]
    assert worker["spec"]["schedulerName"] == "volcano"
    assert worker["metadata"]["annotations"][GROUP_NAME_ANNOTATION] == name
    assert worker["metadata"]["annotations"]["volcano.sh/task-spec"] == "worker"
    assert worker["metadata"]["annotations"]["volcano.sh/task-index"] == "2"
    assert worker["metadata"]["labels"]["volcano.sh/job-name"] == "train"
    assert worker["metadata"]["labels"]["volcano.sh/queue-name"] == "vc"
    assert worker["metadata"]["ownerReferences"][0]["kind"] == "Job"
    assert len(set(binds(outcome).values())) == 1, "the four are bound in one session"
    assert status(outcome, "train")["state"]["phase"] == "Running"
    assert status(outcome, "train")["running"] == 4

    done = run(vcjob("train"), until=120.0)
    final = status(done, "train")
    assert final["state"]["phase"] == "Completed"
    assert (final["succeeded"], final["running"], final["failed"]) == (4, 0, 0)
    assert [c["status"] for c in final["conditions"]] == ["Pending", "Running", "Completed"]
    assert done.cluster.state.get("PodGroup", "default", name) is None, "deleted when done"


def status_uid(outcome: runner.Outcome, name: str) -> str:
    assert outcome.vcjobs is not None
    return str(outcome.vcjobs.records["default", name].obj["metadata"]["uid"])


def test_a_vcjob_that_does_not_fit_waits_whole_with_no_pod() -> None:
    outcome = run(vcjob("wide", cpu="3"), until=60.0)  # 12 cpu on 8
    assert outcome.cluster.state.list("Pod") == []
    assert status(outcome, "wide")["state"]["phase"] == "Pending"
    (group,) = outcome.cluster.state.list("PodGroup")
    assert group["status"]["phase"] == "Pending"


def test_an_elastic_vcjob_starts_with_min_available_pods() -> None:
    outcome = run(vcjob("elastic", min_available=2, duration=None), nodes=1, cpu="2")
    (group,) = outcome.cluster.state.list("PodGroup")
    assert group["spec"]["minMember"] == 2
    assert group["spec"]["minResources"]["cpu"] in ("2", "2000m")
    assert len(outcome.cluster.state.list("Pod")) == 4
    assert len(binds(outcome)) == 2, "no more than the node holds"
    assert status(outcome, "elastic")["state"]["phase"] == "Running"


def test_the_e2e_vcjobs_end_as_on_a_live_cluster(tmp_path: Any) -> None:
    conf = tmp_path / "volcano-scheduler.conf"
    conf.write_text(VOLCANO_DEFAULT)
    docs = [node("n0", cpu="4"), node("n1", cpu="4"), QUEUE, vcjob("train"),
            at(vcjob("wide", cpu="2", duration=None), "10s")]  # fmt: skip
    notes: list[str] = []
    result = simulate(documents=docs, config=conf, until="120s", warn=notes.append)
    assert notes == []
    jobs = {j["name"]: j for j in result["volcanoJobs"]}
    # The first: its four pods bound together, Running, then Completed (its group deleted).
    assert jobs["train"]["phase"] == "Completed" and jobs["train"]["succeeded"] == 4
    scheduled = [e for e in result["events"] if e["kind"] == "Pod" and e["reason"] == "Scheduled"]
    train_bound = {e["time"] for e in scheduled if e["name"].startswith("train-")}
    wide_bound = {e["time"] for e in scheduled if e["name"].startswith("wide-")}
    assert len(train_bound) == 1 and len(wide_bound) == 1, "each gang bound in one session"
    groups = {g["name"].split("-")[0]: g for g in result["podGroups"]}
    assert "train" not in groups, "the finished Job's PodGroup removed"
    # The second waited, Pending with no pod, saying why (cpu), until the first ended.
    waited = [e for e in result["events"] if e["kind"] == "PodGroup"
              and e["name"].startswith("wide-") and e["reason"] == "Unschedulable"]  # fmt: skip
    assert waited and "not admitted" in waited[0]["message"] and "cpu" in waited[0]["message"]
    completed = next(e["time"] for e in result["events"]
                     if (e["kind"], e["name"], e["reason"]) == ("Job", "train", "Completed"))  # fmt: skip
    assert min(wide_bound) > completed - 1.0 and min(wide_bound) >= 60.0
    assert jobs["wide"]["phase"] == "Running" and jobs["wide"]["running"] == 4
    assert groups["wide"]["phase"] == "Running"


def test_completion_frees_room_for_the_next() -> None:
    outcome = run(vcjob("a", cpu="2"), at(vcjob("b", cpu="2"), "5s"))
    bound = binds(outcome)
    a_bound = {bound[n] for n in bound if n.startswith("a-")}
    b_bound = {bound[n] for n in bound if n.startswith("b-")}
    assert len(a_bound) == 1 and len(b_bound) == 1, "each bound whole, in one session"
    assert min(b_bound) >= max(a_bound) + 60.0, "b waits until a's pods have succeeded"
    assert status(outcome, "a")["state"]["phase"] == "Completed"
    assert status(outcome, "b")["state"]["phase"] == "Completed"


def test_a_failed_pod_fails_the_vcjob_once_all_have_ended() -> None:
    job = vcjob("f", duration="60s")
    job["spec"]["tasks"][0]["template"]["spec"]["activeDeadlineSeconds"] = 10
    outcome = run(job)
    final = status(outcome, "f")
    assert (final["succeeded"], final["failed"]) == (3, 1)
    assert final["state"]["phase"] == "Failed"
    assert final["taskStatusCount"]["master"] == {"phase": {"Failed": 1}}


def test_fields_not_simulated_are_named_and_the_rest_runs() -> None:
    job = vcjob("p", policies=[{"event": "*", "action": "RestartJob"}], plugins={"ssh": []})
    job["spec"]["tasks"][1]["policies"] = [{"exitCode": 3, "action": "AbortJob"},
                                           {"event": "PodFailed", "action": "RestartTask"}]  # fmt: skip
    outcome = run(job)
    warned = [m for _, reason, m in told(outcome, "p") if reason == "NotSimulated"]
    assert [m.split(":")[0] for m in warned] == [
        "spec.policies[0]", "spec.plugins", "spec.tasks[1].policies[0]",
        "spec.tasks[1].policies[1]",
    ]  # fmt: skip
    assert status(outcome, "p")["state"]["phase"] == "Completed"


def test_fields_not_simulated_are_among_the_run_s_warnings() -> None:
    """The warning event on the vcjob may be followed by others (the table shows each
    object's last), so the run's own warnings say it too, once."""
    warned: list[str] = []
    job = vcjob("p", plugins={"ssh": []})
    loaded = load_documents([node("n0"), QUEUE, job])
    conf = runner.resolve_conf(None, loaded)
    runner.Simulation(loaded, conf, runner.Options(until=300.0), warn=warned.append).run()
    assert warned == [
        "Job default/p: spec.plugins: Volcano's job plugins (ssh, svc, env, ...) are not simulated"
    ]


def failing_master(name: str, **spec: Any) -> Json:
    """Its master fails after 10 s (its deadline); its workers run 60 s."""
    job = vcjob(name, **spec)
    job["spec"]["tasks"][0]["template"]["spec"]["activeDeadlineSeconds"] = 10
    return job


def test_a_task_completed_policy_completes_the_job_and_deletes_the_rest() -> None:
    job = vcjob("tc")
    job["spec"]["tasks"][0]["template"]["metadata"]["annotations"]["kbatch.io/sim-duration"] = "20s"
    del job["spec"]["tasks"][1]["template"]["metadata"]  # the workers would run for ever
    job["spec"]["tasks"][0]["policies"] = [{"event": "TaskCompleted", "action": "CompleteJob"}]
    outcome = run(job)
    phases = [reason for _, reason, _ in told(outcome, "tc") if reason[0].isupper()
              and reason in ("Running", "Completing", "Completed")]  # fmt: skip
    assert phases == ["Running", "Completing", "Completed"]
    final = status(outcome, "tc")
    assert (final["succeeded"], final["running"], final["version"]) == (1, 0, 1)
    left = [p["metadata"]["name"] for p in outcome.cluster.state.list("Pod")]
    assert left == ["tc-master-0"], "the workers deleted"


def test_a_pod_failed_policy_aborts_the_job() -> None:
    outcome = run(failing_master("ab", policies=[{"event": "PodFailed", "action": "AbortJob"}]))
    final = status(outcome, "ab")
    assert final["state"]["phase"] == "Aborted"
    assert (final["failed"], final["running"], final["succeeded"]) == (1, 0, 0)
    assert outcome.cluster.state.list("PodGroup") == []


def test_a_restart_policy_restarts_the_job_until_max_retry() -> None:
    policy = {"event": "PodFailed", "action": "RestartJob"}
    outcome = run(failing_master("rs", policies=[policy], maxRetry=2), until=200.0)
    final = status(outcome, "rs")
    assert final["state"]["phase"] == "Failed"
    assert (final["retryCount"], final["version"]) == (2, 2)
    phases = [c["status"] for c in final["conditions"]]
    assert phases == ["Pending", "Running", "Restarting", "Pending", "Running", "Restarting",
                      "Failed"]  # fmt: skip
    binds_of_master = [e for e in outcome.cluster.event_log
                       if (e.kind, e.name, e.reason) == ("Pod", "rs-master-0", "Scheduled")]  # fmt: skip
    assert len(binds_of_master) == 2, "made again once, after the first restart"
    (master,) = [p for p in outcome.cluster.state.list("Pod")
                 if p["metadata"]["name"] == "rs-master-0"]  # fmt: skip
    assert master["metadata"]["annotations"]["volcano.sh/job-retry-count"] == "1"
    assert master["status"]["phase"] == "Failed", "kept at the last retry"


def test_a_bad_policy_is_refused_naming_it() -> None:
    both = vcjob("both", policies=[{"event": "PodFailed", "exitCode": 1, "action": "AbortJob"}])
    notes: list[str] = []
    simulate(documents=[node("n0"), QUEUE, both], until="10s", warn=notes.append)
    assert notes == ["Job default/both refused: spec.policies[0]: must not specify event and "
                     "exitCode simultaneously"]  # fmt: skip


def test_a_bad_vcjob_is_refused_naming_the_field_and_the_rest_runs() -> None:
    bad = vcjob("bad")
    bad["spec"]["tasks"][1]["name"] = "master"
    over = vcjob("over", min_available=5)
    notes: list[str] = []
    result = simulate(documents=[node("n0"), QUEUE, bad, over, vcjob("good")],
                      until="120s", warn=notes.append)  # fmt: skip
    assert notes == [
        "Job default/bad refused: spec.tasks[1].name: duplicated task name 'master'",
        "Job default/over refused: spec.minAvailable: 5 is more than the tasks' 4 replicas",
    ]
    assert [(w["name"], w["message"].split(":")[0]) for w in result["warnings"]] == [
        ("bad", "spec.tasks[1].name"), ("over", "spec.minAvailable"),
    ]  # fmt: skip
    assert [j["name"] for j in result["volcanoJobs"]] == ["good"]
    assert result["volcanoJobs"][0]["phase"] == "Completed"


def test_a_network_topology_goes_to_the_group_where_kbatch_refuses_it() -> None:
    job = vcjob("topo", networkTopology={"mode": "hard", "highestTierAllowed": 1})
    outcome = run(job, vcjob("plain"), until=120.0)
    refused = [m for _, reason, m in told(outcome, "topo") if reason == "PodGroupRefused"]
    assert len(refused) == 1 and "spec.networkTopology" in refused[0]
    assert not [p for p in outcome.cluster.state.list("Pod") if p["metadata"]["name"]
                .startswith("topo-")]  # fmt: skip
    assert status(outcome, "topo")["state"]["phase"] == "Pending"
    assert status(outcome, "plain")["state"]["phase"] == "Completed"


def test_a_vcjob_and_a_batch_job_of_one_name_are_two_objects() -> None:
    batch = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "same"},
             "spec": {"template": {"spec": {"schedulerName": "kbatch", "restartPolicy": "Never",
                      "containers": [{"name": "c", "image": "x"}]}}}}  # fmt: skip
    outcome = run(vcjob("same"), batch, until=30.0)
    assert status(outcome, "same")["state"]["phase"] == "Running"
    assert ("default", "same") in outcome.jobs.jobs
    names = sorted(p["metadata"]["name"] for p in outcome.cluster.state.list("Pod"))
    assert names == ["same-0", "same-master-0", "same-worker-0", "same-worker-1",
                     "same-worker-2"]  # fmt: skip
