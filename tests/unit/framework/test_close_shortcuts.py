"""The session close's shortcuts for alike groups decide exactly as building each.

They are switched off here, each through its own seam, and the close's outcome (the
PodGroup statuses written, the events) compared with them on, on random clusters with
lines of alike gangs, some running, some waiting, some told something before: the
statuses built once for groups alike (``job_status.pod_group_status``'s ``built``) and
the conditions made once for the same words (``podgroup_status.condition``, as the gang
plugin calls it), gang's verdict on a group short of pods made once per count, and its
words and event for a group not admitted made once (``gang.not_admitted_words``,
``gang.not_admitted_event``).
"""

import random

import pytest

from builders import Cluster, run_actions, vec
from kbatch.api.podgroup import ConditionType, PodGroupPhase, PodGroupStatus
from kbatch.operators.scheduler.core.framework import job_status, outcome
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.outcome import Event
from kbatch.operators.scheduler.core.framework.podgroup_status import condition
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.operators.scheduler.core.plugins import gang

CONF = 'actions: "enqueue, reclaim, allocate, backfill, preempt"\n' + (
    "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: conformance\n"
    "- plugins:\n  - name: drf\n  - name: predicates\n  - name: proportion\n"
)
TOLD = [
    condition(ConditionType.UNSCHEDULABLE, True, "NotEnoughResources", "2/2 tasks in gang"),
    condition(ConditionType.SCHEDULED, True, "Scheduled", "2/2 tasks in gang scheduled"),
]


def _alike_gangs(seed: int) -> Cluster:
    """Two queues; gangs of a few shapes, running (some partly) or waiting, each with a
    status from before or none: many groups alike in every respect."""
    rng = random.Random(seed)
    cluster = Cluster().node("n1", cpu=8).node("n2", cpu=6)
    cluster.queue("a").queue("b", weight=2)
    free = {"n1": 8, "n2": 6}
    for j in range(rng.randint(10, 40)):
        size = rng.choice([1, 2, 2])
        job = cluster.job(f"j{j}", queue=rng.choice(["a", "b"]), min_member=size)
        running = rng.random() < 0.4
        for _ in range(size):
            roomy = [n for n in free if free[n] >= 1]
            if running and roomy:
                node = rng.choice(roomy)
                free[node] -= 1
                job.tasks(1, cpu=1, status=TaskStatus.RUNNING, node=node)
            else:
                job.tasks(1, cpu=rng.choice([1, 1, 4]))
        if rng.random() < 0.5:
            told = tuple(rng.sample(TOLD, rng.randint(1, 2)))
            told = tuple(
                c.model_copy(update={"last_transition_time": "1970-01-01T00:00:01Z"})
                for c in sorted(told, key=lambda c: c.type.value)
            )
            info = job.job
            info.conditions = told
            info.old_status = PodGroupStatus(phase=info.phase, conditions=told)
    for j in range(rng.randint(1, 6)):  # short of pods: none yet (held until admitted), or few
        pods = rng.choice([0, 0, 1])
        short = cluster.job(f"short{j}", queue="a", min_member=pods + rng.choice([1, 2]))
        short.job.phase = PodGroupPhase.PENDING
        short.tasks(pods, cpu=1)
    for j in range(rng.randint(2, 8)):  # no pods yet, a minimum the cluster cannot admit
        cluster.job(
            f"big{j}",
            queue=rng.choice(["a", "b"]),
            min_member=rng.choice([1, 2]),
            phase=PodGroupPhase.PENDING,
            min_resources=vec(rng.choice([15, 30])),
        )
    return cluster


def _closed(seed: int, shortcuts: Shortcuts = ALL) -> tuple[object, ...]:
    sent = run_actions(_alike_gangs(seed).open(CONF, shortcuts=shortcuts))
    return sent.pod_groups, sent.recorded, sent.queues


@pytest.mark.parametrize("seed", range(30))
def test_statuses_built_once_for_alike_groups_are_those_built_for_each(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = _closed(seed)
    each = job_status.pod_group_status
    monkeypatch.setattr(
        job_status,
        "pod_group_status",
        lambda job, session, built=None, told=None: each(job, session, None, told),
    )
    assert _closed(seed) == shared
    groups = shared[0]
    assert any(s.phase is PodGroupPhase.RUNNING for s in groups.values())  # type: ignore[attr-defined]
    assert any(s.conditions for s in groups.values())  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(30))
