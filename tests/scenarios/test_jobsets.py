"""JobSets in the simulator (``kbatch.sim.jobsets``): JobSet's controller makes the Jobs,
kbatch holds a labelled JobSet until its one PodGroup is admitted and releases it whole;
success and failure policies end or restart it as JobSet's controller does. Bad fields
are refused naming them."""

from typing import Any

import pytest

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.cluster.errors import ObjectError
from kbatch.sim import output, runner
from kbatch.sim.jobset_spec import jobset_spec
from kbatch.sim.manifests import load_documents
from scenarios.objects import node, queue
from scenarios.test_job_failures import job_events

Json = dict[str, Any]


def replicated(name: str, replicas: int, pods: int, cpu: str = "1", **pod: Any) -> Json:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                        ],
                        **pod,
                    }
                },
            }
        },
    }


def jobset(*jobs: Json, queue_name: str | None = "q", duration: str = "60s", **spec: Any) -> Json:
    labels = {"kbatch.io/queue": queue_name} if queue_name else {}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "js",
            "namespace": "default",
            "labels": labels,
            "annotations": {"kbatch.io/sim-duration": duration},
        },
        "spec": {"replicatedJobs": list(jobs), **spec},
    }


def run(*docs: Json, cpu: str = "8", until: float = 900.0) -> runner.Outcome:
    loaded = load_documents([node("n1", cpu=cpu), queue("q"), *docs])
    options = runner.Options(until=until)
    return runner.Simulation(loaded, runner.resolve_conf(None, loaded), options).run()


def told(outcome: runner.Outcome) -> list[tuple[float, str, str]]:
    return [
        (e.time, e.reason, e.message)
        for e in outcome.cluster.event_log
        if (e.kind, e.name) == ("JobSet", "js")
    ]


def bound_at(outcome: runner.Outcome) -> dict[str, float]:
    return {
        e.name: e.time
        for e in outcome.cluster.event_log
        if e.kind == "Pod" and e.reason == "Scheduled"
    }


def test_a_labelled_jobset_is_held_then_runs_whole_as_one_group_and_completes() -> None:
    outcome = run(jobset(replicated("leader", 1, 1), replicated("workers", 2, 2)))
    reasons = [reason for _, reason, _ in told(outcome)]
    assert reasons == ["Held", "PodGroupCreated", "Released", "AllJobsCompleted"]
    group = outcome.cluster.state.get("PodGroup", "default", "js")
    assert group is not None
    assert group["spec"]["minMember"] == 5
    assert group["status"]["phase"] == "Completed"
    bound = bound_at(outcome)
    assert len(bound) == 5 and len(set(bound.values())) == 1, "bound together, whole"
    names = sorted(key[1] for key in outcome.jobs.jobs)
    assert names == ["js-leader-0", "js-workers-0", "js-workers-1"]
    child = outcome.jobs.jobs[("default", "js-workers-1")].obj
    labels = child["metadata"]["labels"]
    assert labels["jobset.sigs.k8s.io/job-global-index"] == "2"
    assert labels["jobset.sigs.k8s.io/restart-attempt"] == "0"
    assert child["metadata"]["ownerReferences"][0]["kind"] == "JobSet"
    pod = outcome.cluster.state.get("Pod", "default", "js-workers-1-0")
    assert pod is not None
    assert pod["metadata"]["annotations"][GROUP_NAME_ANNOTATION] == "js"


def test_the_json_and_the_table_tell_how_each_jobset_ended() -> None:
    made = jobset(
        replicated("workers", 2, 1, activeDeadlineSeconds=30), failurePolicy={"maxRestarts": 1}
    )
    result = output.to_json(run(made))
    (row,) = result["jobSets"]
    assert (row["name"], row["phase"], row["restarts"]) == ("js", "Failed", 1)
    assert row["message"].startswith("jobset failed due to reaching max number of restarts")
    assert [r["name"] for r in row["replicatedJobs"]] == ["workers"]
    assert "JOBSETS" in output.to_table(result)
    assert "jobSets" not in output.to_json(run()), "a run without JobSets keeps DESIGN §5's keys"


