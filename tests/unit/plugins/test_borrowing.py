"""proportion's borrowing (DESIGN §14) as the session asks it: whose room a queue over
its share may borrow (nearest relatives first), the switch, and enqueue on idle room
kept off another subtree's unused guarantee."""

import pytest

from builders import Cluster, run_actions, vec
from kbatch.api.podgroup import PodGroupPhase
from kbatch.config import KUBE_BATCH_CONF
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.tiers import Vote
from kbatch.operators.scheduler.core.plugins import borrowing


def tree(cpu: float = 12, **extra: dict) -> Cluster:
    """team-a {a1, a2} and team-b {b1}, weight 1 each, on one node of ``cpu``."""
    cluster = Cluster().node("n1", cpu=cpu, memory=64)
    parents = {"team-a": None, "team-b": None, "a1": "team-a", "a2": "team-a", "b1": "team-b"}
    for name, parent in parents.items():
        cluster.queue(name)
        cluster.queues[name].parent = parent
        for field, value in extra.get(name.replace("-", "_"), {}).items():
            setattr(cluster.queues[name], field, value)
    return cluster


def _team_a_at_its_share_with_a_borrowing_limit_of_1() -> Cluster:
    """team-a runs 6 of 12 cpu (its share, team-b asking 6), a1 asks 2 more, and
    team-a may borrow 1 cpu."""
    cluster = tree(team_a={"borrowing_limit": vec(1)})
    cluster.job("ja1", queue="a1").tasks(6, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("more", queue="a1").tasks(2, cpu=1)
    cluster.job("jb1", queue="b1").tasks(1, cpu=6)
    return cluster


@pytest.mark.parametrize(("a2_asks", "lender"), [(True, "a2"), (False, "team-b")])
def test_a_leaf_borrows_from_its_nearest_relative_with_unused_room(
    a2_asks: bool, lender: str
) -> None:
    cluster = tree()
    cluster.job("ja1", queue="a1").tasks(7, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("more", queue="a1").tasks(1, cpu=1)
    if a2_asks:  # a2 deserves 3 of team-a's 6 and holds none of it
        cluster.job("ja2", queue="a2").tasks(1, cpu=3)
    cluster.job("jb1", queue="b1").tasks(1, cpu=6)
    session = cluster.open()
    [task] = session.jobs["default/more"].tasks.values()
    assert session.borrows and session.overused(session.queues["a1"])
    assert session.lender(session.queues["a1"], task) == lender


def test_a_borrowing_limit_on_an_ancestor_caps_its_leaves() -> None:
    session = _team_a_at_its_share_with_a_borrowing_limit_of_1().open()
    # team-a deserves 6 (of 12, team-b asking 6): one more cpu is within its limit, two not
    first, second = session.jobs["default/more"].tasks.values()
    assert session.lender(session.queues["a1"], first) == "team-b"
    session.set_status(first, TaskStatus.ALLOCATED, 0)
    assert session.lender(session.queues["a1"], second) is None


def test_kube_batchs_conf_never_borrows() -> None:
    cluster = tree()
    cluster.job("ja1", queue="a1").tasks(7, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("more", queue="a1").tasks(1, cpu=1)
    session = cluster.open(KUBE_BATCH_CONF)
    [task] = session.jobs["default/more"].tasks.values()
    assert not session.borrows
    assert session.lender(session.queues["a1"], task) is None


def test_enqueue_on_idle_room_keeps_off_another_subtrees_unused_guarantee() -> None:
    cluster = tree(cpu=8, team_a={"guarantee": vec(4)})
    cluster.job("jb1", queue="b1").tasks(4, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("more", queue="b1", min_resources=vec(2, 1), phase=PodGroupPhase.PENDING)
    cluster.job("ja1", queue="a1", min_resources=vec(2, 1), phase=PodGroupPhase.PENDING)
    session = cluster.open()
    # 4 cpu idle, all of them team-a's unused guarantee: b1 (at its deserved 4) waits
    vote, why = session.job_enqueueable(session.jobs["default/more"])
    assert (vote, why) == (Vote.REJECT, "team-a's unused guarantee keeps cpu 4 free")
    vote, _ = session.job_enqueueable(session.jobs["default/ja1"])
    assert vote is Vote.PERMIT


def test_the_lending_is_worked_out_at_the_first_question_as_it_stood_at_the_open(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No queue over its share waits: allocate asks no lender, and none is worked out.
    Asked first after tasks were placed, the lender answers as one worked out at the
    open and asked then (it reads the plugin's shares as they are)."""
    made: list[int] = []
    real = borrowing.lending
    monkeypatch.setattr(borrowing, "lending", lambda *a: made.append(1) or real(*a))
    fits = tree()
    fits.job("ja1", queue="a1").tasks(2, cpu=1)
    fits.job("jb1", queue="b1").tasks(2, cpu=1)
    assert len(run_actions(fits.open(), "allocate").binds) == 4
    assert made == []

    def answers(ask_at_open: bool) -> list[str | None]:
        session = _team_a_at_its_share_with_a_borrowing_limit_of_1().open()
        first, second = session.jobs["default/more"].tasks.values()
        said = [session.lender(session.queues["a1"], second)] if ask_at_open else []
        session.set_status(first, TaskStatus.ALLOCATED, 0)
        return [*said, session.lender(session.queues["a1"], second)]

    assert answers(ask_at_open=True) == ["team-b", None]
    assert answers(ask_at_open=False) == [None]
    assert made == [1, 1]
