"""The tier combination rules of DESIGN §3, on functions registered by stand-in plugins."""

from collections.abc import Callable

import numpy as np
import pytest

from builders import Cluster
from kbatch.config import PluginOption, SchedulerConf, Tier
from kbatch.operators.scheduler.core.framework.info import TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.tiers import Invalid

Registrar = Callable[[Session], None]


def session_with(*tiers: list[tuple[str, Registrar, dict[str, bool]]]) -> tuple[Session, Cluster]:
    """A session whose tiers hold stand-in plugins: (name, register(session), switches)."""
    cluster = Cluster().node("n1").node("n2")
    cluster.job("a", created=1.0).tasks(1)
    cluster.job("b", created=2.0).tasks(1)
    conf = SchedulerConf(
        actions=("allocate",),
        tiers=tuple(
            Tier(plugins=tuple(PluginOption(name=name, **switches) for name, _, switches in tier))
            for tier in tiers
        ),
    )
    session = Session(cluster.snapshot(), conf, now=0.0, uid="s")
    for t, tier in enumerate(tiers):
        for (_, register, _), option in zip(tier, conf.tiers[t].plugins, strict=True):
            session.opening(option, t)
            register(session)
    session.compile()
    return session, cluster


def jobs(session: Session) -> tuple:
    return session.jobs["default/a"], session.jobs["default/b"]


def test_first_plugin_that_tells_jobs_apart_wins() -> None:
    prefer_b = lambda s: s.add_job_order_fn(lambda job: 0 if job.name == "b" else 1)  # noqa: E731
    tie = lambda s: s.add_job_order_fn(lambda job: 0)  # noqa: E731
    prefer_a = lambda s: s.add_job_order_fn(lambda job: 0 if job.name == "a" else 1)  # noqa: E731
    session, _ = session_with([("tie", tie, {}), ("b", prefer_b, {})], [("a", prefer_a, {})])
    a, b = jobs(session)
    assert sorted([a, b], key=session.job_order_key) == [b, a]


def test_full_tie_falls_to_creation_time_then_uid() -> None:
    tie = lambda s: s.add_job_order_fn(lambda job: 0)  # noqa: E731
    session, _ = session_with([("tie", tie, {})])
    a, b = jobs(session)
    assert sorted([b, a], key=session.job_order_key) == [a, b]
    b.created = a.created
    assert sorted([b, a], key=session.job_order_key) == [a, b]  # uid "default/a" < "default/b"


def test_a_full_tie_of_tasks_falls_to_the_pods_name_not_its_uid() -> None:
    """A cluster's uids are random UUIDs: broken by name, a tie is broken alike by the
    simulator and a cluster (kube-batch's allocate test binds p1 before p2)."""
    tie = lambda s: s.add_task_order_fn(lambda task: 0)  # noqa: E731
    session, _ = session_with([("tie", tie, {})])
    a, b = (next(iter(job.tasks.values())) for job in jobs(session))
    b.created = a.created
    a.uid, b.uid = "ffff", "0000"
    assert sorted([b, a], key=session.task_order_key) == [a, b]


@pytest.mark.parametrize("switch", [{"enableJobOrder": False}, {"disableJobOrder": True}])
def test_switched_off_order_function_is_not_asked(switch: dict[str, bool]) -> None:
    prefer_b = lambda s: s.add_job_order_fn(lambda job: 0 if job.name == "b" else 1)  # noqa: E731
    session, _ = session_with([("b", prefer_b, switch)])
    a, b = jobs(session)
    assert sorted([b, a], key=session.job_order_key) == [a, b]


def test_every_predicate_of_every_tier_must_pass_and_reasons_are_kept() -> None:
    def rejects(name: str, node: int) -> Registrar:
        def register(s: Session) -> None:
            s.add_predicate_fn(lambda task, idx: [(f"no {name}", idx == node)])

        return register

    session, _ = session_with([("x", rejects("x", 0), {})], [("y", rejects("y", 1), {})])
    task = next(iter(jobs(session)[0].tasks.values()))
    ok, failures = session.predicate(task, session.nodes.all)
    assert ok.tolist() == [False, False]
    assert [reason for reason, _ in failures] == ["no x", "no y"]


