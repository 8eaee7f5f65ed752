"""The simulated job controller ends a Job that fails as Kubernetes' does: past its
``backoffLimit`` (pods that failed, each replaced after a backoff of 10 s doubling
with each failure) or active for its ``activeDeadlineSeconds`` (counted from when it
last started running: a Job kbatch holds until its group is admitted starts then).
The Job gets a ``Failed`` condition and a Warning event with the reason, its pods
still running are deleted, and it makes no more. (A bad backoffLimit or deadline is
refused naming the field: ``test_inputs``.)"""

import itertools
from typing import Any

from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.sim import runner
from kbatch.sim.manifests import load_documents
from scenarios.objects import at, job, node, pod_group

Json = dict[str, Any]


def failing_job(name: str = "j", **spec: Any) -> Json:
    """A one-pod Job whose pod would run 100 s, with ``spec`` added to the Job's."""
    made = job(name, duration="100s")
    made["spec"].update(spec)
    return made


def run(*docs: Json, until: float = 600.0) -> runner.Outcome:
    loaded = load_documents([node("n1"), *docs])
    options = runner.Options(until=until)
    return runner.Simulation(loaded, runner.resolve_conf(None, loaded), options).run()


def job_events(outcome: runner.Outcome, name: str = "j") -> list[tuple[float, str, str]]:
    return [
        (e.time, e.reason, e.message)
        for e in outcome.cluster.event_log
        if (e.kind, e.name) == ("Job", name)
    ]


def test_pods_past_their_deadline_are_replaced_after_a_backoff_until_the_limit() -> None:
    """Each pod fails at 30 s (its activeDeadlineSeconds); the next comes 10 s, then
    20 s later; the third failure is past backoffLimit 2: the Job fails at 120 s."""
    made = failing_job(backoffLimit=2)
    made["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 30
    outcome = run(made)
    created = [t for t, reason, _ in job_events(outcome) if reason == "SuccessfulCreate"]
    assert created == [0.0, 40.0, 90.0]
    assert job_events(outcome)[-1] == (
        120.0,
        "BackoffLimitExceeded",
        "Job has reached the specified backoff limit",
    )
    status = outcome.jobs.jobs[("default", "j")].obj["status"]
    assert status["failed"] == 3 and status["active"] == 0
    assert status["conditions"] == [
        {
            "type": "Failed",
            "status": "True",
            "reason": "BackoffLimitExceeded",
            "message": "Job has reached the specified backoff limit",
        }
    ]


def test_a_job_past_its_deadline_has_its_running_pods_deleted() -> None:
    outcome = run(failing_job(activeDeadlineSeconds=50, parallelism=2))
    events = job_events(outcome)
    assert events[-1] == (50.0, "DeadlineExceeded", "Job was active longer than specified deadline")
    deleted = sorted(m for t, reason, m in events if reason == "SuccessfulDelete" and t == 50.0)
    assert deleted == ["Deleted pod: j-0", "Deleted pod: j-1"]
    status = outcome.jobs.jobs[("default", "j")].obj["status"]
    assert status["conditions"][0]["reason"] == "DeadlineExceeded"
    assert status["startTime"] == "1970-01-01T00:00:00Z" and status["active"] == 0


def test_a_job_within_its_deadline_and_limit_completes() -> None:
    made = job("j", duration="30s")
    made["spec"].update(activeDeadlineSeconds=31, backoffLimit=0)
    outcome = run(made)
    status = outcome.jobs.jobs[("default", "j")].obj["status"]
    assert status["conditions"][0]["type"] == "Complete" and status["failed"] == 0


def test_a_held_job_s_deadline_counts_from_its_release() -> None:
    """The node is taken until 60 s by a gang; the second gang's Job, held until its group
    is admitted (60 s), has a 50 s deadline: its pods run from 60 s and finish at 90 s.
    Counted from its creation it would have failed at 50 s, before it ever ran."""
    first = job("first", parallelism=4, group="first", duration="60s")
    second = job("second", parallelism=4, group="second", duration="30s")
    second["spec"]["activeDeadlineSeconds"] = 50
    docs = [pod_group("first", min_member=4), first]
    docs += [at(pod_group("second", min_member=4), "1s"), at(second, "1s")]
    outcome = run(*docs)
    status = outcome.jobs.jobs[("default", "second")].obj["status"]
    assert status["conditions"][0]["type"] == "Complete", job_events(outcome, "second")
    created = [t for t, r, _ in job_events(outcome, "second") if r == "SuccessfulCreate"]
    assert min(created) >= 60.0


IGNORE_DISRUPTIONS = {
    "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
}


def evicted_over_and_over(
    policy: Json | None, evictions: int = 4
) -> tuple[runner.Simulation, list[float]]:
    """A one-pod Job with backoffLimit 2, its running pod evicted by kbatch (with the
    DisruptionTarget condition) ``evictions`` times, each once its replacement runs; and
    when each pod was seen running (the last one's too, if any is made)."""
    made = failing_job(backoffLimit=2)
    if policy is not None:
        made["spec"]["podFailurePolicy"] = policy
    loaded = load_documents([node("n1"), made])
    simulation = runner.Simulation(loaded, runner.resolve_conf(None, loaded))
    now, seen = 0.0, []
    for evicted in range(evictions + 1):
        while not (running := _running_tasks(simulation)) and now < 2000:
            now += 1.0
            simulation.tick(now)
        if not running:
            break
        seen.append(now)
        if evicted == evictions:
            break
        simulation.cluster.evict(running[0], "test", "kbatch: test")
        now += 1.0
        simulation.tick(now)
    return simulation, seen


def _running_tasks(simulation: runner.Simulation) -> list[Any]:
    snapshot = simulation.cluster.snapshot()
    return [
        t
        for j in snapshot.jobs.values()
        for t in j.tasks.values()
        if t.status == TaskStatus.RUNNING
    ]


def test_evicted_pods_count_against_the_backoff_limit_without_a_pod_failure_policy() -> None:
    """As Kubernetes counts a pod deleted before it finished: the third eviction is past
    backoffLimit 2, and the Job fails."""
    simulation, _ = evicted_over_and_over(None)
    record = simulation.jobs.jobs[("default", "j")]
    assert record.obj["status"]["failed"] == 3
    assert record.obj["status"]["conditions"][0]["reason"] == "BackoffLimitExceeded"
    assert _running_tasks(simulation) == []


def test_a_pod_failure_policy_that_ignores_disruptions_keeps_the_job() -> None:
    """Four evictions, none counted; each replacement still waits the job controller's
    backoff: 10, 20, 40, 80 s from when the evicted pod is gone, a tick after the
    eviction (its replacement is bound in the tick it is made)."""
    simulation, seen = evicted_over_and_over(IGNORE_DISRUPTIONS)
    record = simulation.jobs.jobs[("default", "j")]
    assert record.obj["status"]["failed"] == 0 and not record.complete
    assert len(_running_tasks(simulation)) == 1  # the fifth pod runs
    assert [b - a for a, b in itertools.pairwise(seen)] == [11.0, 21.0, 41.0, 81.0], seen


def test_a_pod_failure_policy_may_fail_the_job_on_a_disruption() -> None:
    policy = {"rules": [{"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]}]}
    simulation, _ = evicted_over_and_over(policy, evictions=1)
    status = simulation.jobs.jobs[("default", "j")].obj["status"]
    assert status["conditions"][0]["reason"] == "PodFailurePolicy"