def test_a_jobset_that_does_not_fit_whole_makes_no_pod() -> None:
    outcome = run(jobset(replicated("leader", 1, 1), replicated("workers", 2, 2)), cpu="4")
    assert bound_at(outcome) == {}
    assert outcome.cluster.state.list("Pod") == []
    reasons = [reason for _, reason, _ in told(outcome)]
    assert reasons == ["Held", "PodGroupCreated"]
    assert all(record.obj["spec"]["suspend"] for record in outcome.jobs.jobs.values())


def test_a_failed_job_fails_a_jobset_without_a_failure_policy_and_ends_the_others() -> None:
    """A worker's pod fails at its 30 s deadline (backoffLimit 0): its Job fails, so the
    JobSet does, and the Jobs still running are deleted with their pods."""
    made = jobset(replicated("leader", 1, 1), replicated("workers", 1, 1, activeDeadlineSeconds=30))
    outcome = run(made)
    last = told(outcome)[-1]
    assert last[1:] == (
        "FailedJobs",
        "jobset failed due to one or more job failures (first failed job: js-workers-0)",
    )
    assert 30.0 < last[0] < 40.0
    assert "js-leader-0" not in outcome.jobs.jobs, "the leader's Job is deleted"
    assert all(p["metadata"]["name"] != "js-leader-0-0" for p in outcome.cluster.state.list("Pod"))


def test_a_jobset_restarts_up_to_max_restarts_then_fails() -> None:
    made = jobset(
        replicated("workers", 2, 1, activeDeadlineSeconds=30), failurePolicy={"maxRestarts": 1}
    )
    outcome = run(made)
    reasons = [reason for _, reason, _ in told(outcome)]
    assert reasons[-2:] == ["RestartJobSetFailurePolicyAction", "ReachedMaxRestarts"]
    created = [m for _, r, m in job_events(outcome, "js-workers-0") if r == "SuccessfulCreate"]
    assert created == ["Created pod: js-workers-0-0", "Created pod: js-workers-0-0"]
    record = outcome.jobs.jobs.get(("default", "js-workers-1"))
    assert (
        record is None
        or record.obj["metadata"]["labels"]["jobset.sigs.k8s.io/restart-attempt"] == "1"
    )


def test_a_rule_that_fails_the_jobset_wins_over_restarts() -> None:
    rule = {"action": "FailJobSet", "onJobFailureReasons": ["BackoffLimitExceeded"]}
    made = jobset(
        replicated("workers", 1, 1, activeDeadlineSeconds=30),
        failurePolicy={"maxRestarts": 3, "rules": [rule]},
    )
    reasons = [reason for _, reason, _ in told(run(made))]
    assert reasons[-1] == "FailJobSetFailurePolicyAction"
    assert "RestartJobSetFailurePolicyAction" not in reasons


def test_success_policy_any_on_the_leader_ends_the_jobset_when_it_completes() -> None:
    leader = replicated("leader", 1, 1)
    leader["template"]["metadata"] = {"annotations": {"kbatch.io/sim-duration": "20s"}}
    made = jobset(
        leader,
        replicated("workers", 2, 1),
        duration="10m",
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["leader"]},
    )
    outcome = run(made)
    last = told(outcome)[-1]
    assert last[1] == "AllJobsCompleted" and last[0] < 30.0
    assert "js-workers-0" not in outcome.jobs.jobs, "the workers' Jobs are deleted"


def test_a_jobset_its_owner_suspended_never_runs() -> None:
    outcome = run(jobset(replicated("workers", 2, 1), suspend=True))
    assert outcome.cluster.state.list("Pod") == []
    assert "Released" not in [reason for _, reason, _ in told(outcome)]


def test_in_order_startup_makes_the_next_replicated_job_once_the_first_runs() -> None:
    made = jobset(
        replicated("leader", 1, 1, schedulerName="kbatch"),
        replicated("workers", 1, 2, schedulerName="kbatch"),
        queue_name=None,
        startupPolicy={"startupPolicyOrder": "InOrder"},
    )
    bound = bound_at(run(made))
    assert bound["js-leader-0-0"] < bound["js-workers-0-0"] == bound["js-workers-0-1"]


