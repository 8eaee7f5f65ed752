"""proportion: water-filling deserved shares, queue order, overused, capability."""

import numpy as np
import pytest

from builders import Cluster, run_actions, vec
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.plugins import proportion
from kbatch.operators.scheduler.core.plugins.proportion import deserved_shares

INF = np.full(4, np.inf)


def shares(total, weights, requests, caps=None):
    caps = caps or {}
    return deserved_shares(total, weights, requests, {n: caps.get(n, INF) for n in weights})


def test_the_kube_batch_notes_example() -> None:
    # nodes 6 cpu/15Gi + 3 cpu/12Gi; q1 w2 asks 5/10Gi, q2 w4 asks 10/20Gi
    got = shares(vec(9, 27), {"q1": 2, "q2": 4}, {"q1": vec(5, 10), "q2": vec(10, 20)})
    np.testing.assert_allclose(got["q1"], vec(3, 9))
    np.testing.assert_allclose(got["q2"], vec(6, 18))


def test_a_met_queue_keeps_its_request_and_the_rest_is_shared_again() -> None:
    got = shares(
        vec(10), {"small": 1, "big": 1, "mid": 2}, {"small": vec(1), "big": vec(20), "mid": vec(20)}
    )
    np.testing.assert_allclose(got["small"], vec(1))
    np.testing.assert_allclose(got["big"], vec(3))
    np.testing.assert_allclose(got["mid"], vec(6))


def test_capability_caps_deserved_and_the_excess_goes_to_others() -> None:
    got = shares(
        vec(10),
        {"a": 1, "b": 1},
        {"a": vec(10), "b": vec(10)},
        {"a": vec(2) + np.array([0, np.inf, np.inf, np.inf])},
    )
    np.testing.assert_allclose(got["a"], vec(2))
    np.testing.assert_allclose(got["b"], vec(8))


def test_a_dimension_nobody_asks_for_does_not_keep_queues_unmet() -> None:
    # gpus exist but nobody asks; kube-batch's strict test never met a queue here
    total = vec(10, 10, gpu=4)
    got = shares(total, {"a": 1, "b": 1}, {"a": vec(2, 2), "b": vec(20, 20)})
    np.testing.assert_allclose(got["a"], vec(2, 2))
    np.testing.assert_allclose(got["b"], vec(8, 8))


def test_a_queue_asking_what_the_cluster_lacks_does_not_hoard_the_rest() -> None:
    got = shares(vec(10), {"gpu": 1, "cpu": 1}, {"gpu": vec(1, gpu=2), "cpu": vec(10)})
    np.testing.assert_allclose(got["gpu"], vec(1))
    np.testing.assert_allclose(got["cpu"], vec(9))


def test_nothing_asked_nothing_deserved() -> None:
    got = shares(vec(10), {"idle": 5, "busy": 1}, {"idle": vec(), "busy": vec(4)})
    np.testing.assert_allclose(got["idle"], vec())
    np.testing.assert_allclose(got["busy"], vec(4))


