"""Jobs with tasks kept from one snapshot to the next (``kbatch.cluster.reuse.kept_jobs``):
a state that keeps its builder makes, snapshot after snapshot with sessions in between,
what a state given a new builder every time makes, field by field; it does hand jobs
on; and what it rests on holds: a session changes a job only through what marks it
touched, but for its phase."""

from collections.abc import Mapping

import pytest

from kbatch.api.podgroup import PodGroupPhase
from kbatch.bench.scheduling import FULL_ACTIONS
from kbatch.cluster.snapshot import SnapshotBuilder
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.info import NO_NODE, JobInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts
from unit.cluster.test_snapshot_reuse import (
    RUNNING,
    STEPS,
    Ignoring,
    Step,
    _plain,
    compared_snapshots,
    described,
    group,
    node,
    pod,
)

CONFS = {
    "default": runner.default_conf(),
    "every action": runner.default_conf().model_copy(update={"actions": FULL_ACTIONS}),
}


def nothing(state: ClusterState) -> None:
    """A step that writes nothing: the next snapshot may hand every job on."""


def session(snap: Snapshot, conf_name: str) -> None:
    conf = CONFS[conf_name]
    runner.Scheduler(Ignoring(snap), conf, lambda: 0.0, lambda: "s").run_once()


# Every step of the reuse test, each followed by one that writes nothing.
QUIET_STEPS: list[Step] = [s for step in STEPS for s in (step, nothing)]


@pytest.mark.parametrize("conf_name", sorted(CONFS))
def test_a_kept_builder_hands_on_what_a_new_one_would_make(conf_name: str) -> None:
    kept = 0
    last: dict[str, object] = {}
    for snap in compared_snapshots(QUIET_STEPS):
        kept += sum(1 for k, job in snap.jobs.items() if job.tasks and last.get(k) is job)
        last = dict(snap.jobs)
        session(snap, conf_name)
    assert kept >= 10  # not a comparison of jobs all made anew


def test_a_job_a_session_touched_is_made_anew() -> None:
    """Whatever a session did to a job it marked touched (here: everything) is not seen
    by the next snapshot."""
    state, fresh = ClusterState(), ClusterState()
    for step in STEPS[:3]:
        step(state)
        step(fresh)
    first = state.snapshot()
    for job in first.jobs.values():
        if job.tasks:
            job.touch()
            for task in job.tasks.values():
                task.status, task.node = TaskStatus.FAILED, 1
            job.allocated.fill(-7.0)
            job.counts[:] = [99] * len(job.counts)
    fresh._builder = SnapshotBuilder()
    second = state.snapshot()
    assert described(second) == described(fresh.snapshot())
    assert all(second.jobs[k] is not job for k, job in first.jobs.items() if job.tasks)


def test_an_untouched_job_of_an_unchanged_unit_is_the_same_object() -> None:
    state = ClusterState()
    for step in STEPS[:3]:
        step(state)
    first = state.snapshot()
    second = state.snapshot()
    with_tasks = [key for key, job in first.jobs.items() if job.tasks]
    assert with_tasks and all(second.jobs[key] is first.jobs[key] for key in with_tasks)
    state.apply(pod("g-1", "g", spec={"nodeName": "b"}, status=RUNNING))  # g's unit written
    third = state.snapshot()
    assert third.jobs["ns/g"] is not second.jobs["ns/g"]
    assert all(third.jobs[k] is second.jobs[k] for k in with_tasks if k != "ns/g")


def test_a_switched_off_builder_makes_every_job_anew() -> None:
    state = ClusterState(shortcuts=Shortcuts().without("unchanged_jobs"))
    for step in STEPS[:3]:
        step(state)
    first = state.snapshot()
    second = state.snapshot()
    assert all(second.jobs[k] is not job for k, job in first.jobs.items() if job.tasks)


def test_assumed_binds_and_their_end_make_the_job_anew() -> None:
    """A pod whose bind the state assumes is shown on its node, then as the watch shows
    it again once the assumption ends: both snapshots make its job anew."""
    steps: list[Step] = [
        STEPS[0],
        lambda s: s.assume_bound("ns", "g-1", "b"),
        nothing,
        lambda s: s.forget("ns", "g-1"),
        nothing,
        lambda s: s.assume_releasing("ns", "g-0"),
        lambda s: s.apply(node("c")),  # a node more: every task's node index may move
        nothing,
    ]
    for _ in compared_snapshots(steps):
        pass


@pytest.mark.parametrize("conf_name", sorted(CONFS))
def test_a_session_changes_nothing_of_an_untouched_job_but_its_phase(conf_name: str) -> None:
    """What handing jobs on rests on: sessions on every step's snapshot."""
    state = ClusterState()
    seen_untouched = 0
    for step in STEPS:
        step(state)
        snap = state.snapshot()
        before = {key: (_plain(job), _tasks_of(job)) for key, job in snap.jobs.items()}
        session(snap, conf_name)
        for key, job in snap.jobs.items():
            if job.touched:
                continue
            seen_untouched += bool(job.tasks)
            job.phase = before[key][0][1]["phase"]  # the one field it may change
            assert (_plain(job), _tasks_of(job)) == before[key], key
    assert seen_untouched