def test_a_labelled_in_order_jobset_starts_its_leader_then_its_workers() -> None:
    """Its gang is the leader (JobSet's controller makes the workers' Jobs once the
    leader runs): a gang of all three pods would wait for ever for the workers."""
    made = jobset(
        replicated("leader", 1, 1),
        replicated("workers", 1, 2),
        startupPolicy={"startupPolicyOrder": "InOrder"},
    )
    outcome = run(made)
    bound = bound_at(outcome)
    assert bound["js-leader-0-0"] < bound["js-workers-0-0"] == bound["js-workers-0-1"]
    assert told(outcome)[-1][1] == "AllJobsCompleted"


@pytest.mark.parametrize(("status", "after"), [("Ready", 0.0), ("Complete", 30.0)])
def test_a_replicated_job_that_depends_on_another_comes_once_it_is_ready_or_complete(
    status: str, after: float
) -> None:
    """The gang is the driver's pod (the workers' Job comes later): the workers bind as
    soon as the driver runs (Ready), or once it has completed, 30 s later (Complete)."""
    driver = replicated("driver", 1, 1)
    driver["template"]["metadata"] = {"annotations": {"kbatch.io/sim-duration": "30s"}}
    workers = {**replicated("workers", 1, 2), "dependsOn": [{"name": "driver", "status": status}]}
    outcome = run(jobset(driver, workers))
    group = outcome.cluster.state.get("PodGroup", "default", "js")
    assert group is not None and group["spec"]["minMember"] == 1
    bound = bound_at(outcome)
    assert bound["js-workers-0-0"] - bound["js-driver-0-0"] in (after + 1.0, after + 2.0), bound
    assert told(outcome)[-1][1] == "AllJobsCompleted"


def test_a_jobset_managed_by_another_controller_gets_no_jobs() -> None:
    outcome = run(
        jobset(replicated("workers", 1, 1), queue_name=None, managedBy="kueue.x-k8s.io/multikueue")
    )
    assert outcome.jobs.jobs == {}


@pytest.mark.parametrize(
    ("change", "field", "why"),
    [
        ({"replicatedJobs": []}, "spec.replicatedJobs", "at least one"),
        ({"successPolicy": {"operator": "Some"}}, "spec.successPolicy.operator", "All or Any"),
        (
            {"successPolicy": {"targetReplicatedJobs": ["nope"]}},
            "spec.successPolicy.targetReplicatedJobs[0]",
            "no replicated Job is named 'nope'",
        ),
        ({"failurePolicy": {"maxRestarts": -1}}, "spec.failurePolicy.maxRestarts", ">= 0"),
        (
            {"failurePolicy": {"rules": [{"action": "RestartJob"}]}},
            "spec.failurePolicy.rules[0].action",
            "not simulated",
        ),
        (
            {"startupPolicy": {"startupPolicyOrder": "Random"}},
            "spec.startupPolicy.startupPolicyOrder",
            "AnyOrder or InOrder",
        ),
        (
            {"replicatedJobs": [{**replicated("w", 1, 1), "dependsOn": [{"name": "x"}]}]},
            "spec.replicatedJobs[0].dependsOn[0]",
            "the first replicated Job depends on none",
        ),
        (
            {
                "replicatedJobs": [
                    replicated("a", 1, 1),
                    {**replicated("b", 1, 1), "dependsOn": [{"name": "a"}]},
                ]
            },
            "spec.replicatedJobs[1].dependsOn[0].status",
            "Ready or Complete",
        ),
    ],
)
def test_bad_fields_are_refused_naming_them(change: Json, field: str, why: str) -> None:
    made = jobset(replicated("workers", 1, 1), **change)
    with pytest.raises(ObjectError) as caught:
        jobset_spec(made)
    assert caught.value.field == field
    assert why in caught.value.why


def test_a_bad_job_template_is_refused_naming_its_field_under_the_replicated_job() -> None:
    bad = replicated("workers", 1, 1)
    bad["template"]["spec"]["parallelism"] = -1
    outcome = run(jobset(replicated("leader", 1, 1), bad))
    refused = [m for _, r, m in told(outcome) if r == "AdmissionRejected"]
    assert refused and refused[0].startswith("spec.replicatedJobs[1].template.spec.parallelism")
    assert outcome.jobs.jobs == {}
