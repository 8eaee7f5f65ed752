"""ETAs: the simulator run forward from a snapshot, checked against what the same
simulation then does (``scenarios.live``: a simulated cluster stands for the live one)."""

import pytest

from kbatch.operators.scheduler.core.runner import default_conf, load_conf
from kbatch.visibility import eta
from kbatch.visibility import standing as visibility
from scenarios import live
from scenarios import objects as o

PERIOD = 1.0
NOW = 10.0


def forecast(objects: visibility.ClusterObjects, *targets: str, conf=None, **options):
    conf = conf or default_conf()
    session, _ = visibility.open_session(objects, conf)
    return eta.forecast(session, objects, conf, [f"default/{t}" for t in targets], **options)


def check_against_the_simulation(
    documents: list[dict], target: str, now: float = NOW, **options
) -> eta.Estimate:
    """The estimate made at ``now`` is what the simulation then does, to within one period."""
    result = forecast(live.cluster_at(documents, now), target, **options)
    estimate = result.estimates[f"default/{target}"]
    started = live.start_of(documents, target)
    assert started is not None and estimate.seconds is not None, estimate
    assert abs(now + estimate.seconds - started) <= PERIOD, (estimate, started)
    return estimate


def test_a_job_behind_one_with_a_deadline_starts_when_the_deadline_ends_it() -> None:
    documents = [
        o.node("n1", cpu="4"),
        *live.gang("first", 4, duration="45s", deadline=45),
        *live.gang("second", 4, duration="30s"),
    ]
    estimate = check_against_the_simulation(documents, "second")
    assert estimate.seconds == 35.0
    assert estimate.text == (
        "~35s (1 running job finishes by then; runtimes from activeDeadlineSeconds "
        "of 4 pods; high confidence)"
    )
    assert (estimate.confidence, estimate.running_done) == ("high", 1)


def test_a_job_behind_one_with_a_lifetime_starts_when_the_lifetime_is_over() -> None:
    documents = [
        o.node("n1", cpu="2"),
        *live.gang("first", 2, duration="50s", lifetime="50s"),
        *live.gang("second", 2),
    ]
    estimate = check_against_the_simulation(documents, "second")
    assert "kbatch.io/lifetime of 2 pods" in estimate.text


def test_runtimes_from_finished_pods_of_the_queue() -> None:
    """A gang of queue research ran 20 s; the one running now (for 5 s) has no deadline:
    it is taken to run as long, and the answer says it is a weak guess."""
    documents = [
        o.node("n1", cpu="2"),
        o.queue("research"),
        *live.gang("old", 2, queue="research", duration="20s"),
        *live.gang("running", 2, queue="research", duration="20s", submit_at="1s"),
        *live.gang("waiting", 2, queue="research", duration="20s", submit_at="2s"),
    ]
    estimate = check_against_the_simulation(documents, "waiting", now=25.0)
    assert estimate.seconds == 15.0
    assert "1 finished job of queue research" in estimate.text
    assert estimate.confidence == "low"


def test_unknown_when_what_it_waits_for_has_no_known_runtime() -> None:
    documents = [o.node("n1", cpu="2"), *live.gang("endless", 2), *live.gang("waiting", 2)]
    estimate = forecast(live.cluster_at(documents, NOW), "waiting").estimates["default/waiting"]
    assert estimate.seconds is None and estimate.confidence == "none"
    assert estimate.text.startswith("unknown: 2 running pods with no known runtime")


def test_unknown_when_it_can_never_fit() -> None:
    documents = [o.node("n1", cpu="2"), *live.gang("huge", 3, cpu="1")]
    estimate = forecast(live.cluster_at(documents, NOW), "huge").estimates["default/huge"]
    assert estimate.seconds is None
    assert "does not start once all else has finished" in estimate.text


