"""Runtimes an ETA may assume: deadlines, lifetimes, and finished pods' history."""

import pytest

from builders import Cluster
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.visibility import runtimes
from kbatch.visibility.runtimes import History, Runtime


def finished(start: str, *ends: str, phase: str = "Succeeded") -> dict:
    containers = [
        {"name": f"c{i}", "state": {"terminated": {"finishedAt": end}}}
        for i, end in enumerate(ends)
    ]
    return {"status": {"phase": phase, "startTime": start, "containerStatuses": containers}}


@pytest.mark.parametrize(
    ("pod", "seconds"),
    [
        (finished("2024-01-01T00:00:00Z", "2024-01-01T00:01:30Z"), 90.0),
        (finished("2024-01-01T00:00:00Z", "2024-01-01T00:00:10Z", "2024-01-01T00:02:00Z"), 120.0),
        (finished("2024-01-01T00:00:00Z"), None),  # no container says when it finished
        (finished("2024-01-01T00:00:00Z", "2024-01-01T00:01:00Z", phase="Failed"), None),
        (finished("not a time", "2024-01-01T00:01:00Z"), None),
        ({"status": {"phase": "Running", "startTime": "2024-01-01T00:00:00Z"}}, None),
    ],
    ids=["one-container", "last-container", "no-finish", "failed", "bad-time", "running"],
)
def test_a_finished_pod_s_runtime(pod: dict, seconds: float | None) -> None:
    assert runtimes.finished_runtime(pod) == seconds


def job(lifetime: float | None = None, queue: str = "q"):
    cluster = Cluster().queue(queue)
    built = cluster.job("j", queue=queue).tasks(1).job
    built.lifetime = lifetime
    return built


def with_deadline(seconds: int) -> dict:
    return {"spec": {"activeDeadlineSeconds": seconds}}


HISTORY = History(by_group={"default/j": [10.0, 20.0, 60.0]}, by_queue={"q": [100.0, 300.0]})


@pytest.mark.parametrize(
    ("pod", "lifetime", "history", "expected"),
    [
        (with_deadline(50), 600.0, HISTORY, Runtime(50.0, runtimes.DEADLINE)),
        ({}, 600.0, HISTORY, Runtime(600.0, runtimes.LIFETIME)),
        # 0: no lifetime; the spread: the 90th percentile over the 10th, 52 / 12
        ({}, 0.0, HISTORY, Runtime(20.0, runtimes.GROUP, 3, "default/j", 52 / 12)),
        (
            {},
            None,
            History(by_queue=HISTORY.by_queue),
            Runtime(200.0, runtimes.QUEUE, 2, "q", 280 / 120),
        ),
        ({}, None, History(), Runtime(None, runtimes.UNKNOWN)),
    ],
    ids=["deadline", "lifetime", "group-median", "queue-median", "unknown"],
)
def test_a_waiting_pod_s_runtime_in_order_of_trust(pod, lifetime, history, expected) -> None:
    assert runtimes.pending_runtime(pod, job(lifetime), history) == expected


def test_a_running_pod_s_remaining_time() -> None:
    running = job()
    task = next(iter(running.tasks.values()))
    task.started = 1000.0
    # the deadline, less what it ran already
    assert (
        runtimes.remaining_runtime(with_deadline(300), running, 1000.0, 1100.0, HISTORY).seconds
        == 200.0
    )
    # history: of the runtimes longer than what it ran already (15 s), the median, less 15
    left = runtimes.remaining_runtime({}, running, 1000.0, 1015.0, HISTORY)
    assert left == Runtime(25.0, runtimes.GROUP, 3, "default/j", 41 / 9)  # of 5 and 45
    # it ran longer than any of them: what the longest quarter ran beyond their 75th
    # percentile (40 s: 60 ran 20 beyond it), with an unbounded spread (a weak guess)
    outlived = runtimes.remaining_runtime({}, running, 1000.0, 1100.0, HISTORY)
    assert outlived == Runtime(20.0, runtimes.GROUP, 3, "default/j", float("inf"))
    # a lifetime counts from the group's first start, while it lasts
    running.lifetime = 120.0
    assert runtimes.remaining_runtime({}, running, 1000.0, 1100.0, HISTORY) == Runtime(
        20.0, runtimes.LIFETIME
    )
    # another scheduler's pod is known by its deadline only
    assert runtimes.remaining_runtime({}, None, 1000.0, 1100.0, HISTORY).source == runtimes.UNKNOWN


