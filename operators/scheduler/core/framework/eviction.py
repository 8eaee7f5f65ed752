"""Making room for a task by evicting others, through a Statement.

Shared by the preempt and reclaim actions: they differ in which running tasks
are candidates, which plugin function chooses the victims, which victims go
first and what may still go given the victims already taken.

On each node worth trying, victims are taken in order until the task fits —
surplus first (tasks whose job keeps minMember and every role's minimum without
them), then the rest — and gangs are kept whole: a gang that a victim would leave
below its minimum (0 < ready < minMember, or a role short) goes whole, its tasks
on every node (whole-group preemption, DESIGN §12), if the plugins let all of them
go; else the plan fails. Then the victims not needed after all are spared again,
most important first (a gang taken whole, whole or not at all). Of the nodes that
work, the plan breaking the fewest groups wins, then the one whose victims are
fewest and least important.
"""

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

import numpy as np

from kbatch.operators.scheduler.core.framework import eviction_rules
from kbatch.operators.scheduler.core.framework.evictable import EVICTABLE
from kbatch.operators.scheduler.core.framework.eviction_rules import Rules
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.placement import Placer
from kbatch.operators.scheduler.core.framework.resources import EPSILON
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement

# What the victims of one eviction are told: their Evict events' message and their
# pods' DisruptionTarget message (who takes the room). A function, so that the words
# are made only when someone is evicted: most attempts find no victim.
Messages = Callable[[], tuple[str, str]]

# How many nodes that work are compared before the best of them is taken (in node
# order, roomiest and best scored first), so that a big full cluster stays cheap.
PLANS_COMPARED = 8


@dataclass(frozen=True, slots=True, order=True)
class _Plan:
    cost: tuple[int, ...]
    node: int
    victims: list[TaskInfo] = field(compare=False)


def evictable_tasks(
    session: Session, node: int, wanted: Callable[[JobInfo], bool]
) -> list[TaskInfo]:
    jobs = session.jobs
    return [
        t
        for t in session.nodes.infos[node].tasks.values()
        if t.status in EVICTABLE and t.job and wanted(jobs[t.job])
    ]


def least_important_first(session: Session, tasks: list[TaskInfo]) -> list[TaskInfo]:
    """Victims in the order they should go: the least important job, then task, first."""

    def key(task: TaskInfo) -> tuple[object, ...]:
        return (session.job_order_key(session.jobs[task.job]), session.task_order_key(task))

    return sorted(tasks, key=key, reverse=True)


def make_room(
    session: Session,
    statement: Statement,
    placer: Placer,
    task: TaskInfo,
    rules: Rules,
    messages: Messages,
) -> bool:
    """Evict, on the node where that costs least, what ``rules`` allow to make ``task``
    fit, then pipeline ``task`` there. False (and nothing done) if no node works — known
    at once when it was so for a task of the same template in the same state. What the
    victims are told comes from ``messages``, asked only when there are victims."""
    alike = _alike(statement, task, rules)
    tried = None if alike is None else (id(task.template), *alike)
    if tried in rules.room.failed:
        return False
    view = placer.view(task)
    shared = eviction_rules.shared_verdicts(statement, task, rules)
    whole = {} if shared is None else shared

    def givers_hold() -> np.ndarray | None:
        return eviction_rules.held_by_what_may_go(statement, task, rules, shared)

    nodes = eviction_rules.nodes_worth_trying(
        session, view.ok, view.scores, task, rules, givers_hold
    )
    plans: dict[int, list[TaskInfo]] = {}
    for node in nodes:
        failed = None if alike is None else (node, *alike)
        if failed in rules.room.failed:
            continue
        victims = _plan(session, statement, task, node, rules, whole)
        if victims is None:
            if failed is not None:
                rules.room.failed.add(failed)
            continue
        plans[node] = victims
        if not victims or len(plans) == PLANS_COMPARED:
            break  # room without evicting anything: nothing beats it
    if not plans:
        if tried is not None:
            rules.room.failed.add(tried)
        return False
    rank = _ranks(session, list(plans), rules)
    best = min(
        (_Plan(_cost(session, task, node, victims, rank, i), node, victims))
        for i, (node, victims) in enumerate(plans.items())
    )
    if best.victims:
        reason, disruption = messages()
        for victim in best.victims:
            statement.evict(victim, reason, disruption)
    statement.pipeline(task, best.node)
    return True


