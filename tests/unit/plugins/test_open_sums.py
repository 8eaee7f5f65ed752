"""The drf plugin's rows and shares must be the ones the job-by-job loop gave, to the
bit: added up at session open for all jobs at once (the long way, ``lazy=False``), or
worked out for a job when first needed (``Shortcuts.drf_shares_when_needed``: a
simulated second's session asks few jobs), whatever changed in the session before.
(proportion's sums: test_proportion_sums.py.)"""

import random

import numpy as np
import pytest

from builders import Cluster, vec
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.info import PLACED_STATUSES, TaskStatus
from kbatch.operators.scheduler.core.framework.resources import share, shareable, shares
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts
from kbatch.operators.scheduler.core.framework.statement import Statement
from kbatch.operators.scheduler.core.plugins import drf

CONF = (
    'actions: "enqueue, allocate"\n'
    "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n  - name: drf\n  - name: proportion\n"
)
STATUSES = [TaskStatus.PENDING, TaskStatus.RUNNING, TaskStatus.BOUND, TaskStatus.SUCCEEDED]


def _cluster(seed: int) -> Cluster:
    """Jobs of odd-sized tasks in all states (sums that round), some without pods."""
    rng = random.Random(seed)
    cluster = Cluster().node("n1", cpu=64, memory=512).node("n2", cpu=32, memory=256)
    for name in ("a", "b", "c"):
        cluster.queue(name, weight=rng.randrange(1, 4))
    for i in range(40):
        min_resources = vec(rng.choice([0.1, 0.7, 3.3]), 1.1) if rng.random() < 0.6 else None
        job = cluster.job(
            f"j{i}",
            queue=rng.choice(["a", "b", "c", "gone"]),
            phase=rng.choice(list(PodGroupPhase)),
            min_resources=min_resources,
        )
        for _ in range(rng.randrange(0, 4)):
            status = rng.choice(STATUSES)
            node = rng.choice(["n1", "n2"]) if status is not TaskStatus.PENDING else None
            job.tasks(1, cpu=rng.choice([0.1, 0.2, 0.3, 1.7]), memory=0.3, status=status, node=node)
    return cluster


def _bits(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype=float).tobytes()


@pytest.mark.parametrize("seed", range(6))
def test_drf_shares_as_one_job_at_a_time(seed: int) -> None:
    session = _cluster(seed).open(CONF)
    plugin = drf._Shares(session, lazy=False)
    mask = shareable(session.dims)
    for uid, job in session.jobs.items():
        assert _bits(plugin.allocated[uid]) == _bits(job.allocated * mask)
        assert plugin.share[uid] == share(job.allocated * mask, plugin.total)
        assert str(plugin.share[uid]) == str(share(job.allocated * mask, plugin.total))


def test_shares_row_by_row_with_empty_totals_and_signed_zeros() -> None:
    rng = np.random.default_rng(5)
    allocated = rng.choice([0.0, -0.0, 1e-7, 2e-6, 0.3, 5.0, -1e-9], size=(200, 4))
    total = np.array([10.0, 0.0, 1e-7, 3.0])
    got = shares(allocated, total)
    want = [share(row, total) for row in allocated]
    assert [str(x) for x in got] == [str(x) for x in want]
    assert shares(np.zeros((0, 4)), total) == []
    assert shares(np.zeros((3, 0)), np.zeros(0)) == [0.0, 0.0, 0.0]


# What a session does to tasks, and how often: a statement's allocate, pipeline and evict
# (kept or rolled back), and moves the actions make only by steps (a pipelined task
# allocated: its job's allocation changes with no event).
MOVES = [TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.RELEASING]


def _both(session: Session) -> tuple[drf._Shares, drf._Shares]:
    """The lazy plugin and the long way, both told of the session's changes as
    on_session_open tells them."""
    lazy, long = drf._Shares(session, lazy=True), drf._Shares(session, lazy=False)
    session.add_event_handler(changing=lazy.changing)
    session.add_event_handler(
        allocate=lambda task: long.changed(task, +1.0),
        deallocate=lambda task: long.changed(task, -1.0),
    )
    return lazy, long


def _change(rng: random.Random, session: Session, statement: Statement) -> None:
    tasks = [task for job in session.jobs.values() for task in job.tasks.values()]
    task = rng.choice(tasks)
    node = rng.randrange(len(session.nodes.names))
    roll = rng.random()
    if roll < 0.25 and task.status is TaskStatus.PENDING:
        statement.place(task, node, pipelined=rng.random() < 0.4)
    elif roll < 0.4 and task.status in PLACED_STATUSES:
        statement.evict(task, "test")
    elif roll < 0.5:
        statement.rollback(rng.randrange(statement.mark() + 1))
    elif roll < 0.6:
        statement.commit()  # allocated tasks dispatched: Binding (no event, same sum)
    else:
        session.set_status(task, rng.choice(MOVES), node)


