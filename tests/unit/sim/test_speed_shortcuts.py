"""The simulator-speed shortcuts (issue 12) decide exactly as the long way does.

Each shortcut is switched off through its own seam and the outcome compared with it
on: the enqueue action's remembered refusals and its queue kept first through a line of
refusals, the session close's unchanged PodGroup statuses, and the event filter's
one-look-up check.
"""

import random

import pytest

from builders import Cluster, run_actions, vec
from kbatch.api.podgroup import (
    ConditionType,
    PodGroupCondition,
    PodGroupPhase,
    PodGroupStatus,
)
from kbatch.operators.scheduler.core.actions import enqueue
from kbatch.operators.scheduler.core.framework import job_status
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.outcome import Event, EventFilter, ObjectRef
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

ENQUEUE_CONF = (
    'actions: "enqueue, allocate, preempt"\n'
    "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: proportion\n"
)


def _backlog(seed: int, admitted: frozenset[str] | None = None) -> Cluster:
    """Queues with long lines of alike pending groups (a few shapes, a few priorities),
    some room, some of it held by running jobs, one queue capped and one closed;
    ``admitted``: the groups among them already Inqueue, every group then with
    minResources (else one in ten has none)."""
    rng = random.Random(seed)
    cluster = Cluster().node("n1", cpu=16).node("n2", cpu=8)
    cluster.queue("a").queue("b", weight=2).queue("capped", capability=vec(6, 1000, 1000))
    cluster.queue("shut", open=False)
    cluster.job("hog", queue="a").tasks(6, cpu=1, status=TaskStatus.RUNNING, node="n1")
    for i in range(60):
        queue = rng.choice(["a", "b", "capped", "shut"])
        cpu = rng.choice([1, 2, 4, 8])
        cluster.job(
            f"j{i}",
            queue=queue,
            priority=rng.choice([0, 0, 10]),
            phase=PodGroupPhase.INQUEUE if f"j{i}" in (admitted or ()) else PodGroupPhase.PENDING,
            min_resources=vec(cpu) if rng.random() < 0.9 or admitted is not None else None,
            created=float(rng.randrange(5)),
        ).tasks(1, cpu=cpu)
    return cluster


def _enqueued(
    seed: int, admitted: frozenset[str] | None = None, shortcuts: Shortcuts = ALL
) -> tuple[object, dict[str, tuple[str | None, bool]]]:
    session = _backlog(seed, admitted).open(ENQUEUE_CONF, shortcuts=shortcuts)
    sent = run_actions(session, "enqueue")
    notes = {
        uid: (session.waiting_reason(job), session.held_by_queue(job))
        for uid, job in session.jobs.items()
    }
    return sent.pod_groups, notes


@pytest.mark.parametrize("seed", range(8))
def test_a_queue_kept_first_through_its_refusals_admits_and_words_as_the_heap_does(
    seed: int,
) -> None:
    kept_first = _enqueued(seed)
    a_turn_each = Shortcuts().without("refused_queue_stays_first")  # a heap turn each
    assert _enqueued(seed, shortcuts=a_turn_each) == kept_first
    groups, notes = kept_first
    assert any(s.phase is PodGroupPhase.INQUEUE for s in groups.values())  # type: ignore[attr-defined]
    assert sum(why is not None for why, _ in notes.values()) > 10  # long lines refused