def test_the_oldest_goes_first_as_on_the_cluster_whatever_the_names() -> None:
    """Creation times are kept: 'zz-old' (older) starts before 'aa-new'."""
    documents = [
        o.node("n1", cpu="2"),
        *live.gang("running", 2, duration="30s", deadline=30),
        *live.gang("zz-old", 2, duration="20s", deadline=20, submit_at="2s"),
        *live.gang("aa-new", 2, duration="20s", submit_at="3s"),
    ]
    result = forecast(live.cluster_at(documents, NOW), "zz-old", "aa-new")
    old, new = result.estimates["default/zz-old"], result.estimates["default/aa-new"]
    assert (old.seconds, new.seconds) == (20.0, 40.0)
    assert new.ahead_started == 1 and "1 waiting job starts first" in new.text
    for name, estimate in (("zz-old", old), ("aa-new", new)):
        assert NOW + estimate.seconds == live.start_of(documents, name)


def test_a_group_whose_job_is_held_until_it_is_admitted() -> None:
    """Delayed pod creation: the PodGroup waits with no pods, its Job suspended by kbatch;
    the forecast releases the Job when the group is admitted, as kbatch would."""
    group = o.pod_group("held", 2)
    group["spec"]["minResources"] = {"cpu": "2"}
    job = o.job("held", parallelism=2, group="held", duration="10s")
    running = live.gang("running", 2, duration="25s", deadline=25)
    documents = [o.node("n1", cpu="2"), *running, o.at(job, "1s"), o.at(group, "1s")]
    objects = live.cluster_at(documents, NOW)
    assert any(j["spec"].get("suspend") for j in objects.jobs), "the Job is held"
    estimate = check_against_the_simulation(documents, "held")
    assert estimate.seconds == 16.0  # admitted at 25 s, its pods made and bound at the next session


def test_a_job_behind_a_batch_job_with_a_deadline_starts_when_the_job_controller_ends_it() -> None:
    """The running pods have no deadline of their own, but their Job has one (45 s): the job
    controller ends them then (``Job.spec.activeDeadlineSeconds``, from its startTime)."""
    first = o.job("first", parallelism=2, group="first", duration="100s")
    first["spec"]["activeDeadlineSeconds"] = 45
    documents = [o.node("n1", cpu="2"), o.pod_group("first", 2), first, *live.gang("second", 2)]
    estimate = check_against_the_simulation(documents, "second")
    assert estimate.text.endswith(
        "runtimes from their Job's activeDeadlineSeconds of 2 pods; high confidence)"
    ), estimate.text
    suspended = live.cluster_at(documents, NOW)
    for job in suspended.jobs:
        job["spec"]["suspend"] = True  # (as if suspended by its owner since: no cut then)
    unknown = forecast(suspended, "second").estimates["default/second"]
    assert unknown.seconds is None and "2 running pods with no known runtime" in unknown.text


def test_a_held_job_s_own_deadline_is_its_pods_runtime() -> None:
    """The Job held for 'held' has a 20 s deadline and no other runtime: the job behind it
    starts when that deadline, counted from its release, ends it."""
    group = o.pod_group("held", 2)
    group["spec"]["minResources"] = {"cpu": "2"}
    job = o.job("held", parallelism=2, group="held")
    job["spec"]["activeDeadlineSeconds"] = 20
    running = live.gang("running", 2, duration="25s", deadline=25)
    documents = [o.node("n1", cpu="2"), *running, o.at(job, "1s"), o.at(group, "1s")]
    documents += live.gang("after", 2, duration="5s", submit_at="2s")
    estimate = check_against_the_simulation(documents, "after")
    assert "their Job's activeDeadlineSeconds of 2 pods" in estimate.text
    assert estimate.confidence == "high"


def test_one_forward_run_answers_for_every_waiting_job() -> None:
    documents = [o.node("n1", cpu="1"), *live.gang("a", 1, duration="10s", deadline=10)]
    for i, name in enumerate(("b", "c", "d"), start=1):
        documents += live.gang(name, 1, duration="5s", deadline=5, submit_at=f"{i}s")
    result = forecast(live.cluster_at(documents, 4.0), "b", "c", "d", "a")
    assert {k: e.seconds for k, e in result.estimates.items()} == {
        "default/a": 0.0,  # started already
        "default/b": 6.0,
        "default/c": 11.0,
        "default/d": 16.0,
    }
    assert result.estimates["default/a"].text == "started already (Running)"
    assert result.stopped == "started"