def _compare(rng: random.Random, session: Session, lazy: drf._Shares, long: drf._Shares) -> None:
    """Ask some jobs' keys and rows and a preemption's victims of both (asking is a job's
    first need for the lazy one: when it comes varies)."""
    for job in session.jobs.values():
        if rng.random() < 0.15:
            assert np.float64(lazy.key(job)).tobytes() == np.float64(long.key(job)).tobytes()
        if rng.random() < 0.05:
            assert _bits(lazy.row(job.uid)) == _bits(long.allocated[job.uid])
    if rng.random() < 0.3:
        tasks = [task for job in session.jobs.values() for task in job.tasks.values()]
        preemptor = rng.choice(tasks)
        candidates = rng.sample(tasks, rng.randrange(len(tasks)))
        want = long.victims(preemptor, candidates)
        assert lazy.victims(preemptor, candidates) == want


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("all_at_once_after", [drf.ALL_AT_ONCE_AFTER, 1, 5])
def test_drf_lazy_rows_and_keys_as_the_long_way(
    seed: int, all_at_once_after: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Also with every row taken at once after the first or fifth share asked.)"""
    monkeypatch.setattr(drf, "ALL_AT_ONCE_AFTER", all_at_once_after)
    session = _cluster(seed).open(CONF)
    lazy, long = _both(session)
    rng = random.Random(seed)
    statement = Statement(session)
    for _ in range(120):
        _change(rng, session, statement)
        _compare(rng, session, lazy, long)
    for uid, job in session.jobs.items():  # every job at the end, first needed or not
        assert _bits(lazy.row(uid)) == _bits(long.allocated[uid])
        assert np.float64(lazy.key(job)).tobytes() == np.float64(long.key(job)).tobytes()


def test_drf_lazy_open_works_out_no_job() -> None:
    session = _cluster(0).open(CONF)
    plugin = drf._Shares(session)
    assert plugin.allocated == {} and plugin.share == {}
    job = next(job for job in session.jobs.values() if job.allocated.any())
    plugin.key(job)
    assert list(plugin.allocated) == [job.uid] and list(plugin.share) == [job.uid]


def test_drf_lazy_share_worked_out_once_per_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """A gang placed task by task asks its job's share after each: worked out again only
    when its row changed since."""
    session = _cluster(1).open(CONF)
    lazy, _ = _both(session)
    calls = []
    monkeypatch.setattr(drf, "share", lambda row, total: calls.append(1) or share(row, total))
    job = next(job for job in session.jobs.values() if job.count(TaskStatus.PENDING))
    lazy.key(job), lazy.key(job)
    assert len(calls) == 1
    session.set_status(job.tasks_with(TaskStatus.PENDING)[0], TaskStatus.ALLOCATED, 0)
    lazy.key(job), lazy.key(job)
    assert len(calls) == 2


def test_drf_plugin_lazy_or_not_by_its_switch() -> None:
    """on_session_open's plugin is the lazy one, told of changes before they happen;
    switched off, the long way, told by the events."""
    for lazy in (True, False):
        session = _cluster(2).open(CONF, shortcuts=Shortcuts(drf_shares_when_needed=lazy))
        plugin = next(r.fn.__self__ for r in session._fns["JobOrder"] if r.plugin.name == "drf")
        assert (plugin.allocated == {}) is lazy
        assert bool(session._changing) is lazy  # the long way: told by the events only
        job = next(job for job in session.jobs.values() if job.count(TaskStatus.PENDING))
        before = plugin.key(job)
        task = job.tasks_with(TaskStatus.PENDING)[0]
        session.set_status(task, TaskStatus.PIPELINED, 0)
        assert plugin.key(job) == share(
            (job.allocated + task.request) * shareable(session.dims), plugin.total
        )
        assert plugin.key(job) > before


@pytest.mark.parametrize("first", [True, False])
def test_drf_keys_a_job_without_tasks_without_a_row(first: bool) -> None:
    """A job that holds nothing (no tasks: a backlog's group not yet admitted) is keyed
    0.0, share() of its row of zeros, without taking a row: enqueue orders the whole line
    every session (``Shortcuts.drf_holding_nothing_first``; off: its row taken)."""
    shortcuts = Shortcuts(drf_holding_nothing_first=first)
    session = _cluster(3).open(CONF, shortcuts=shortcuts)
    idle = [job for job in session.jobs.values() if not job.tasks]
    assert idle
    plugin = drf._Shares(session)
    zero = share(np.zeros(len(plugin.mask)) * plugin.mask, plugin.total)
    assert all(str(plugin.key(job)) == str(zero) for job in idle)
    rows = set() if first else {job.uid for job in idle}
    assert set(plugin.allocated) == rows


def test_drf_takes_every_row_at_once_after_many_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drf, "ALL_AT_ONCE_AFTER", 3)
    session = _cluster(4).open(CONF)
    plugin = drf._Shares(session)
    holding = [job for job in session.jobs.values() if job.tasks]
    for job in holding[:2]:
        plugin.key(job)
    assert len(plugin.allocated) == 2
    plugin.key(holding[2])
    assert set(plugin.allocated) == set(session.jobs)
    mask = shareable(session.dims)
    for uid, job in session.jobs.items():
        assert _bits(plugin.allocated[uid]) == _bits(job.allocated * mask)
        assert str(plugin.share[uid]) == str(share(job.allocated * mask, plugin.total))