@pytest.mark.parametrize("seed", range(8))
def test_remembered_refusals_admit_and_word_as_asking_every_job(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    remembered = _enqueued(seed)
    monkeypatch.setattr(enqueue, "_refusal_key", lambda job: None)  # ask for every job
    asked = _enqueued(seed)
    assert remembered == asked
    groups, notes = remembered
    assert any(s.phase is PodGroupPhase.INQUEUE for s in groups.values())  # type: ignore[attr-defined]
    assert any(why is not None for why, _ in notes.values())


@pytest.mark.parametrize("seed", range(8))
def test_a_line_refused_at_once_is_refused_and_worded_as_one_taken_in_order(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next session on a backlog, once the groups that fit were admitted: nothing
    more fits, and the groups are refused kind by kind, not taken in line (the room
    lower-priority jobs hold is not promised again: ``priority.PreemptibleRoom``)."""
    groups, _ = _enqueued(seed, frozenset())
    admitted = frozenset(
        key.split("/")[1]
        for key, status in groups.items()  # type: ignore[attr-defined]
        if status.phase is PodGroupPhase.INQUEUE
    )
    assert admitted
    real_lines = enqueue._lines
    monkeypatch.setattr(enqueue, "_lines", None)  # not put in line: refused at once
    at_once = _enqueued(seed, admitted)
    monkeypatch.setattr(enqueue, "_lines", real_lines)
    in_line = Shortcuts().without("refuse_alike_at_once")
    assert _enqueued(seed, admitted, in_line) == at_once
    groups, notes = at_once
    inqueue = {k for k, s in groups.items() if s.phase is PodGroupPhase.INQUEUE}  # type: ignore[attr-defined]
    assert inqueue == {f"default/{name}" for name in admitted}  # (none more)
    assert sum(why is not None for why, _ in notes.values()) > 10


@pytest.mark.parametrize("seed", range(8))
def test_a_line_that_admits_is_taken_in_order(seed: int) -> None:
    first = _enqueued(seed)
    assert _enqueued(seed, shortcuts=Shortcuts().without("refuse_alike_at_once")) == first


# --------------------------------------------------------------------------- statuses
CONDITIONS = [
    PodGroupCondition(type=kind, status=status, reason=reason, message=message)
    for kind in ConditionType
    for status in ("True", "False")
    for reason, message in (("Waiting", "1/2 tasks"), ("Waiting", "2/2 tasks"))
]


class _Session:
    """What ``pod_group_status`` reads of a session."""

    def __init__(self, new: list[PodGroupCondition]) -> None:
        self.new, self.now, self.uid = new, 1234.0, "session-2"

    def conditions_of(self, job: JobInfo) -> list[PodGroupCondition]:
        return self.new


def _stamped(cond: PodGroupCondition, rng: random.Random) -> PodGroupCondition:
    when = rng.choice(["1970-01-01T00:00:10Z", "1970-01-01T00:01:00Z"])
    return cond.model_copy(update={"last_transition_time": when, "transition_id": "s1"})


def _case(rng: random.Random) -> tuple[JobInfo, _Session]:
    kinds = rng.sample(list(ConditionType), rng.randrange(3))
    old_conditions = [
        _stamped(rng.choice([c for c in CONDITIONS if c.type is kind]), rng) for kind in kinds
    ]
    if rng.random() < 0.8:
        old_conditions.sort(key=lambda c: c.type.value)
    counts = [0] * len(TaskStatus)
    for _ in range(rng.randrange(5)):
        counts[rng.choice(list(TaskStatus))] += 1
    old = PodGroupStatus(
        phase=rng.choice(list(PodGroupPhase)),
        conditions=tuple(old_conditions),
        running=counts[TaskStatus.RUNNING] if rng.random() < 0.8 else 7,
        succeeded=counts[TaskStatus.SUCCEEDED],
        failed=counts[TaskStatus.FAILED],
    )
    job = JobInfo(
        uid="default/j", namespace="default", name="j", queue="q",
        min_member=rng.randrange(1, 4), created=0.0, dims_len=1,
        phase=old.phase if rng.random() < 0.8 else PodGroupPhase.INQUEUE,
        conditions=old.conditions, old_status=old,
    )  # fmt: skip
    job.counts = counts
    if rng.random() < 0.7:  # mostly what the group already says, as a waiting group is told
        new = [c.model_copy(update={"last_transition_time": None}) for c in old_conditions]
    else:
        new = rng.sample(CONDITIONS, rng.randrange(3))
    return job, _Session(new)


def test_an_unchanged_status_is_the_one_the_rules_would_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(12)
    cases = [_case(rng) for _ in range(3000)]
    short = [job_status.pod_group_status(job, session) for job, session in cases]  # type: ignore[arg-type]
    monkeypatch.setattr(job_status, "_unchanged_status", lambda job, new: None)
    built = [job_status.pod_group_status(job, session) for job, session in cases]  # type: ignore[arg-type]
    assert short == built
    taken = sum(s is job.old_status for s, (job, _) in zip(short, cases, strict=True))
    assert 300 < taken < len(cases) - 300  # both ways were taken often


# --------------------------------------------------------------------------- events
def test_the_event_filter_check_is_fresh_then_may_record_again_at() -> None:
    rng = random.Random(3)
    one, two = EventFilter(limit=40), EventFilter(limit=40)
    now = 0.0
    for _ in range(5000):
        now += rng.choice([0.0, 1.0, 50.0])
        identity = (rng.randrange(30), "uid")
        event = Event(ObjectRef("Pod", "ns", "p"), "Normal", "R", rng.choice("ab"))
        fresh = one.fresh(identity, event, now)
        again = one.may_record_again_at(identity, event)
        assert two.check(identity, event.type, event.reason, event.message, now) == (
            fresh,
            again,
        )


def test_the_event_filter_clears_old_events_once_per_doubling() -> None:
    """Above its limit with every event still within the window, the filter does not
    rebuild its memory on every new event (that was quadratic in a burst): it rebuilds
    once each time the remembered events double, forgets only events out of the window,
    and still drops every repeat within it."""
    events = EventFilter(repeat_seconds=100.0, limit=10)
    rebuilds, memory = 0, events._recorded
    for n in range(1000):
        event = Event(ObjectRef("Pod", "ns", f"p{n}"), "Normal", "R", "m")
        assert events.fresh(n, event, now=float(n % 50))
        if events._recorded is not memory:
            rebuilds, memory = rebuilds + 1, events._recorded
    assert rebuilds <= 7  # 10, 20, 40, ... 640: one per doubling
    for n in range(1000):  # all still within the window: each a repeat
        event = Event(ObjectRef("Pod", "ns", f"p{n}"), "Normal", "R", "m")
        assert not events.fresh(n, event, now=60.0)
    late = Event(ObjectRef("Pod", "ns", "late"), "Normal", "R", "m")
    for n in range(3000):  # far later: the old ones are cleared at the next rebuild
        events.fresh(("late", n), late, now=1000.0)
    assert len(events._recorded) == 3000  # every late one, none of the old
    assert all(t == 1000.0 for t in events._recorded.values())
