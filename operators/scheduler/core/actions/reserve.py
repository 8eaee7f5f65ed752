"""The reserve action: a large job is not starved by a flood of small ones (DESIGN §11).

For each queue within its deserved share, by queue order, the first job in its
order that is still not ready after the placing actions (its head) gets room kept
on the nodes that cost least to drain: nothing else is placed in that room, and
the job takes it once what runs there has ended — no eviction. The room is kept
with the nominations preempt and reclaim use (a pod's ``nominatedNodeName``), so
it survives to the next session and to another leader; it is given back as soon
as a session no longer reserves it (the job was placed, is no longer its queue's
head, or its queue went over its share). Like every action it changes the session
through a Statement (``Statement.drain``): a job's room is kept for all the tasks it
needs or for none.

The room kept is lent meanwhile to jobs whose pods' walltimes
(``activeDeadlineSeconds``) end them before the kept job could start
(``reserve_fill``).

Configure it after the placing actions, e.g. ``enqueue, allocate, backfill,
reserve``: without it nothing changes (kube-batch's behaviour).

The cost of a node is what is in the way: the share of the node that must still
be freed for the task, then the number of running tasks there, then the node
order. A task's node is kept between sessions while it still can hold it.
"""

from dataclasses import dataclass

import numpy as np

from kbatch.api.quantity import format_quantity
from kbatch.operators.scheduler.core.actions import reserve_fill
from kbatch.operators.scheduler.core.framework import topology
from kbatch.operators.scheduler.core.framework.device_needs import PlannedDevices
from kbatch.operators.scheduler.core.framework.info import (
    NO_NODE,
    REQUIRED,
    JobInfo,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.placement import Placer
from kbatch.operators.scheduler.core.framework.resources import EPSILON
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement
from kbatch.operators.scheduler.core.framework.volume_needs import PlannedVolumes

NAME = "reserve"


def execute(session: Session) -> None:
    placer = Placer(session, score=False)
    by_queue: dict[str, list[JobInfo]] = {}
    ordered = sorted(session.jobs_to_place(), key=session.job_order_key)
    for job in ordered:
        by_queue.setdefault(job.queue, []).append(job)
    drained: np.ndarray | None = None  # read off every node's tasks only if needed
    kept: list[list[TaskInfo]] = []  # the tasks of each job room is kept for
    for name in sorted(by_queue, key=lambda q: session.queue_order_key(session.queues[q])):
        if session.overused(session.queues[name]):
            continue
        head = next((job for job in by_queue[name] if not session.job_ready(job)), None)
        if head is not None and not session.job_pipelined(head):
            drained = _room_when_drained(session) if drained is None else drained
            tasks = _reserve_for(session, placer, head, drained)
            if tasks:
                kept.append(tasks)
    if kept:
        reserve_fill.fill(session, kept, ordered)


@dataclass(slots=True)
class _Plan:
    task: TaskInfo
    node: int
    share: float = 0.0  # of the node still to be freed for the task (``_in_the_way``)


def _room_when_drained(session: Session) -> np.ndarray:
    """Each node's room once every task of ours there has ended: less what other
    schedulers' pods hold (they may never end) and the room kept for others: nominated
    to them, or promised to them this session (pipelined: a preemptor's room is
    nominated to it only as the session ends, its nomination given up meanwhile)."""
    nodes = session.nodes
    return nodes.allocatable - nodes.nominated - nodes.pipelined - nodes.held_by_others()


def _reserve_for(
    session: Session, placer: Placer, job: JobInfo, drained: np.ndarray
) -> list[TaskInfo]:
    """Keep room for the tasks ``job`` needs to become ready, or for none of them; all
    in one domain of the level it requires, if it does (``_within``). The tasks room
    is kept for (none: none)."""
    need = max(job.min_member - job.ready_count, 1)
    waiting = sorted(
        (t for t in job.tasks_with(TaskStatus.PENDING) if not t.template.best_effort),
        key=session.task_order_key,
    )[:need]
    if len(waiting) < need:
        return []  # not all its pods exist: nothing would make it ready
    room = drained.copy()
    for task in waiting:  # its own kept room is its own to plan with
        if task.nominated != NO_NODE:
            room[task.nominated] += task.request
    found = [_plan(session, placer, waiting, room, nodes) for nodes in _within(session, job)]
    plans = min((p for p in found if p is not None), key=_in_the_way, default=None)
    if plans is None:
        return []
    why = _waiting_message(session, job, sorted({p.node for p in plans}))
    statement = Statement(session)
    for plan in plans:
        statement.drain(plan.task, plan.node, why)
        room[plan.node] -= plan.task.request
    statement.commit()
    drained[:] = room
    return [plan.task for plan in plans]


def _within(session: Session, job: JobInfo) -> list[np.ndarray | None]:
    """The node sets to keep ``job``'s room in: each domain of the level it requires
    (room kept across domains would not make it ready), else all nodes (None)."""
    request = job.topology
    if request is None or request.mode != REQUIRED:
        return [None]
    levels = topology.levels_of(session)
    inside: list[np.ndarray | None] = []
    for members in levels.members(request.level):
        mask = np.zeros(len(session.nodes), dtype=bool)
        mask[members] = True
        inside.append(mask)
    return inside


def _plan(
    session: Session,
    placer: Placer,
    waiting: list[TaskInfo],
    room: np.ndarray,
    within: np.ndarray | None,
) -> list[_Plan] | None:
    """A node for each of ``waiting`` once drained (``room``), on ``within`` only if
    given, their claims bound as they would be (``PlannedVolumes``: a task that shares
    a claim with one planned before goes to its node; ``PlannedDevices``: their resource
    claims' devices likewise), each counted where planned by
    the checks of those after it (``Session.planned``: a gang's topology spread holds
    among its planned pods); None when one finds none."""
    room = room.copy()
    plans = []
    volumes = PlannedVolumes(session.node_volumes.limits if session.node_volumes else {})
    devices = PlannedDevices(session.node_devices)
    infos = session.nodes.infos
    try:
        for task in waiting:
            only = volumes.node_for(task)
            if only is None:
                only = devices.node_for(task, session.nodes.index)
            node = _best_node(session, placer, task, room, within, only)
            if node == NO_NODE:
                return None
            name, labels = infos[node].name, infos[node].labels
            if not volumes.take(task, node, name, labels) or not devices.take(task, name, labels):
                return None
            share = _share_in_the_way(session, task, np.array([node]))[0]
            room[node] -= task.request
            plans.append(_Plan(task, node, share))
            session.planned.append((task, node))
    finally:
        session.planned.clear()
    return plans


def _in_the_way(plans: list[_Plan]) -> tuple[bool, float]:
    """How a plan ranks: the one keeping the nodes already kept first (a job's room
    stays where it was kept while it still can), then least in the way in all."""
    moved = any(p.node != p.task.nominated for p in plans)
    return moved, sum(p.share for p in plans)


def _best_node(
    session: Session,
    placer: Placer,
    task: TaskInfo,
    room: np.ndarray,
    within: np.ndarray | None = None,
    only: int | None = None,
) -> int:
    """The node that holds ``task`` once drained and has least in the way (of
    ``within``, if given; ``only`` that one, if given); the task's own node from an
    earlier session while it still can."""
    counted = session.room_dims
    ok = placer.view(task).ok
    holds = ok & np.all((task.request <= room + EPSILON)[:, counted], axis=1)
    if within is not None:
        holds &= within
    if only is not None:
        holds &= np.arange(len(holds)) == only
    if task.nominated != NO_NODE and holds[task.nominated]:
        return task.nominated
    candidates = np.flatnonzero(holds)
    if not candidates.size:
        return NO_NODE
    in_the_way = _share_in_the_way(session, task, candidates)
    # Least in the way first; among those (mostly one), fewest tasks, then node order.
    least = candidates[in_the_way == in_the_way.min()].tolist()
    if len(least) == 1:
        return int(least[0])
    infos = session.nodes.infos
    return int(min(least, key=lambda i: (len(infos[i].tasks), i)))


def _share_in_the_way(session: Session, task: TaskInfo, candidates: np.ndarray) -> np.ndarray:
    """Per node of ``candidates``: the largest share of it still to be freed for ``task``."""
    nodes = session.nodes
    still_needed = np.maximum(task.request - np.maximum(nodes.free[candidates], 0), 0)
    capacity = nodes.allocatable[candidates]
    share = np.divide(still_needed, capacity, out=np.zeros_like(still_needed), where=capacity > 0)
    return share[:, session.room_dims].max(axis=1)


def _waiting_message(session: Session, job: JobInfo, nodes: list[int]) -> str:
    """'waiting for 1 node to drain: node-1 reserved (12 of 32 cpu still in use)'."""
    node_set, dims = session.nodes, session.dims
    request = sum((t.request for t in job.tasks.values()), np.zeros(len(dims)))
    capacity = node_set.allocatable[nodes].sum(axis=0)
    ratio = np.divide(request, capacity, out=np.zeros_like(request), where=capacity > 0)
    ratio[~session.room_dims] = -1.0
    dim = int(np.argmax(ratio))
    name = dims.names[dim]
    used = float(node_set.used[nodes, dim].sum())
    names = ", ".join(node_set.names[i] for i in nodes)
    count = f"{len(nodes)} node{'s' if len(nodes) > 1 else ''}"
    return (
        f"waiting for {count} to drain: {names} reserved "
        f"({format_quantity(name, used)} of {format_quantity(name, float(capacity[dim]))} "
        f"{name} still in use)"
    )