def _alike(statement: Statement, task: TaskInfo, rules: Rules) -> tuple[Hashable, ...] | None:
    """What, besides the node, a plan for ``task`` depends on (None: not known)."""
    chooses = rules.choose_key(task)
    if rules.key is None or chooses is None:
        return None
    state = rules.room.state(statement.signature())
    return (state, task.request.tobytes(), rules.key, chooses)


def wasted_evictions(session: Session, statement: Statement) -> list[TaskInfo]:
    """Victims whose room is still idle once the preemptor's tasks are placed: they
    could have stayed. (Victims taken one by one are spared when not needed, so in
    practice these are members of a whole gang evicted for a smaller preemptor.) A gang
    taken whole because some of its room was needed is not wasted: the rest of its room
    is freed for whoever comes next (whole-group preemption, DESIGN §12)."""
    future = session.nodes.future_idle()
    evicted = statement.evicted()
    idle = [v for v in evicted if _fits(session, v.request, future[v.node])]
    idle_ids = {id(v) for v in idle}
    needed_jobs = {v.job for v in evicted if id(v) not in idle_ids}
    return [v for v in idle if v.job not in needed_jobs]


def _plan(
    session: Session,
    statement: Statement,
    task: TaskInfo,
    node: int,
    rules: Rules,
    whole: dict[Hashable, bool],
) -> list[TaskInfo] | None:
    """The victims that make ``task`` fit on ``node`` (none if it fits already), or None.
    Tried through the statement so that every rule sees the victims taken before;
    everything is rolled back. Candidates of a gang that can lose none of its tasks are
    left out unless the whole gang may go (``whole`` remembers the answer per job), and
    a node whose candidates could not make room anyway is given up before any trial
    eviction. (Nodes where even every task the plugins could offer would not make room
    are not tried at all: ``eviction_rules.nodes_worth_trying``.)"""
    future = session.nodes.future_idle()
    request = task.request
    if _fits(session, request, future[node]):
        return []
    offered = rules.choose(task, evictable_tasks(session, node, rules.wanted))
    may_go = eviction_rules.may_go
    candidates = [t for t in offered if may_go(session, statement, task, t, rules, whole)]
    freed = sum((t.request for t in candidates), np.zeros_like(request))
    if not _fits(session, request, future[node] + freed):
        return None
    order = {id(t): i for i, t in enumerate(least_important_first(session, candidates))}
    mark = statement.mark()
    taken: list[TaskInfo] = []
    remaining = list(candidates)
    while remaining and not _fits(session, request, future[node]):
        victim = min(
            remaining, key=lambda t: (_not_surplus(session, t), rules.first(t), order[id(t)])
        )
        remaining.remove(victim)
        if rules.allowed(victim):
            statement.evict(victim, "")
            taken.append(victim)
    taken += _complete_broken_gangs(session, statement, task, taken, rules)
    victims = None
    if _fits(session, request, future[node]) and not _breaks_a_gang(session, taken):
        victims = _spare_unneeded(session, request, node, taken)
    statement.rollback(mark)
    return victims


def _not_surplus(session: Session, task: TaskInfo) -> bool:
    """False for a task its job can lose and keep its minimums: such go first."""
    return not session.jobs[task.job].can_lose(task)


def _complete_broken_gangs(
    session: Session, statement: Statement, task: TaskInfo, taken: list[TaskInfo], rules: Rules
) -> list[TaskInfo]:
    """If the victims taken leave a gang below its minimum, the rest of it goes too, on
    every node, as far as the plugins (asked of all of it at once) and the rule allow;
    what they keep leaves the gang broken, and the plan fails."""
    more = []
    for job_uid in sorted({t.job for t in taken}):
        job = session.jobs[job_uid]
        if not job.below_minimum():
            continue
        rest = [t for t in job.tasks.values() if t.status in EVICTABLE]
        offered = {id(t) for t in rules.choose(task, rest)}
        for victim in rest:
            if id(victim) in offered and rules.allowed(victim):
                statement.evict(victim, "")
                more.append(victim)
    return more


