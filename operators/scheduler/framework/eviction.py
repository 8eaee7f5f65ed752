"""Making room for a task by evicting others, through a Statement.

Shared by the preempt and reclaim actions: they differ in which running tasks
are candidates and which plugin function chooses the victims.
"""

from collections.abc import Callable

import numpy as np

from kbatch.operators.scheduler.framework.info import JobInfo, TaskInfo, TaskStatus
from kbatch.operators.scheduler.framework.placement import Placer
from kbatch.operators.scheduler.framework.resources import EPSILON
from kbatch.operators.scheduler.framework.session import Session
from kbatch.operators.scheduler.framework.statement import Statement

EVICTABLE = (TaskStatus.RUNNING, TaskStatus.BOUND)

# (preemptor, candidates on one node) -> the victims, least important first
VictimChooser = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]
# may this victim still go, given what this statement already took? (re-checked per victim)
StillAllowed = Callable[[TaskInfo], bool]


def evictable_tasks(
    session: Session, node: int, wanted: Callable[[TaskInfo], bool]
) -> list[TaskInfo]:
    return [
        t
        for t in session.nodes.infos[node].tasks.values()
        if t.status in EVICTABLE and t.job and wanted(t)
    ]


def least_important_first(session: Session, tasks: list[TaskInfo]) -> list[TaskInfo]:
    """Victims in the order they should go: the least important job, then task, first."""

    def key(task: TaskInfo) -> tuple[object, ...]:
        return (session.job_order_key(session.jobs[task.job]), session.task_order_key(task))

    return sorted(tasks, key=key, reverse=True)


def fits_without_eviction(session: Session, placer: Placer, job: JobInfo) -> bool:
    """Could the job's next tasks go where there is room (idle or being released), far
    enough to make it pipelined? A dry run: whatever it places is undone."""
    statement = Statement(session)
    placed = 0
    for task in pending_tasks(session, job):
        choice = placer.choose(task)
        if choice is None:
            break
        statement.place(task, choice.node, choice.pipelined)
        placed += 1
        if session.job_pipelined(job):
            break
    possible = placed > 0 and session.job_pipelined(job)
    statement.discard()
    return possible


def pending_tasks(session: Session, job: JobInfo) -> list[TaskInfo]:
    """The job's pending tasks that need resources, in task order."""
    return sorted(
        (t for t in job.tasks_with(TaskStatus.PENDING) if not t.template.best_effort),
        key=session.task_order_key,
    )


def make_room(
    session: Session,
    statement: Statement,
    placer: Placer,
    task: TaskInfo,
    wanted: Callable[[TaskInfo], bool],
    choose: VictimChooser,
    still_allowed: StillAllowed = lambda _: True,
) -> bool:
    """Evict what ``choose`` allows on the best node where that makes ``task`` fit,
    then pipeline ``task`` there. False (and nothing done) if no node works.

    A gang is never left with 0 < ready < minMember: if the victims taken break
    one, the rest of it on this node goes too (the plugins offer a whole gang
    only when all of it is there), or the node is given up.
    """
    nodes = session.nodes
    view = placer.view(task)
    request = task.request
    for node in _nodes_worth_trying(session, view.ok, view.scores, request, wanted):
        candidates = evictable_tasks(session, node, wanted)
        victims = least_important_first(session, choose(task, candidates))
        room = nodes.future_idle()[node] + sum((v.request for v in victims), np.zeros_like(request))
        if not _fits(request, room):
            continue
        mark = statement.mark()
        taken = []
        for victim in victims:
            if _fits(request, nodes.future_idle()[node]):
                break
            if still_allowed(victim):
                statement.evict(victim, f"preempted for {task.key}")
                taken.append(victim)
        taken += _complete_broken_gangs(session, statement, task, victims, taken)
        if _fits(request, nodes.future_idle()[node]) and not _breaks_a_gang(session, taken):
            statement.pipeline(task, node)
            session.stats.preemption_victims += len(taken)
            return True
        statement.rollback(mark)
    return False


def _complete_broken_gangs(
    session: Session,
    statement: Statement,
    task: TaskInfo,
    victims: list[TaskInfo],
    taken: list[TaskInfo],
) -> list[TaskInfo]:
    more = []
    for job_uid in {t.job for t in taken}:
        job = session.jobs[job_uid]
        if 0 < job.ready_count < job.min_member:
            for victim in victims:
                if victim.job == job_uid and victim.status is not TaskStatus.RELEASING:
                    statement.evict(victim, f"preempted for {task.key} (whole gang)")
                    more.append(victim)
    return more


def _breaks_a_gang(session: Session, taken: list[TaskInfo]) -> bool:
    jobs = {session.jobs[t.job] for t in taken}
    return any(0 < job.ready_count < job.min_member for job in jobs)


def _fits(request: np.ndarray, room: np.ndarray) -> bool:
    return bool(np.all(request <= room + EPSILON))


def _nodes_worth_trying(
    session: Session,
    ok: np.ndarray,
    scores: np.ndarray,
    request: np.ndarray,
    wanted: Callable[[TaskInfo], bool],
) -> list[int]:
    """Nodes passing the predicates whose room plus every candidate's could hold the
    task: those with room already first, then best score first, ties by name."""
    nodes = session.nodes
    evictable = np.zeros_like(nodes.allocatable)
    for node in np.flatnonzero(ok):
        for t in evictable_tasks(session, int(node), wanted):
            evictable[node] += t.request
    future = nodes.future_idle()
    could = ok & np.all(request <= future + evictable + EPSILON, axis=1)
    roomy = np.all(request <= future + EPSILON, axis=1)
    order = np.lexsort((np.arange(len(nodes)), -scores, ~roomy))
    return [int(i) for i in order if could[i]]