def test_a_forecast_that_runs_out_of_sessions_says_later_than() -> None:
    documents = [o.node("n1", cpu="1"), *live.gang("a", 1, duration="5s", deadline=5)]
    documents += live.gang("b", 1, duration="5s", deadline=5, submit_at="1s")
    result = forecast(live.cluster_at(documents, 2.0), "b", max_sessions=1)
    estimate = result.estimates["default/b"]
    assert (estimate.seconds, estimate.later_than, result.stopped) == (None, 0.0, "budget")
    assert estimate.text == "later than 0s (the simulation stopped there after 1 session)"


@pytest.mark.parametrize(
    ("runtimes", "pods", "period", "step"),
    [
        ([], 10_000, 1.0, 1.0),
        ([30.0, 50.0], 10_000, 1.0, 2.0),  # a 12th of the median, 40 s: 3.3 s
        ([3600.0] * 3, 10_000, 1.0, 300.0),  # a 12th is 300 s
        ([3600.0] * 3, 1_000, 1.0, 30.0),  # 120 steps on a cluster of 1,000 pods
        ([3600.0], 10_000, 7.0, 294.0),  # whole periods: 42 of them
        ([30.0], 10_000, 5.0, 5.0),  # never less than a period
        ([60.0], 10, 1.0, 1.0),  # a small cluster: the period
    ],
)
def test_the_step_grows_with_the_work_on_a_large_cluster(runtimes, pods, period, step) -> None:
    plan = eta.Plan(
        objects=[{"kind": "Pod"}] * pods,
        pending={"j": [eta.Runtime(s, "deadline") for s in runtimes]},
    )
    assert eta.step_for(plan, period) == step


def test_long_work_is_simulated_in_longer_steps_and_the_answer_says_so(monkeypatch) -> None:
    monkeypatch.setattr(eta, "POD_STEPS", 0)  # as on a large cluster
    documents = [
        o.node("n1", cpu="1"),
        *live.gang("long", 1, duration="1h", deadline=3600),
        *live.gang("next", 1, duration="1h", deadline=3600),
    ]
    result = forecast(live.cluster_at(documents, NOW), "next")
    estimate = result.estimates["default/next"]
    assert result.step == 120.0  # the round step at most 3595 / 12 (299.6 s)
    assert result.sessions <= 3600 / result.step
    assert 0 <= estimate.seconds - 3590.0 <= result.step
    assert "to within 2 min" in estimate.text


def test_the_scheduler_conf_is_the_cluster_s() -> None:
    """With priority before drf, the urgent job goes first although it is the younger."""
    conf = load_conf(
        'actions: "enqueue, allocate, backfill"\n'
        "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n"
        "- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n"
    )
    urgent = live.gang("urgent", 1, duration="5s", deadline=5, submit_at="2s")
    for doc in urgent:
        if doc["kind"] == "Pod":
            doc["spec"]["priority"] = 1000
    documents = [
        o.node("n1", cpu="1"),
        *live.gang("running", 1, duration="20s", deadline=20),
        *live.gang("plain", 1, duration="5s", deadline=5, submit_at="1s"),
        *urgent,
    ]
    result = forecast(live.cluster_at(documents, 3.0), "plain", "urgent", conf=conf)
    assert result.estimates["default/urgent"].seconds == 17.0
    assert result.estimates["default/plain"].seconds == 22.0


def test_human_durations() -> None:
    assert [eta.human(s) for s in (0, 59.6, 119, 840, 7199, 7260, 200000)] == [
        "0s", "60s", "119s", "14 min", "2h00m", "2h01m", "2d7h",
    ]  # fmt: skip
