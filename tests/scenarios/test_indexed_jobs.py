"""Indexed Jobs in the simulated job controller (``kbatch.sim.job_indexes``): a pod per
completion index, the lowest first; complete once every index succeeded; with
``backoffLimitPerIndex`` failures count per index, and failed indexes fail the Job as
Kubernetes' controller fails it. Bad fields are refused naming them."""

from typing import Any

import pytest

from kbatch.cluster.errors import ObjectError
from kbatch.sim import runner
from kbatch.sim.job_indexes import COMPLETION_INDEX
from kbatch.sim.job_spec import job_spec
from kbatch.sim.manifests import load_documents
from scenarios.objects import job, node
from scenarios.test_job_failures import _running_tasks, job_events, run

Json = dict[str, Any]


def indexed_job(completions: int, parallelism: int, duration: str, **spec: Any) -> Json:
    made = job("j", parallelism=parallelism, completions=completions, duration=duration)
    made["spec"].update(completionMode="Indexed", **spec)
    return made


def created(outcome: Any) -> list[tuple[float, str]]:
    return [(t, m.removeprefix("Created pod: ")) for t, r, m in job_events(outcome)
            if r == "SuccessfulCreate"]  # fmt: skip


def test_an_indexed_job_runs_a_pod_per_index_the_lowest_first_and_completes() -> None:
    outcome = run(indexed_job(4, 2, "30s"))
    assert created(outcome) == [(0.0, "j-0-0"), (0.0, "j-1-1"), (30.0, "j-2-2"), (30.0, "j-3-3")]
    record = outcome.jobs.jobs[("default", "j")]
    assert record.obj["status"]["succeeded"] == 4
    assert record.obj["status"]["conditions"] == [{"type": "Complete", "status": "True"}]
    pod = outcome.cluster.state.get("Pod", "default", "j-2-2")
    assert pod is not None
    assert pod["metadata"]["annotations"][COMPLETION_INDEX] == "2"
    assert pod["metadata"]["labels"][COMPLETION_INDEX] == "2"
    assert pod["spec"]["hostname"] == "j-2"


def test_a_failed_pod_is_replaced_for_its_own_index() -> None:
    """Each pod fails at its 30 s deadline; with backoffLimitPerIndex 1 each index gets a
    second pod, then fails: once both have, the Job fails with FailedIndexes (not with
    BackoffLimitExceeded: backoffLimit has no default limit with a per-index one)."""
    made = indexed_job(2, 2, "100s", backoffLimitPerIndex=1)
    made["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 30
    outcome = run(made)
    names = [name for _, name in created(outcome)]
    assert names == ["j-0-0", "j-1-1", "j-0-2", "j-1-3"]
    reason, message = job_events(outcome)[-1][1:]
    assert (reason, message) == ("FailedIndexes", "Job has failed indexes")
    assert outcome.jobs.jobs[("default", "j")].obj["status"]["failed"] == 4


def test_more_failed_indexes_than_allowed_fail_the_job_at_once() -> None:
    made = indexed_job(3, 1, "100s", backoffLimitPerIndex=0, maxFailedIndexes=0)
    made["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 30
    outcome = run(made)
    assert created(outcome) == [(0.0, "j-0-0")]
    assert job_events(outcome)[-1] == (
        30.0,
        "MaxFailedIndexesExceeded",
        "Job has exceeded the specified maximal number of failed indexes",
    )


@pytest.mark.parametrize(
    ("spec", "field", "why"),
    [
        ({"completionMode": "Sparse"}, "spec.completionMode", "must be NonIndexed or Indexed"),
        ({"completionMode": "Indexed", "completions": None}, "spec.completions", "required"),
        ({"backoffLimitPerIndex": 1}, "spec.backoffLimitPerIndex", "only for completionMode"),
        ({"completionMode": "Indexed", "backoffLimitPerIndex": -1},
         "spec.backoffLimitPerIndex", "expected a non-negative integer"),
        ({"completionMode": "Indexed", "maxFailedIndexes": 1},
         "spec.maxFailedIndexes", "only with spec.backoffLimitPerIndex"),
        ({"completionMode": "Indexed", "backoffLimitPerIndex": 1, "maxFailedIndexes": 3},
         "spec.maxFailedIndexes", "must be at most spec.completions (2)"),
    ],
)  # fmt: skip
def test_bad_indexing_is_refused_naming_the_field(spec: Json, field: str, why: str) -> None:
    made = job("j", parallelism=2, completions=2)
    made["metadata"]["namespace"] = "default"
    made["spec"].update(spec)
    made["spec"] = {k: v for k, v in made["spec"].items() if v is not None}
    with pytest.raises(ObjectError) as refused:
        job_spec(made)
    assert refused.value.field == field and why in refused.value.why, refused.value


def test_an_eviction_the_policy_says_fails_its_index_gets_no_new_pod() -> None:
    """podFailurePolicy FailIndex on kbatch's DisruptionTarget: the evicted pod's index
    fails at once (no replacement); the other index succeeds; the Job then fails with
    FailedIndexes."""
    made = indexed_job(2, 2, "50s", backoffLimitPerIndex=3)
    rule = {"action": "FailIndex", "onPodConditions": [{"type": "DisruptionTarget"}]}
    made["spec"]["podFailurePolicy"] = {"rules": [rule]}
    loaded = load_documents([node("n1"), made])
    simulation = runner.Simulation(loaded, runner.resolve_conf(None, loaded))
    now = 0.0
    while len(running := _running_tasks(simulation)) < 2:
        now += 1.0
        simulation.tick(now)
    evicted = next(task for task in running if task.name == "j-1-1")
    simulation.cluster.evict(evicted, "test", "kbatch: test")
    while now < 120.0:
        now += 1.0
        simulation.tick(now)
    record = simulation.jobs.jobs[("default", "j")]
    made_pods = [e.message for e in simulation.cluster.event_log if e.reason == "SuccessfulCreate"]
    assert made_pods == ["Created pod: j-0-0", "Created pod: j-1-1"]
    assert record.obj["status"]["conditions"][0]["reason"] == "FailedIndexes"