def two_queues() -> Cluster:
    cluster = Cluster().node("n1", cpu=4, memory=16).queue("q1", weight=1).queue("q2", weight=1)
    cluster.job("a", queue="q1").tasks(3, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("b", queue="q2").tasks(4, cpu=1)
    return cluster


def test_queue_order_and_overused_follow_shares() -> None:
    session = two_queues().open()
    q1, q2 = session.queues["q1"], session.queues["q2"]
    assert session.overused(q1)  # 3 cpu held, 2 deserved
    assert not session.overused(q2)
    assert session.queue_order_key(q2) < session.queue_order_key(q1)


def test_queue_status_is_published_with_quantities() -> None:
    sent = run_actions(two_queues().open(), "allocate")
    assert sent.queues["q1"].deserved == {"cpu": "2", "memory": "3Gi"}
    assert sent.queues["q1"].allocated == {"cpu": "3", "memory": "3Gi"}
    assert sent.queues["q2"].allocated == {"cpu": "1", "memory": "1Gi"}
    assert sent.queues["q2"].request == {"cpu": "4", "memory": "4Gi"}


def test_capability_caps_allocation() -> None:
    cluster = Cluster().node("n1", cpu=8).queue("capped", capability=vec(2, 100, 100, 100))
    cluster.job("j", queue="capped").tasks(5, cpu=1)
    sent = run_actions(cluster.open(), "allocate")
    assert len(sent.binds) == 2


@pytest.mark.parametrize(("allocated", "victims"), [(3, ["a-0"]), (2, [])])
def test_a_queue_gives_up_tasks_only_above_its_deserved_share(
    allocated: int, victims: list[str]
) -> None:
    cluster = Cluster().node("n1", cpu=4).queue("q1").queue("q2")
    cluster.job("a", queue="q1").tasks(allocated, cpu=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("b", queue="q2").tasks(2, cpu=1)
    session = cluster.open('actions: "allocate"\ntiers:\n- plugins:\n  - name: proportion\n')
    reclaimer = next(iter(session.jobs["default/b"].tasks.values()))
    running = list(session.jobs["default/a"].tasks.values())
    assert [t.name for t in session.reclaimable(reclaimer, running)][:1] == victims


def test_complementary_demands_share_everything_exactly() -> None:
    # a wants memory, b wants cpu: the rounds of the old loop left 1.95m cpu and 2MiB over
    got = shares(vec(10, 10), {"a": 1, "b": 1}, {"a": vec(1, 100), "b": vec(100, 1)})
    np.testing.assert_array_equal(got["a"], vec(1, 9))
    np.testing.assert_array_equal(got["b"], vec(9, 1))


def test_a_queue_at_its_fair_share_is_not_overused() -> None:
    cluster = Cluster().node("n1", cpu=10, memory=10).queue("a").queue("b")
    cluster.job("ja", queue="a").tasks(1, cpu=1, memory=9, status=TaskStatus.RUNNING, node="n1")
    cluster.job("ja2", queue="a").tasks(1, cpu=0, memory=91)
    cluster.job("jb", queue="b").tasks(1, cpu=9, memory=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("jb2", queue="b").tasks(1, cpu=91, memory=0)
    session = cluster.open()
    assert not session.overused(session.queues["a"])
    assert not session.overused(session.queues["b"])


def test_shares_are_published_at_open_and_close_and_asked_as_the_session_goes() -> None:
    session = two_queues().open()
    q2 = session.queues["q2"]
    assert q2.deserved is not None and q2.allocated is not None
    np.testing.assert_array_equal(q2.allocated, vec())
    assert q2.share == 0.0
    task = next(iter(session.jobs["default/b"].tasks.values()))
    session.set_status(task, TaskStatus.ALLOCATED, 0)
    np.testing.assert_array_equal(q2.allocated, vec(1, 1))
    # What the actions ask follows each change; the queue's share is worked out once
    # asked (a gang placed task by task), and published at the close.
    assert session.queue_share(q2) == 0.5
    session.set_status(task, TaskStatus.PENDING)
    assert session.queue_share(q2) == 0.0
    session.set_status(task, TaskStatus.ALLOCATED, 0)
    session.close()
    assert q2.share == 0.5


def test_a_queue_gives_up_a_task_only_if_it_keeps_every_rationed_share() -> None:
    # 4 cpu, 4 gpu: q1 deserves 2 cpu and 2 gpu (and holds 3 and 2), q2 wants 4 and 4.
    # Taking an x task would leave q1 1 gpu of its 2; y (cpu only) may go.
    cluster = Cluster().node("n1", cpu=4, gpu=4).queue("q1").queue("q2")
    running = TaskStatus.RUNNING
    cluster.job("x", queue="q1").tasks(2, cpu=1, gpu=1, status=running, node="n1")
    cluster.job("y", queue="q1").tasks(1, cpu=1, status=running, node="n1")
    cluster.job("b", queue="q2").tasks(4, cpu=1, gpu=1)
    session = cluster.open('actions: "allocate"\ntiers:\n- plugins:\n  - name: proportion\n')
    reclaimer = next(iter(session.jobs["default/b"].tasks.values()))
    candidates = [t for j in ("x", "y") for t in session.jobs[f"default/{j}"].tasks.values()]
    assert [t.name for t in session.reclaimable(reclaimer, candidates)] == ["y-0"]


@pytest.mark.parametrize(("memory", "victims"), [(16, ["a-0"]), (8, [])])
def test_an_unrationed_resource_does_not_shield_a_queue(memory: int, victims: list[str]) -> None:
    # q1 holds 3 cpu of its deserved 2, and 3Gi, all it asks. With 16Gi nobody is short
    # of memory, so giving 1Gi back takes no share q1 is owed (kube-batch's strict test
    # refused it). With 8Gi q2 is short (deserves 5Gi of 8): q1's 3Gi is a real share.
    cluster = Cluster().node("n1", cpu=4, memory=memory).queue("q1").queue("q2")
    cluster.job("a", queue="q1").tasks(3, cpu=1, memory=1, status=TaskStatus.RUNNING, node="n1")
    cluster.job("b", queue="q2").tasks(4, cpu=1, memory=2)
    session = cluster.open('actions: "allocate"\ntiers:\n- plugins:\n  - name: proportion\n')
    reclaimer = next(iter(session.jobs["default/b"].tasks.values()))
    running = list(session.jobs["default/a"].tasks.values())
    assert [t.name for t in session.reclaimable(reclaimer, running)][:1] == victims


def _fill_by_numpy(total: float, weight: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """The water-filling of one dimension step by step on numpy scalars (the long way)."""
    out = np.zeros_like(limit)
    left, open_weight = max(total, 0.0), float(weight.sum())
    order = np.argsort(limit / weight, kind="stable")
    for k, i in enumerate(order):
        if limit[i] * open_weight > left * weight[i]:
            rest = order[k:]
            out[rest] = left * weight[rest] / open_weight
            break
        out[i] = limit[i]
        left -= limit[i]
        open_weight -= weight[i]
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_deserved_shares_are_those_of_the_long_way_to_the_bit(seed: int) -> None:
    """Random queues (weights with ties, requests with ties and zeros, capabilities some
    infinite, totals fractional; in a quarter of the seeds a NaN request, which the
    order puts last as numpy's argsort does): the same floats, bit for bit, as filling
    each dimension on numpy scalars."""
    rng = np.random.default_rng(seed)
    count = int(rng.integers(1, 12))
    names = [f"q{i}" for i in range(count)]
    weights = {n: int(rng.integers(1, 4)) for n in names}
    amounts = [0.0, 1.5, 3.0, 7.25, 1e6] + ([np.nan] if seed % 4 == 0 else [])
    requests = {n: rng.choice(amounts, size=4) for n in names}
    caps = {
        n: np.where(rng.random(4) < 0.5, np.inf, rng.choice([1.0, 2.5, 4.0], size=4)) for n in names
    }
    total = rng.choice([0.0, 2.0, 9.75, 31.3, 1e7], size=4)
    got = deserved_shares(total, weights, requests, caps)
    weight = np.array([float(weights[n]) for n in names])
    limits = np.array([np.minimum(requests[n], caps[n]) for n in names])
    for dim in range(4):
        expected = _fill_by_numpy(float(total[dim]), weight, limits[:, dim])
        shares = np.array([got[n][dim] for n in names])
        assert shares.tobytes() == expected.tobytes(), (seed, dim)


def test_queues_without_a_capability_share_one_unlimited_that_nothing_writes() -> None:
    free = proportion.QueueShare(
        "a", 1, proportion.unlimited(4), np.zeros(4), np.zeros(4), np.zeros(4)
    )
    capped = proportion.QueueShare(
        "b", 1, np.array([1.0, np.inf, np.inf, np.inf]), np.zeros(4), np.zeros(4), np.zeros(4)
    )
    spelled_out = proportion.QueueShare(
        "c", 1, np.full(4, np.inf), np.zeros(4), np.zeros(4), np.zeros(4)
    )
    assert free.capability is proportion.unlimited(4)
    assert free.unbounded and spelled_out.unbounded and not capped.unbounded
    with pytest.raises(ValueError):
        free.capability[0] = 1.0