def test_switched_off_predicate_is_skipped() -> None:
    reject_all = lambda s: s.add_predicate_fn(lambda task, idx: [("no", np.ones(len(idx), bool))])  # noqa: E731
    session, _ = session_with([("x", reject_all, {"enablePredicate": False})])
    task = next(iter(jobs(session)[0].tasks.values()))
    assert session.predicate(task, session.nodes.all)[0].all()


def test_node_scores_of_all_plugins_add_up() -> None:
    first = lambda s: s.add_node_order_fn(lambda task, idx: np.array([1.0, 2.0])[idx])  # noqa: E731
    second = lambda s: s.add_node_order_fn(lambda task, idx: np.array([5.0, 0.0])[idx])  # noqa: E731
    session, _ = session_with([("f", first, {})], [("s", second, {})])
    task = next(iter(jobs(session)[0].tasks.values()))
    assert session.node_scores(task, session.nodes.all).tolist() == [6.0, 2.0]


def victims_of(names: set[str]) -> Registrar:
    def register(s: Session) -> None:
        s.add_preemptable_fn(lambda p, cands: [t for t in cands if t.name in names])

    return register


def candidates(session: Session) -> tuple[TaskInfo, list[TaskInfo]]:
    a, b = jobs(session)
    preemptor = next(iter(a.tasks.values()))
    return preemptor, [next(iter(b.tasks.values())), preemptor]


@pytest.mark.parametrize(
    ("tiers", "expected"),
    [
        # the first tier with the function decides by intersection
        ([[("p", victims_of({"b-0", "a-0"}), {}), ("q", victims_of({"b-0"}), {})]], ["b-0"]),
        # empty intersection: no victims, and the later tier is NOT asked (kube-batch fell through)
        (
            [
                [("p", victims_of({"a-0"}), {}), ("q", victims_of({"b-0"}), {})],
                [("r", victims_of({"b-0"}), {})],
            ],
            [],
        ),
        # a tier without the function passes the question on
        ([[("none", lambda s: None, {})], [("r", victims_of({"b-0"}), {})]], ["b-0"]),
        # switched off counts as not having it
        (
            [
                [("p", victims_of(set()), {"enablePreemptable": False})],
                [("r", victims_of({"b-0"}), {})],
            ],
            ["b-0"],
        ),
        # nobody has it: nobody is a victim
        ([[("none", lambda s: None, {})]], []),
    ],
)
def test_victims_come_from_the_first_tier_that_has_the_function(
    tiers: list, expected: list[str]
) -> None:
    session, _ = session_with(*tiers)
    preemptor, cands = candidates(session)
    assert [t.name for t in session.preemptable(preemptor, cands)] == expected


def test_each_plugin_of_a_tier_chooses_among_what_the_ones_before_it_chose() -> None:
    """Two plugins that each want one victim, either of two equal ones, but not the
    same one when asked alone: choosing in turn keeps one (intersecting kept none)."""

    def last_of_offered(s: Session) -> None:
        s.add_preemptable_fn(lambda p, cands: cands[-1:])

    def first_of_offered(s: Session) -> None:
        s.add_preemptable_fn(lambda p, cands: cands[:1])

    session, _ = session_with([("last", last_of_offered, {}), ("first", first_of_offered, {})])
    preemptor, cands = candidates(session)
    assert [t.name for t in session.preemptable(preemptor, cands)] == ["a-0"]


def test_queue_share_questions_need_a_plugin_that_answers() -> None:
    """Reclaim asks the plugins that know shares; with none, no queue takes back and none
    gives back. With several, all must agree; the highest share counts."""

    def shares(take: bool, lose: bool, share: float) -> Registrar:
        def register(s: Session) -> None:
            s.add_reclaimer_fn(lambda queue, task: take)
            s.add_victim_queue_fn(lambda queue, task: lose)
            s.add_queue_share_fn(lambda queue: share)

        return register

    none, _ = session_with([("none", lambda s: None, {})])
    queue, task = none.queues["default"], next(iter(jobs(none)[0].tasks.values()))
    assert not none.may_reclaim_for(queue, task) and not none.may_lose(queue, task)
    assert none.queue_share(queue) == 0.0
    both, _ = session_with(
        [("x", shares(True, True, 0.5), {})], [("y", shares(True, False, 2.0), {})]
    )
    queue, task = both.queues["default"], next(iter(jobs(both)[0].tasks.values()))
    assert both.may_reclaim_for(queue, task) and not both.may_lose(queue, task)
    assert both.queue_share(queue) == 2.0


