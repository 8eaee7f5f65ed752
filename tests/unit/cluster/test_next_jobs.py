"""The next snapshot's jobs made from the last one's by what changed
(``kbatch.cluster.reuse.next_jobs``): over steps that keep the nodes, classes and resource
names (so that the builder may), with sessions of every action in between, each
snapshot is, field by field, what a new builder makes; and each way the module takes
is taken (jobs kept unchanged, a phase a session moved set back, jobs without tasks
kept unchanged or made again, groups new and gone, a group shown again out of order)."""

from collections import Counter
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import pytest

from kbatch.cluster import snapshot
from kbatch.cluster.reuse import next_jobs
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework.delta import Delta
from kbatch.operators.scheduler.core.framework.info import JobInfo
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts
from unit.cluster.test_kept_jobs import session
from unit.cluster.test_snapshot_reuse import (
    QUEUE,
    RUNNING,
    Step,
    applying,
    compared_snapshots,
    deleting,
    group,
    node,
    pod,
)

DONE = {"phase": "Succeeded", "startTime": "2024-01-01T00:01:00Z"}


def nothing(state: ClusterState) -> None:
    """A step that writes nothing."""


STEPS: list[Step] = [
    applying(QUEUE, node("a"), node("b"), group("g"), pod("g-0", "g"), pod("g-1", "g")),
    nothing,
    applying(*(pod(f"g-{i}", "g", spec={"nodeName": "a"}, status=RUNNING) for i in (0, 1))),
    nothing,
    applying(group("w", minResources={"cpu": "1"})),  # no pods: admitted, nothing written
    nothing,
    applying(group("v", minResources={"cpu": "100"})),  # no pods, never admitted
    nothing,
    # admitted, its pod fits no node: the session moves its phase and touches nothing
    applying(group("big", minMember=1, minResources={"cpu": "1"}), pod("big-0", "big", "20")),
    nothing,
    nothing,
    applying({**group("v", minResources={"cpu": "100"}), "status": {"phase": "Inqueue"}}),
    # no pods, refused while v's 100 cpu are promised; admitted by the session after v
    # goes, when its job was kept without a look
    applying(group("q", minResources={"cpu": "10"})),
    nothing,
    deleting("PodGroup", "v"),
    nothing,
    deleting("Pod", "g-1"),
    deleting("PodGroup", "w"),
    applying(group("x", minMember=1), pod("x-0", "x", spec={"nodeName": "b"}, status=RUNNING)),
    nothing,
    # x is over: shown once more, then left out (settled) ...
    applying(
        {**group("x", minMember=1), "status": {"phase": "Completed"}},
        pod("x-0", "x", spec={"nodeName": "b"}, status=DONE),
    ),
    nothing,
    nothing,
    applying(group("y", minMember=1), pod("y-0", "y", spec={"nodeName": "b"}, status=RUNNING)),
    # ... and shown again, where it ranked: after g, before y
    applying({**group("x", minMember=1), "status": {"phase": "Running"}}),
    nothing,
    applying(pod("y-0", "y", spec={"nodeName": "b"}, status=DONE)),
    nothing,
    # a group whose object says Running, one pod bound and one placed by the session:
    # touched, its phase not moved
    applying(
        {**group("r", minMember=1), "status": {"phase": "Running"}},
        pod("r-0", "r", spec={"nodeName": "a"}, status=RUNNING),
    ),
    applying(pod("r-1", "r")),
    nothing,
    # g deleted and made again between two snapshots: it ranks last now
    lambda state: (deleting("PodGroup", "g")(state), applying(group("g"))(state))[0],
    nothing,
]