def test_history_groups_finished_pods_by_podgroup_and_queue() -> None:
    cluster = Cluster().queue("q")
    group = cluster.job("g", queue="q").tasks(2, status=TaskStatus.SUCCEEDED).job
    single = cluster.job("solo", queue="q").tasks(1, status=TaskStatus.SUCCEEDED).job
    single.has_pod_group = False  # a pod of its own: it counts for its queue only
    pods = {
        "default/g-0": finished("2024-01-01T00:00:00Z", "2024-01-01T00:00:30Z"),
        "default/g-1": finished("2024-01-01T00:00:00Z", "2024-01-01T00:00:50Z"),
        "default/solo-0": finished("2024-01-01T00:00:00Z", "2024-01-01T00:01:40Z"),
    }
    history = History.of([group, single], pods)
    assert history.by_group == {"default/g": [30.0, 50.0]}
    # the queue's: one per job (a gang's median), so that a big gang weighs as one job
    assert history.by_queue == {"q": [40.0, 100.0]}


def test_the_summary_names_each_source_once() -> None:
    used = [
        Runtime(5.0, runtimes.DEADLINE),
        Runtime(7.0, runtimes.DEADLINE),
        Runtime(60.0, runtimes.QUEUE, 42, "research"),
        Runtime(60.0, runtimes.QUEUE, 42, "research"),
        Runtime(1.0, runtimes.GROUP, 1, "default/g"),
    ]
    assert runtimes.summary(used) == (
        "activeDeadlineSeconds of 2 pods; 42 finished jobs of queue research; "
        "1 finished pod of PodGroup default/g"
    )


def test_a_pod_that_outlived_its_history_ends_after_the_history_s_tail() -> None:
    # the longest quarter's excess over the 75th percentile, its median
    assert runtimes.outlived([10.0, 20.0, 30.0, 40.0, 100.0]) == 60.0
    # all alike: overdue, given one more such runtime at most
    assert runtimes.outlived([50.0, 50.0, 50.0]) == 50.0


def batch_job(
    uid: str, deadline: object = 600, started: str | None = "2024-01-01T00:00:00Z", **spec
):
    status = {"startTime": started} if started is not None else {}
    spec = {"activeDeadlineSeconds": deadline, **spec}
    meta = {"name": uid, "namespace": "default", "uid": uid}
    return {"kind": "Job", "metadata": meta, "spec": spec, "status": status}


def test_a_job_s_deadline_cuts_its_pods_from_its_start_time() -> None:
    """600 s from a start 100 s ago: 500 s left. No cut without a start, a deadline that
    is a positive number, or for a suspended Job; a cut already past is 0."""
    now = runtimes.records.timestamp("2024-01-01T00:01:40Z")
    jobs = [
        batch_job("a"),
        batch_job("unstarted", started=None),
        batch_job("no-deadline", deadline=None),
        batch_job("bad-deadline", deadline="600"),
        batch_job("suspended", suspend=True),
        batch_job("past", deadline=60),
    ]
    assert runtimes.job_cuts(jobs, now) == {"a": 500.0, "past": 0.0}
    owner = {"apiVersion": "batch/v1", "kind": "Job", "uid": "a", "controller": True}
    pod = {"metadata": {"ownerReferences": [owner]}}
    assert runtimes.job_cut_of(pod, {"a": 500.0}) == 500.0
    assert runtimes.job_cut_of({"metadata": {}}, {"a": 500.0}) is None
    not_its_controller = {"metadata": {"ownerReferences": [{**owner, "controller": False}]}}
    assert runtimes.job_cut_of(not_its_controller, {"a": 500.0}) is None


@pytest.mark.parametrize(
    ("runtime", "cut", "expected"),
    [
        (Runtime(300.0, runtimes.DEADLINE), 500.0, Runtime(300.0, runtimes.DEADLINE)),
        (Runtime(900.0, runtimes.DEADLINE), 500.0, Runtime(500.0, runtimes.JOB_DEADLINE)),
        (Runtime(None, runtimes.UNKNOWN), 500.0, Runtime(500.0, runtimes.JOB_DEADLINE)),
        (Runtime(None, runtimes.UNKNOWN), None, Runtime(None, runtimes.UNKNOWN)),
        (Runtime(100.0, runtimes.GROUP, 5), 500.0, Runtime(500.0, runtimes.JOB_DEADLINE)),
        (Runtime(20.0, runtimes.DELETING), 500.0, Runtime(20.0, runtimes.DELETING)),
    ],
    ids=[
        "own-deadline-first",
        "job-first",
        "unknown-otherwise",
        "no-job-deadline",
        "deadline-before-history",
        "deleting-first",
    ],
)
def test_a_pod_runs_no_longer_than_its_job_s_deadline_leaves_it(runtime, cut, expected) -> None:
    assert runtimes.capped(runtime, cut) == expected