def test_overused_if_any_ready_only_if_all_valid_first_rejection() -> None:
    def register(overused: bool, ready: bool, invalid: str | None) -> Registrar:
        def reg(s: Session) -> None:
            s.add_overused_fn(lambda q: overused)
            s.add_job_ready_fn(lambda j: ready)
            s.add_job_pipelined_fn(lambda j: ready)
            s.add_job_valid_fn(lambda j: Invalid(invalid, invalid) if invalid else None)

        return reg

    session, _ = session_with(
        [("x", register(False, True, None), {}), ("y", register(True, False, "Y"), {})],
        [("z", register(False, True, "Z"), {})],
    )
    a, _ = jobs(session)
    assert session.overused(session.queues["default"])
    assert not session.job_ready(a)
    assert not session.job_pipelined(a)
    assert session.job_valid(a) == Invalid("Y", "Y")


def test_event_handlers_of_every_plugin_see_allocations() -> None:
    seen: list[tuple[str, str]] = []

    def register(name: str) -> Registrar:
        def reg(s: Session) -> None:
            s.add_event_handler(
                allocate=lambda t: seen.append((name, "+" + t.name)),
                deallocate=lambda t: seen.append((name, "-" + t.name)),
            )

        return reg

    session, _ = session_with([("x", register("x"), {})], [("y", register("y"), {})])
    from kbatch.operators.scheduler.core.framework.statement import Statement

    task = next(iter(jobs(session)[0].tasks.values()))
    statement = Statement(session)
    statement.allocate(task, 0)
    statement.discard()
    assert seen == [("x", "+a-0"), ("y", "+a-0"), ("x", "-a-0"), ("y", "-a-0")]


@pytest.mark.parametrize("count", range(6))
def test_order_keys_called_in_turn_are_the_keys_in_order(count: int) -> None:
    """``_calling`` (one function calling the plugins' key functions in turn, for the
    usual few) gives what asking each in order gives, for any number of them."""
    from kbatch.operators.scheduler.core.framework.tiers import _calling

    fns = [lambda x, i=i: (i, x * i) for i in range(count)]
    for item in (0, 3, 7):
        assert _calling(fns)(item) == tuple(fn(item) for fn in fns)


def test_the_victim_filter_of_two_plugins_keeps_what_both_keep() -> None:
    """The default tiers' deciding tier has two per-task tests (priority's and
    conformance's): the filter made of them keeps a task when both do."""
    cluster = Cluster().node("n1", cpu=8)
    for name, priority in (("low", 1), ("mid", 5), ("high", 9)):
        cluster.job(name, priority=priority).tasks(1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("crit", priority=1).tasks(
        1, status=TaskStatus.RUNNING, node="n1", priority_class_name="system-node-critical"
    )
    session = cluster.open()
    keeps = session.preemptable_filter()
    tests = list(session._victim_filters.values())
    assert keeps is not None and len(tests) == 2
    tasks = [t for job in session.jobs.values() for t in job.tasks.values()]
    answers = [keeps(p, t) for p in tasks for t in tasks]
    assert answers == [all(test(p, t) for test in tests) for p in tasks for t in tasks]
    assert True in answers and False in answers


def test_queue_keys_asked_alone_are_those_asked_one_by_one() -> None:
    """With no queue order function weighing the next job, the keys are asked through
    ``_calling``: as the general way (each function, asked whether it weighs the job)."""
    cluster = Cluster().node("n1", cpu=4).queue("a", weight=2).queue("b", weight=3)
    cluster.job("x", queue="a").tasks(2, status=TaskStatus.RUNNING, node="n1")
    cluster.job("y", queue="b").tasks(1)
    session = cluster.open()
    assert session._queue_keys_alone is not None
    alone = [session.queue_order_key(q) for q in session.queues.values()]
    session._queue_keys_alone = None
    assert [session.queue_order_key(q) for q in session.queues.values()] == alone