def test_conditions_worded_once_are_those_worded_each_time(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = _closed(seed)
    monkeypatch.setattr(gang, "condition", condition.__wrapped__)  # one made per call
    assert _closed(seed) == shared


@pytest.mark.parametrize("seed", range(30))
def test_verdicts_on_short_gangs_made_once_are_those_made_each_time(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = _closed(seed)
    monkeypatch.setattr(gang, "too_few", gang.too_few.__wrapped__)  # one made per job
    assert _closed(seed) == shared
    assert any("tasks in gang: minMember" in str(s) for s in shared[0].values())  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", range(30))
@pytest.mark.parametrize("made_once", ["not_admitted_words", "not_admitted_event"])
def test_words_for_groups_not_admitted_made_once_are_those_made_each_time(
    seed: int, made_once: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = _closed(seed)
    monkeypatch.setattr(gang, made_once, getattr(gang, made_once).__wrapped__)  # one per group
    assert _closed(seed) == shared


def test_groups_not_admitted_are_told_why() -> None:
    told = [_closed(seed)[1] for seed in range(30)]
    assert any(
        ref.kind == "PodGroup" and "not admitted" in message
        for recorded in told
        for ref, _, _, message in recorded  # type: ignore[attr-defined]
    )


@pytest.mark.parametrize("seed", range(30))
def test_queue_statuses_built_once_are_those_built_each_session(seed: int) -> None:
    kept = _closed(seed)
    assert kept[2]  # the queues' statuses are written
    assert _closed(seed, Shortcuts().without("queue_statuses")) == kept


def test_a_queue_status_built_once_is_shared_and_known_unchanged() -> None:
    session = Cluster().node("n1", cpu=8).queue("a").open(CONF)
    queue, dims = session.queues["a"], session.dims
    queue.deserved, queue.allocated = vec(2.5, 0.3), vec(1.25, 0.1)
    queue.request = vec(3.0, 0.7)
    first = job_status.queue_status(queue, dims, [])
    assert job_status.queue_status(queue, dims, []) is first
    assert first.allocated["cpu"] == "1250m" and first.deserved["cpu"] == "2500m"
    queue.old_status = first
    assert not job_status._worth_writing(first, queue)
    queue.allocated = vec(1.5, 0.1)  # one job more: rendered anew
    second = job_status.queue_status(queue, dims, [])
    assert second is not first and second.allocated["cpu"] != first.allocated["cpu"]
    assert job_status._worth_writing(second, queue)
    assert second == job_status._built_each(
        (
            dims,
            job_status._bits(queue.deserved),
            job_status._bits(queue.allocated),
            job_status._bits(queue.request),
            0,
            0,
            0,
            None,
            None,
        )
    )


def _pod_events(sent: object) -> dict[str, Event]:
    events = sent.outcome.events  # type: ignore[attr-defined]
    return {e.ref.name: e for e in events if e.reason == outcome.FAILED_SCHEDULING}


def test_a_pod_told_the_same_again_is_given_the_same_event() -> None:
    """``outcome.failed_scheduling``: a waiting pod told why in the same words as at the
    last session is given the event it was given then; in other words, a new one."""
    cluster = Cluster().node("n1", cpu=2)
    cluster.queue("a")
    big = cluster.job("big", queue="a", min_member=2).tasks(2, cpu=4)  # fits nowhere
    cluster.job("fits", queue="a", min_member=1).tasks(1, cpu=1)
    first = _pod_events(run_actions(cluster.open(CONF)))
    again = _pod_events(run_actions(cluster.open(CONF)))
    assert set(first) == {"big-0", "big-1"} and first == again
    assert all(again[name] is first[name] for name in first)
    task = next(iter(big.job.tasks.values()))  # told otherwise now
    reworded = outcome.failed_scheduling(task, "other words")
    assert reworded is not first[task.name] and reworded.message == "other words"
    assert (reworded.ref, reworded.type) == (first[task.name].ref, first[task.name].type)


@pytest.mark.parametrize("seed", range(10))
def test_a_queue_status_counts_its_groups_by_the_phase_published(seed: int) -> None:
    session = _alike_gangs(seed).open(CONF)
    sent = run_actions(session)
    for name, status in sent.queues.items():
        phases = [
            job.phase for job in session.jobs.values() if job.queue == name and job.has_pod_group
        ]
        counted = (status.pending, status.inqueue, status.running)
        expected = tuple(
            phases.count(phase)
            for phase in (PodGroupPhase.PENDING, PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING)
        )
        assert counted == expected, name
    statuses = [(s.pending, s.inqueue, s.running) for s in sent.queues.values()]
    assert any(s[0] for s in statuses) and any(s[2] for s in statuses)