def _spare_unneeded(
    session: Session, request: np.ndarray, node: int, taken: list[TaskInfo]
) -> list[TaskInfo]:
    """Give back, most important first, the victims the task fits without. A gang
    evicted whole is given back whole or not at all (its room on other nodes does not
    help this task)."""
    room = session.nodes.future_idle()[node].copy()
    units = _units(session, taken)
    spared: set[int] = set()
    for unit in reversed(units):
        need = sum((t.request for t in unit if t.node == node), np.zeros_like(request))
        if _fits(session, request, room - need):
            room = room - need
            spared.update(id(t) for t in unit)
    return [t for t in taken if id(t) not in spared]


def _units(session: Session, taken: list[TaskInfo]) -> list[list[TaskInfo]]:
    """The victims as they can be spared: one by one, except a gang evicted whole,
    which sparing one member would leave broken (then all of them together)."""
    units: list[list[TaskInfo]] = []
    together: dict[str, list[TaskInfo]] = {}
    for task in taken:
        job = session.jobs[task.job]
        whole_gang = job.ready_count == 0 and (job.min_member > 1 or bool(job.min_task_member))
        if not whole_gang:
            units.append([task])
        elif task.job in together:
            together[task.job].append(task)
        else:
            together[task.job] = [task]
            units.append(together[task.job])
    return units


def _ranks(session: Session, nodes: list[int], rules: Rules) -> dict[int, int]:
    """Each candidate's place in the order victims should go (0 goes first)."""
    candidates = [t for node in nodes for t in evictable_tasks(session, node, rules.wanted)]
    ordered = least_important_first(session, candidates)
    by_importance = {id(t): i for i, t in enumerate(ordered)}
    ordered.sort(key=lambda t: (rules.first(t), by_importance[id(t)]))
    return {id(t): i for i, t in enumerate(ordered)}


def _cost(
    session: Session,
    task: TaskInfo,
    node: int,
    victims: list[TaskInfo],
    rank: dict[int, int],
    position: int,
) -> tuple[int, ...]:
    """Lower is better: no gang evicted whole where surplus would do, then no victim's
    room on this node left over (a gang evicted whole for less than it frees; its room
    on other nodes counts as freed, for whoever comes next), then the most important
    victim least important, then fewest victims, then the node order."""
    here = [v for v in victims if v.node == node]
    room = session.nodes.future_idle()[node] - task.request
    for victim in here:
        room = room + victim.request
    left_over = sum(1 for v in here if _fits(session, v.request, room))
    ranks = [rank.get(id(v), len(rank)) for v in victims]
    return (
        _gangs_taken_whole(session, victims),
        left_over,
        max(ranks, default=-1),
        len(victims),
        sum(ranks),
        position,
    )


def _gangs_taken_whole(session: Session, victims: list[TaskInfo]) -> int:
    """Gangs (minMember > 1 or roles) all of whose running tasks are victims."""
    taken: dict[str, int] = {}
    for victim in victims:
        taken[victim.job] = taken.get(victim.job, 0) + 1
    whole = 0
    for uid, count in taken.items():
        job = session.jobs[uid]
        occupying = sum(1 for t in job.tasks.values() if t.status in EVICTABLE)
        if (job.min_member > 1 or job.min_task_member) and count >= occupying:
            whole += 1
    return whole


def _breaks_a_gang(session: Session, taken: list[TaskInfo]) -> bool:
    return any(session.jobs[uid].below_minimum() for uid in {t.job for t in taken})


def _fits(session: Session, request: np.ndarray, room: np.ndarray) -> bool:
    """Does ``request`` fit in ``room``? Not counting pods: max pods is a predicate, as
    in placement (a node whose allocatable has no pod count takes pods all the same).
    (The array's own ``all``: ``np.all``'s dispatch cost as much again, and a search over
    a full cluster asks this of every node.)"""
    return bool((request <= room + EPSILON)[session.room_dims].all())
