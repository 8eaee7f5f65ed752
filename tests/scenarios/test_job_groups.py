"""Jobs without a hand-written PodGroup in the simulator (DESIGN §15): a Job labelled
kbatch.io/queue gets a PodGroup made and owned by it, is held until the group is
admitted and released whole (admission/job-groups.yaml says what is expected)."""

from functools import cache

from kbatch import sim
from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.sim import output, runner
from scenarios.runner import HERE, Outcome, header

SCENARIO = "admission/job-groups.yaml"
LABEL_FIELD = "metadata.labels[kbatch.io/queue]"


@cache
def ran() -> tuple[runner.Outcome, Outcome]:
    outcome = sim.run([HERE / SCENARIO], warn=lambda _: None)
    return outcome, Outcome(output.to_json(outcome))


def job_events(outcome: Outcome, name: str) -> list[tuple[float, str]]:
    return [(e["time"], e["reason"]) for e in outcome.events(kind="Job") if e["name"] == name]


def test_the_header_says_what_is_checked() -> None:
    assert "released whole" in header(SCENARIO) and "group of one" in header(SCENARIO)


def test_each_labelled_job_gets_its_group_owned_by_it() -> None:
    done, _ = ran()
    state = done.cluster.state
    for name, pods, min_resources in (
        ("train", 3, {"cpu": "6", "memory": "3Gi", "pods": "3"}),
        ("wide", 2, {"cpu": "6", "pods": "2"}),
        ("late", 1, {"cpu": "1", "pods": "1"}),
    ):
        # (a finished group has left the state; what is kept of it says the same)
        group = state.get("PodGroup", "default", name) or done.cluster.departed.groups.get(
            ("default", name)
        )
        assert group is not None, name
        job = done.jobs.jobs[("default", name)].obj
        assert group["spec"]["minMember"] == pods
        assert group["spec"]["minResources"] == min_resources
        assert group["spec"]["queue"] == job["metadata"]["labels"]["kbatch.io/queue"]
        (owner,) = group["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", name, True)
        assert owner["uid"] == job["metadata"]["uid"]
        template = job["spec"]["template"]
        assert template["metadata"]["annotations"][GROUP_NAME_ANNOTATION] == name
        assert template["spec"]["schedulerName"] == "kbatch"


def test_a_job_is_held_until_its_group_is_inqueue_then_released_whole() -> None:
    _, outcome = ran()
    for name, pods in (("train", 3), ("wide", 2), ("late", 1)):
        events = job_events(outcome, name)
        reasons = [reason for _, reason in events]
        assert reasons[:3] in (
            ["Held", "PodGroupCreated", "Released"],
            ["Held", "PodGroupRefused", "PodGroupCreated"],
        ), events
        released = next(t for t, reason in events if reason == "Released")
        created = [t for t, reason in events if reason == "SuccessfulCreate"]
        assert len(created) == pods and min(created) > released, events
        binds = set(bind_times(outcome, name))
        assert len(binds) == 1, f"{name}'s pods are bound together: {binds}"
        assert outcome.group(name)["phase"] == "Completed"


def bind_times(outcome: Outcome, job: str) -> list[float]:
    return [
        e["time"]
        for e in outcome.events(reason="Scheduled", kind="Pod")
        if e["name"].rpartition("-")[0] == job
    ]


def test_a_gang_that_does_not_fit_gets_no_pod_until_it_does() -> None:
    _, outcome = ran()
    train_done = min(e["time"] for e in outcome.events(reason="Completed") if e["name"] == "train")
    wide = bind_times(outcome, "wide")
    assert len(wide) == 2 and min(wide) >= train_done
    told = [e for e in outcome.events(reason="Unschedulable") if e["name"] == "wide"]
    assert told and "cpu 6 >" in told[0]["message"]
    assert all(t < train_done for t in bind_times(outcome, "train"))


def test_a_missing_queue_keeps_the_job_held_naming_the_label_until_it_comes() -> None:
    _, outcome = ran()
    (refused,) = [e for e in outcome.events(reason="PodGroupRefused") if e["name"] == "late"]
    assert refused["type"] == "Warning" and refused["message"].startswith(LABEL_FIELD)
    assert "queue 'later' does not exist" in refused["message"]
    created = [t for t, reason in job_events(outcome, "late") if reason == "SuccessfulCreate"]
    assert created and min(created) > 90, "no pod of it exists before its queue does"


def test_parallelism_zero_is_refused_naming_the_field() -> None:
    _, outcome = ran()
    (refused,) = [e for e in outcome.events(reason="AdmissionRejected") if e["name"] == "empty"]
    assert refused["message"].startswith("spec.parallelism: 0 pods make no gang")
    assert outcome.pods(job="empty") == []
    assert all(g["name"] != "empty" for g in outcome.json["podGroups"])


def test_a_pod_of_kbatch_without_a_group_runs_as_a_group_of_one() -> None:
    _, outcome = ran()
    single = outcome.pod("single")
    assert single["node"] is not None and single["phase"] == "Succeeded"
    assert outcome.summary["binds"] == 3 + 2 + 1 + 1 and outcome.summary["evictions"] == 0


def test_the_example_gangs_a_labelled_job() -> None:
    examples = HERE.parents[1] / "examples"
    done = sim.run([examples / "sim-cluster.yaml", examples / "labelled-job.yaml"])
    outcome = Outcome(output.to_json(done))
    assert "kbatch.io/queue is all it takes" in header(examples / "labelled-job.yaml")
    assert len(set(bind_times(outcome, "finetune"))) == 1 and len(outcome.bound("finetune")) == 4
    assert outcome.group("finetune")["queue"] == "research"
    assert outcome.group("finetune")["phase"] == "Completed"
