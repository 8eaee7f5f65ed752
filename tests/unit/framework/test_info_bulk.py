"""The bulk forms a snapshot is built with (``TaskRequests``' sums, ``NodeSet.place_all``)
give what the one-by-one forms give, to the bit.

The requests are random fractions on purpose: sums of whole numbers come out the same in
any order, these only when added in the same order as one by one.
"""

import random

import numpy as np
import pytest

from kbatch.operators.scheduler.core.framework import nodes as nodes_module
from kbatch.operators.scheduler.core.framework.info import (
    FINISHED_STATUSES,
    PLACED_STATUSES,
    JobInfo,
    TaskInfo,
    TaskRequests,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.nodes import NodeInfo, NodeSet
from kbatch.operators.scheduler.core.framework.podspec import (
    Affinity,
    LabelSelector,
    PodAffinityTerm,
    PodTemplate,
)

DIMS = 4


# (the pods with required anti-affinity terms are counted per node: NodeSet.anti_required)
APART = Affinity(anti_required=(PodAffinityTerm(LabelSelector((("app", "x"),)), "zone"),))


def templates(rnd: random.Random, count: int) -> list[PodTemplate]:
    return [
        PodTemplate(
            "ns",
            {},
            np.array([rnd.random() * 10 ** rnd.randrange(6) for _ in range(DIMS)]),
            False,
            affinity=APART if rnd.random() < 0.3 else Affinity(),
        )
        for _ in range(count)
    ]


def tasks(rnd: random.Random, count: int, statuses: list[TaskStatus]) -> list[TaskInfo]:
    shared = templates(rnd, 3)
    return [
        TaskInfo(
            uid=f"t{i}",
            namespace="ns",
            name=f"t{i}",
            job=rnd.choice(("", "j")),  # (a task of no job: another scheduler's pod)
            # Most share a template (one request array), as a gang's pods do; some not.
            template=rnd.choice(shared) if rnd.random() < 0.7 else templates(rnd, 1)[0],
            status=rnd.choice(statuses),
        )
        for i in range(count)
    ]


def jobs(count: int) -> list[JobInfo]:
    return [JobInfo(f"j{i}", "ns", f"j{i}", "q", 1, 0.0, DIMS) for i in range(count)]


def sums_added_at_once(
    owned: list[JobInfo], added: list[TaskInfo], by_bincount: bool = True
) -> None:
    """Each task's request added to its job's sums as the snapshot's pass does: a row per
    job, an index per distinct request, then ``TaskRequests.add_to`` (counts and the
    tasks dict are the pass's own: tests/unit/cluster/test_snapshot_accounts.py)."""
    requests, owners, rows = TaskRequests(), [], {}
    for job, task in zip(owned, added, strict=True):
        row = rows.setdefault(id(job), len(owners))
        if row == len(owners):
            owners.append(job)
        at = requests.index(task.template.request)
        requests.add(
            row, at, 1, task.status in PLACED_STATUSES, task.status not in FINISHED_STATUSES
        )
    requests.add_to(owners, by_bincount)


def sums(job: JobInfo) -> tuple[bytes, bytes]:
    return job.allocated.tobytes(), job.total_request.tobytes()


@pytest.mark.parametrize("bincount", [True, False])
@pytest.mark.parametrize("start", ["a task", "nothing", "negative zeros"])
@pytest.mark.parametrize("seed", range(5))
def test_requests_added_at_once_are_the_sums_added_one_by_one(
    seed: int, start: str, bincount: bool
) -> None:
    """From sums that are not all +0.0 the sums are ``np.add.at``'s; from new jobs'
    zeros, ``np.bincount``'s (but with ``Shortcuts.sums_by_bincount`` off): both the
    additions one by one, in order."""
    rnd = random.Random(seed)
    one_by_one, at_once = jobs(6), jobs(6)
    for group in (one_by_one, at_once):
        if start == "a task":  # the sums go on from what is there
            for job, task in zip(group, tasks(random.Random(seed), 6, statuses), strict=True):
                job.add_task(task)
        elif start == "negative zeros":  # -0.0 stays so where nothing is added
            for job in group:
                job.allocated, job.total_request = np.full(DIMS, -0.0), np.full(DIMS, -0.0)
    added = tasks(rnd, 300, statuses)
    picks = [rnd.randrange(6) if rnd.random() < 0.5 else 0 for _ in added]  # runs and jumps
    for task, pick in zip(added, picks, strict=True):
        if pick == 5:  # a job whose tasks are all over: nothing added to its sums
            task.status = TaskStatus.SUCCEEDED
        one_by_one[pick].add_task(task)
    sums_added_at_once([at_once[pick] for pick in picks], added, bincount)
    assert [sums(job) for job in at_once] == [sums(job) for job in one_by_one]


statuses = list(TaskStatus)


def test_no_requests_added_change_nothing() -> None:
    (job,) = jobs(1)
    before = sums(job)
    TaskRequests().add_to([])
    sums_added_at_once([], [])
    assert sums(job) == before


def node_set(rnd: random.Random, count: int) -> NodeSet:
    infos = [NodeInfo(f"n{i:02d}", {}) for i in rng_order(rnd, count)]
    return NodeSet(infos, np.array([[rnd.random() * 1e6 for _ in range(DIMS)] for _ in infos]))


def rng_order(rnd: random.Random, count: int) -> list[int]:
    order = list(range(count))
    rnd.shuffle(order)  # NodeSet sorts its nodes by name
    return order


NODE_STATES = (
    "used", "releasing", "pipelined", "nominated", "free", "future", "_waits", "jobless",
    "anti_required",
)  # fmt: skip


# Tasks placed and reserved: many (each row's additions made at once), and a few (made
# one by one: ``nodes._FEW``).
SIZES = [(200, 30), (6, 3)]


@pytest.mark.parametrize("stacked_each_up_to", [0, 10**6])  # requests picked by identity, or not
@pytest.mark.parametrize("bincount", [True, False])
@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("placing", "reserving"), SIZES)
def test_place_all_is_place_and_reserve_one_by_one(
    seed: int,
    bincount: bool,
    stacked_each_up_to: int,
    placing: int,
    reserving: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(nodes_module, "_STACKED_EACH_UP_TO", stacked_each_up_to)
    rnd = random.Random(seed)
    one_by_one, at_once = node_set(random.Random(seed), 8), node_set(random.Random(seed), 8)
    placed = tasks(rnd, placing, [s for s in TaskStatus if s is not TaskStatus.PENDING])
    for task in placed:
        task.node = rnd.randrange(8)
    reserved = tasks(rnd, reserving, [TaskStatus.PENDING])
    for task in reserved:
        task.nominated = rnd.randrange(8)
    for task in placed:
        one_by_one.place(task, task.node)
    for task in reserved:
        one_by_one.reserve(task, 1.0)
    at_once.place_all(placed, reserved, bincount)
    for name in NODE_STATES[:-1]:  # (anti_required: as placed at once; place does not count)
        assert getattr(at_once, name).tobytes() == getattr(one_by_one, name).tobytes(), name
    assert at_once.count_anti_required() == one_by_one.count_anti_required()
    assert at_once.kept == one_by_one.kept == len(reserved)
    assert [list(i.tasks) for i in at_once.infos] == [list(i.tasks) for i in one_by_one.infos]
    # Nothing had seen these nodes: no version moved, no change logged.
    assert not at_once.version.any() and at_once.changed == []


def test_place_all_of_nothing_leaves_every_node_idle() -> None:
    nodes = node_set(random.Random(0), 3)
    nodes.place_all([])
    assert (nodes.free == nodes.allocatable).all() and (nodes.future == nodes.allocatable).all()
    assert not nodes._waits.any() and nodes.kept == 0


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("placing", "reserving"), SIZES)
def test_place_again_is_place_all_of_every_task(seed: int, placing: int, reserving: int) -> None:
    """Tasks placed on a node set; then, of the same nodes, a node set on which the tasks
    of some nodes change (some gone, new ones among the others in pod order) and only
    those nodes are placed again, the others' rows copied: what ``place_all`` of every
    task gives on a new node set, to the bit."""
    rnd = random.Random(seed)
    before = node_set(random.Random(seed), 8)
    placed = tasks(rnd, placing, [s for s in TaskStatus if s is not TaskStatus.PENDING])
    reserved = tasks(rnd, reserving, [TaskStatus.PENDING])
    for task in placed:
        task.node = rnd.randrange(8)
    for task in reserved:
        task.nominated = rnd.randrange(8)
    before.place_all(placed, reserved)
    rows = before.placed_rows()
    changing = {1, 4, 5}
    later_placed = [t for t in placed if t.node not in changing or rnd.random() < 0.5]
    for task in tasks(rnd, placing // 5, [TaskStatus.RUNNING, TaskStatus.RELEASING]):
        task.node = rnd.choice(sorted(changing))  # (new pods come anywhere in pod order)
        later_placed.insert(rnd.randrange(len(later_placed) + 1), task)
    later_reserved = [t for t in reserved if t.nominated not in changing]
    later_reserved += tasks(rnd, reserving // 3, [TaskStatus.PENDING])
    for task in later_reserved[len(later_reserved) - reserving // 3 :]:
        task.nominated = rnd.choice(sorted(changing))
    again = NodeSet.of_same_nodes(before, before.allocatable.copy())
    again.place_again(
        rows,
        sorted(changing),
        [t for t in later_placed if t.node in changing],
        [t for t in later_reserved if t.nominated in changing],
        len(later_reserved),
    )
    fresh = node_set(random.Random(seed), 8)
    fresh.place_all(later_placed, later_reserved)
    for name in NODE_STATES:
        assert getattr(again, name).tobytes() == getattr(fresh, name).tobytes(), name
    assert again.kept == fresh.kept == len(later_reserved)
    assert [list(i.tasks) for i in again.infos] == [list(i.tasks) for i in fresh.infos]
    assert again.infos is before.infos and not again.version.any() and again.changed == []


def test_the_count_of_anti_affinity_pods_follows_the_tasks_on_each_node() -> None:
    rnd = random.Random(7)
    nodes = node_set(rnd, 6)
    placed = tasks(rnd, 120, [TaskStatus.RUNNING])
    for task in placed:
        task.node = rnd.randrange(6)
    nodes.place_all(placed[:60])
    assert nodes.count_anti_required() == sum(nodes.anti_required)
    for task in placed[60:]:
        nodes.place(task, task.node)
    for task in rnd.sample(placed, 50):
        nodes.remove(task, task.node)
        nodes.remove(task, task.node)  # (a second time: it is gone already)
    walked = [
        sum(1 for task in info.tasks.values() if task.template.affinity.anti_required)
        for info in nodes.infos
    ]
    assert nodes.count_anti_required() == sum(walked) > 0


def test_the_nodes_holding_tasks_of_no_job_follow_the_tasks_on_each_node() -> None:
    rnd = random.Random(11)
    nodes = node_set(rnd, 6)
    placed = tasks(rnd, 80, [TaskStatus.RUNNING, TaskStatus.RELEASING])
    for i, task in enumerate(placed):
        task.uid, task.node = f"u{i}", rnd.randrange(6)
    nodes.place_all(placed[:40])
    for task in placed[40:]:
        nodes.place(task, task.node)
    for task in placed[40:50]:
        nodes.remove(task, task.node)
        nodes.place(task, task.node)
        nodes.place(task, task.node)  # (again: its node holds it once, and counts it once)
    for task in rnd.sample(placed, 70):
        nodes.remove(task, task.node)
        nodes.remove(task, task.node)  # (a second time: it is gone already)
    walked = [sum(1 for task in info.tasks.values() if not task.job) for info in nodes.infos]
    assert nodes.jobless.tolist() == walked and 0 < sum(walked) < 10
    assert nodes.jobless_nodes() == [i for i, count in enumerate(walked) if count]