def _tasks_of(job: JobInfo) -> list[tuple[str, TaskStatus, int, int]]:
    """What a session may change of a job's tasks (``_plain`` shows the tasks' fields
    too; this says it plainly)."""
    return [(t.uid, t.status, t.node, t.nominated) for t in job.tasks.values()]


def test_the_untouched_jobs_of_the_reuse_steps_include_placed_ones() -> None:
    """The steps above do keep jobs with tasks on nodes (or the fast path's lists of
    placed tasks would go untested)."""
    state = ClusterState()
    for step in STEPS[:3]:
        step(state)
    state.snapshot()
    snap = state.snapshot()
    placed = [t for job in snap.jobs.values() for t in job.tasks.values() if t.node != NO_NODE]
    assert placed and all(t.uid in snap.nodes.infos[t.node].tasks for t in placed)


def test_keeping_or_not_keeping_room_for_a_task_touches_its_job() -> None:
    """``Session.keep`` and ``unkeep`` change a task's nominated node (and nothing calls
    ``JobInfo.set_status`` for it)."""
    state = ClusterState()
    for step in STEPS[:9]:  # h-1 pending, nominated to b
        step(state)
    for change in ("unkeep", "keep"):
        snap = state.snapshot()
        job = snap.jobs["ns/h"]
        task = next(t for t in job.tasks.values() if t.name == "h-1")
        assert task.nominated != NO_NODE and not job.touched
        session = runner.open_session(snap, runner.default_conf(), 0.0, "s")
        node = session.unkeep(task)
        if change == "keep":
            job.touched = False
            session.keep(task, node)
        assert job.touched, change


def test_a_pods_own_group_kept_says_inqueue_again() -> None:
    """The phase of a pod's own group (no PodGroup) is Inqueue in every snapshot, set
    back if a session moved it."""
    state = ClusterState()
    for step in STEPS[:5]:  # "solo": a pod without a group
        step(state)
    first = state.snapshot()
    solo = next(job for job in first.jobs.values() if not job.has_pod_group)
    solo.phase = PodGroupPhase.RUNNING
    second = state.snapshot()
    assert second.jobs[solo.uid] is solo and solo.phase is PodGroupPhase.INQUEUE


@pytest.mark.parametrize("conf_name", sorted(CONFS))
def test_what_a_snapshot_keeps_unchanged_is_the_last_ones_as_it_was_and_stayed(
    conf_name: str,
) -> None:
    """``Delta.unchanged_jobs``: each job is the last snapshot's object, and says what it
    said when that snapshot was made and, but for the phase a session may move and the
    builder sets back (only for jobs with tasks: one without is made anew then), when
    its session ended (the sums that take it as unchanged read it at either). Jobs
    without tasks are among them (groups without pods that nothing wrote)."""
    seen: dict[str, tuple[JobInfo, dict[str, object], dict[str, object]]] = {}
    without_tasks = 0
    for snap in compared_snapshots(QUIET_STEPS):
        for uid, job in _unchanged(snap).items():
            last, made, closed = seen[uid]
            assert job is last and _plain(job)[1] == made, uid
            if job.tasks:
                closed = {**closed, "phase": made["phase"]}
            assert closed == made, uid
            without_tasks += not job.tasks
        made_as = {uid: _plain(job)[1] for uid, job in snap.jobs.items()}
        session(snap, conf_name)
        seen = {uid: (job, made_as[uid], _plain(job)[1]) for uid, job in snap.jobs.items()}
    assert without_tasks >= 3


def test_a_group_without_pods_admitted_by_a_session_is_not_kept_unchanged() -> None:
    """Enqueue moves a group's phase without a write (here, none lands): the next
    snapshot makes its job anew, as its group says, and does not hand it on."""
    state = ClusterState()
    STEPS[0](state)  # a queue, nodes, a gang
    state.apply(group("w", minMember=1, minResources={"cpu": "1"}))  # no pods yet
    first = state.snapshot()
    assert not first.jobs["ns/w"].tasks and first.jobs["ns/w"].phase is PodGroupPhase.PENDING
    session(first, "every action")
    assert first.jobs["ns/w"].phase is PodGroupPhase.INQUEUE  # admitted, nothing written
    second = state.snapshot()
    assert "ns/w" not in _unchanged(second)
    assert second.jobs["ns/w"] is not first.jobs["ns/w"]
    assert second.jobs["ns/w"].phase is PodGroupPhase.PENDING
    third = state.snapshot()  # nothing since (Ignoring: no session ran on the second)
    assert _unchanged(third).get("ns/w") is second.jobs["ns/w"]


def _unchanged(snap: Snapshot) -> Mapping[str, JobInfo]:
    """The jobs ``snap`` keeps unchanged from the last snapshot (none: the first)."""
    return {} if snap.delta is None else snap.delta.unchanged_jobs