def _counting(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often each way of ``next_jobs`` is taken, as the builder runs."""
    counts: Counter[str] = Counter()

    def counted(name: str, of: Callable[..., Any], kind: Callable[[Any], str]) -> None:
        def wrapped(*args: Any) -> Any:
            result = of(*args)
            counts[kind(result)] += 1
            return result

        monkeypatch.setattr(next_jobs, name, wrapped)

    walk = next_jobs.next_jobs
    counted("_set_phase_back", next_jobs._set_phase_back, lambda _: "phase set back")
    counted("_keep_without_tasks", next_jobs._keep_without_tasks, lambda _: "taskless")

    def walked(*args: Any) -> next_jobs.NextJobs | None:
        result = walk(*args)
        if result is None:
            counts["walked every group"] += 1
            return None
        counts["from the last"] += 1
        counts["kept whole"] += len(result.kept)
        counts["kept unchanged without tasks"] += len(result.without_tasks)
        counts["new"] += len(result.jobs.keys() - args[0].jobs.keys())
        counts["gone"] += len(args[0].jobs.keys() - result.jobs.keys())
        return result

    monkeypatch.setattr(snapshot, "next_jobs", walked)
    return counts


@pytest.mark.parametrize("conf_name", ["default", "every action"])
def test_the_jobs_from_the_last_are_those_every_group_walked_gives(
    conf_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts = _counting(monkeypatch)
    for snap in compared_snapshots(STEPS, leave_out_settled=True):
        session(snap, conf_name)
    assert counts["from the last"] >= 15
    assert counts["walked every group"] == 2  # x shown again before y; g made again
    assert counts["kept whole"] >= 20 and counts["new"] >= 3 and counts["gone"] >= 2
    if conf_name == "every action":  # enqueue moves phases
        assert counts["phase set back"] >= 1
        assert counts["kept unchanged without tasks"] >= 3
        assert counts["taskless"] >= 1  # w, admitted: its phase told, made again


def test_switched_off_every_group_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    counts = _counting(monkeypatch)
    walked = Shortcuts().without("jobs_from_last_snapshot")
    for snap in compared_snapshots(STEPS, leave_out_settled=True, shortcuts=walked):
        session(snap, "every action")
    assert counts["from the last"] == 0


def test_the_order_checked_the_long_way_is_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the shown groups' word on how their order changed, a list of every group
    is compared with the last jobs' order: the same snapshots, the same two walks."""
    counts = _counting(monkeypatch)
    listed = Shortcuts().without("job_order_from_changes")
    for snap in compared_snapshots(STEPS, leave_out_settled=True, shortcuts=listed):
        session(snap, "every action")
    assert counts["walked every group"] == 2 and counts["from the last"] >= 15


def test_a_group_shown_again_unwritten_as_another_goes_walks_every_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A Queue that comes shows the settled x again without writing it, while z goes: as
    many groups are shown as the last jobs, none written is new, so neither the new nor
    the gone ones tell; the groups' word that one was put back does."""
    counts = _counting(monkeypatch)
    steps: list[Step] = [
        applying(
            QUEUE,
            node("a"),
            node("b"),
            {**group("x", minMember=1), "status": {"phase": "Completed"}},
            pod("x-0", "x", spec={"nodeName": "b"}, status=DONE),
            group("z", minMember=1),
            pod("z-0", "z", spec={"nodeName": "a"}, status=RUNNING),
        ),
        nothing,
        nothing,  # x settled: left out
        lambda state: (
            deleting("Pod", "z-0")(state),
            deleting("PodGroup", "z")(state),
            applying({**QUEUE, "metadata": {"name": "other"}})(state),
        )[0],
        nothing,
    ]
    shown = [sorted(snap.jobs) for snap in compared_snapshots(steps, leave_out_settled=True)]
    assert shown[2] == ["ns/z"] and shown[3] == ["ns/x"]
    assert counts["walked every group"] == 1


def test_a_session_tells_every_job_it_touches_or_moves_the_phase_of() -> None:
    """What the module rests on: after sessions of every action, a job not in its
    builder's log has the tasks and the phase it was made with."""
    state = ClusterState(leave_out_settled=True)
    told = 0
    for step in STEPS:
        step(state)
        snap = state.snapshot()
        made = {
            key: (job.phase, [(t.uid, t.status, t.node, t.nominated) for t in job.tasks.values()])
            for key, job in snap.jobs.items()
        }
        logs = {id(job.change_log): job.change_log for job in snap.jobs.values()}
        assert len(logs) == 1 and None not in logs.values()  # the builder's, one
        log = next(iter(logs.values()))
        assert log is not None
        session(snap, "every action")
        told += len(log)
        for key, job in snap.jobs.items():
            if key in log:
                continue
            now = [(t.uid, t.status, t.node, t.nominated) for t in job.tasks.values()]
            assert (job.phase, now) == made[key], key
            assert not job.touched, key
    assert told >= 10


def test_a_job_placed_by_a_session_is_told() -> None:
    state = ClusterState()
    STEPS[0](state)
    snap = state.snapshot()
    session(snap, "every action")
    job = snap.jobs["ns/g"]
    assert job.change_log is not None and "ns/g" in job.change_log
    assert job.touched and all(task.node >= 0 for task in job.tasks.values())  # placed


@pytest.mark.parametrize("conf_name", ["default", "every action"])
def test_what_a_snapshot_says_changed_is_so(conf_name: str) -> None:
    """``Delta.changed``: the last snapshot's jobs and this one's, less those kept
    unchanged; and ``changed_jobs`` gives the same of either with or without it."""
    last: dict[str, JobInfo] = {}
    moved: set[str] = set()  # jobs without tasks whose phase the last session moved
    said = 0
    for snap in compared_snapshots(STEPS, leave_out_settled=True):
        delta = snap.delta or Delta((object(), 0))  # (the first: nothing kept)
        unchanged = delta.unchanged_jobs
        expected = (last.keys() | snap.jobs.keys()) - unchanged.keys()
        if delta.changed is not None:
            said += 1
            assert delta.changed == expected
        for of in (snap.jobs, last):
            assert delta.changed_jobs(of) == of.keys() - unchanged.keys()
        # one without tasks is kept only as it was made (as _jobs keeps them)
        assert not moved & unchanged.keys()
        last = dict(snap.jobs)
        made = {uid: job.phase for uid, job in snap.jobs.items() if not job.tasks}
        session(snap, conf_name)
        moved = {uid for uid, phase in made.items() if snap.jobs[uid].phase is not phase}
    assert said >= 15


def test_the_last_jobs_are_copied_in_their_order_whatever_was_deleted() -> None:
    """``next_jobs.shallow_copy``: a dict with deleted entries (the last jobs less those gone)
    copied by its own ``copy``, any other mapping by ``dict``: each a new dict, in order."""
    jobs: dict[str, Any] = {f"ns/g{i}": object() for i in range(30)}
    for i in range(0, 30, 3):
        del jobs[f"ns/g{i}"]
    jobs["ns/late"] = object()
    copy = next_jobs.shallow_copy(jobs)
    assert type(copy) is dict and copy is not jobs
    assert list(copy.items()) == list(jobs.items())
    copy.pop("ns/late")
    assert "ns/late" in jobs
    proxy = next_jobs.shallow_copy(MappingProxyType(jobs))
    assert type(proxy) is dict and list(proxy.items()) == list(jobs.items())
