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

from kbatch.operators.scheduler.core.framework.evictable import EVICTABLE, EvictableRoom
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.placement import Placer
from kbatch.operators.scheduler.core.framework.resources import EPSILON
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement

# (preemptor, candidates on one node) -> the victims the plugins allow
VictimChooser = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]
# (preemptor, candidate) -> may the plugins offer it at all (tiers.TaskFilterFn)
TaskFilter = Callable[[TaskInfo, TaskInfo], bool]
# How many nodes that work are compared before the best of them is taken (in node
# order, roomiest and best scored first), so that a big full cluster stays cheap.
PLANS_COMPARED = 8


def _always(_: TaskInfo) -> bool:
    return True


def _no_preference(_: TaskInfo) -> float:
    return 0.0


@dataclass(frozen=True, slots=True)
class Rules:
    """What an action may evict, and in which order.

    - ``room``: the action's index of evictable tasks;
    - ``key``: what tells this rule's ``wanted``, ``allowed`` and ``first`` apart from
      those of other rules alike (None: nothing; its failed plans are not reused);
    - ``wanted``: may the running tasks of this job be candidates at all? (asked of
      jobs, once per rule: which jobs qualify does not change task by task);
    - ``choose``: the plugins' say (``preemptable`` / ``reclaimable``), and
      ``choose_key`` what it reads of the preemptor (``Session.preemptable_key``);
    - ``allowed``: may this victim still go, given the victims already taken
      (asked again before each one, with the session as it is then);
    - ``first``: victims with a lower value go first (asked again before each
      one, so it can follow shares as they change); ties go to the least
      important victim;
    - ``queues``: the queues of the jobs ``wanted`` may accept (None: any);
    - ``keeps``: a test each victim ``choose`` offers passes (``Session.
      preemptable_filter``; None: none known), to bound the room victims can free;
    - ``verdict_key``: what tells ``choose`` and ``allowed`` apart from those of other
      rules (None: ``key``), so that rules that differ only in ``wanted`` share what
      they learn of whole gangs;
    - ``allowed_key``: what ``allowed`` reads of a victim (None: anything, or not
      known): with the victims before it alike by this key, victims alike by it are
      allowed alike, so gangs whose members are alike get one answer.
    """

    room: EvictableRoom
    key: Hashable
    wanted: Callable[[JobInfo], bool]
    choose: VictimChooser
    choose_key: Callable[[TaskInfo], Hashable]
    allowed: Callable[[TaskInfo], bool] = _always
    first: Callable[[TaskInfo], float] = _no_preference
    queues: frozenset[str] | None = None
    keeps: TaskFilter | None = None
    verdict_key: Hashable = None
    allowed_key: Callable[[TaskInfo], Hashable] | None = None

    def held(self, preemptor: TaskInfo | None = None) -> np.ndarray:
        """(nodes × dims): what this rule's candidates hold, on every node — for
        ``preemptor``, those that pass ``keeps`` (the room its victims could free)."""
        if preemptor is None or self.keeps is None:
            return self.room.held_by(self.key, self.wanted, self.queues)
        chooses = self.choose_key(preemptor)
        key = None if self.key is None or chooses is None else ("kept", self.key, chooses)
        keeps, test = self.keeps, preemptor

        def kept(task: TaskInfo) -> bool:
            return keeps(test, task)

        return self.room.held_by(key, self.wanted, self.queues, kept)


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
    reason: str,
) -> bool:
    """Evict, on the node where that costs least, what ``rules`` allow to make ``task``
    fit, then pipeline ``task`` there. False (and nothing done) if no node works — known
    at once when it was so for a task of the same template in the same state."""
    alike = _alike(statement, task, rules)
    tried = None if alike is None else (id(task.template), *alike)
    if tried in rules.room.failed:
        return False
    view = placer.view(task)
    shared = _shared_verdicts(statement, task, rules)
    whole = {} if shared is None else shared

    def may_go() -> np.ndarray | None:
        return _held_by_what_may_go(session, statement, task, rules, whole, shared is not None)

    nodes = _nodes_worth_trying(session, view.ok, view.scores, task, rules, may_go)
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
    for victim in best.victims:
        statement.evict(victim, reason)
    statement.pipeline(task, best.node)
    return True


def _shared_verdicts(
    statement: Statement, task: TaskInfo, rules: Rules
) -> dict[Hashable, bool] | None:
    """Where ``_may_go`` keeps its answers (job -> may it go whole), shared by every plan
    of the action while no victim is taken yet (plans are rolled back, so the cluster
    is as it was); None when they are not shared (victims taken, or the rule or the
    plugins do not say what they read): the task then keeps its own."""
    key = rules.choose_key(task)
    verdicts = rules.key if rules.verdict_key is None else rules.verdict_key
    if verdicts is None or key is None or statement.evicted():
        return None
    return rules.room.whole_gangs.setdefault((verdicts, key), {})


# Bound the nodes tried by what the jobs that may lose anything hold (a job above its
# minimum, or one that may go whole), not by what every candidate holds: a full cluster
# of gangs at their minimum that may not go whole is given up at once, not node by node.
# A switch for the tests that compare both.
BOUND_BY_WHAT_MAY_GO = True


def _held_by_what_may_go(
    session: Session,
    statement: Statement,
    task: TaskInfo,
    rules: Rules,
    whole: dict[Hashable, bool],
    shared: bool,
) -> np.ndarray | None:
    """(nodes × dims): what the rule's candidates hold of the jobs that could give any of
    it: those above their minimum (their surplus may go, their roles aside) and those
    that may go whole (``_may_go``'s verdict, kept in ``whole``). Any plan's victims are
    among these, so a node where even all of it would not make room fails its plan.
    Kept by the verdicts' key and the commits so far, as the verdicts are; None (no bound)
    when the verdicts are not shared."""
    if not BOUND_BY_WHAT_MAY_GO or not shared:
        return None
    key = ("may go", rules.key, rules.verdict_key, rules.choose_key(task), rules.room.generation)

    def may_give(job: JobInfo) -> bool:
        if not rules.wanted(job):
            return False
        if job.ready_count - 1 >= job.min_member:
            return True
        return _may_go_whole(statement, task, job, rules, whole)

    return rules.room.held_by(key, may_give, rules.queues)


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
    are not tried at all: ``_nodes_worth_trying``.)"""
    future = session.nodes.future_idle()
    request = task.request
    if _fits(session, request, future[node]):
        return []
    offered = rules.choose(task, evictable_tasks(session, node, rules.wanted))
    candidates = [t for t in offered if _may_go(session, statement, task, t, rules, whole)]
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


def _may_go(
    session: Session,
    statement: Statement,
    task: TaskInfo,
    victim: TaskInfo,
    rules: Rules,
    whole: dict[Hashable, bool],
) -> bool:
    """May ``victim`` be a candidate: its job can lose it and keep its minimums, or the
    whole of its job may go — the plugins offer all of it and the rule allows each in
    turn, with nothing else taken (more victims only allow less). Asked once per job,
    through the statement, rolled back."""
    job = session.jobs[victim.job]
    if job.can_lose(victim):
        return True
    return _may_go_whole(statement, task, job, rules, whole)


def _may_go_whole(
    statement: Statement,
    task: TaskInfo,
    job: JobInfo,
    rules: Rules,
    whole: dict[Hashable, bool],
) -> bool:
    """May all of ``job``'s running tasks go for ``task`` (see ``_may_go``)? Kept in
    ``whole`` by job."""
    verdict = whole.get(job.uid)
    if verdict is None:
        rest = [t for t in job.tasks.values() if t.status in EVICTABLE]
        offered = {id(t) for t in rules.choose(task, rest)}
        verdict = all(id(t) in offered for t in rest)
        if verdict:
            verdict = _allowed_in_turn(statement, rest, rules, whole)
        whole[job.uid] = verdict
    return verdict


def _allowed_in_turn(
    statement: Statement, members: list[TaskInfo], rules: Rules, whole: dict[Hashable, bool]
) -> bool:
    """Does the rule allow each of ``members`` in turn, the ones before it taken? Asked
    through the statement, rolled back; kept in ``whole`` by what ``allowed`` reads of
    them (``allowed_key``), so that a gang alike to one asked before costs nothing."""
    keys = None if rules.allowed_key is None else tuple(map(rules.allowed_key, members))
    alike = None if keys is None or None in keys else ("members", keys)
    known = whole.get(alike) if alike is not None else None
    if known is not None:
        return known
    allowed = True
    mark = statement.mark()
    for member in members:
        if not rules.allowed(member):
            allowed = False
            break
        statement.evict(member, "")
    statement.rollback(mark)
    if alike is not None:
        whole[alike] = allowed
    return allowed


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


def _fit_with(session: Session, request: np.ndarray, freed: np.ndarray) -> np.ndarray:
    """Per node: would ``request`` fit with ``freed`` (nodes × dims) given back? (As
    ``_fits``, for every node at once.)"""
    room = session.nodes.future_idle() + freed
    return np.all((request <= room + EPSILON)[:, session.room_dims], axis=1)


# Try only the nodes where what the plugins could offer for the task (``Rules.held``
# for the preemptor) could make room, not every node where the rule's candidates could:
# ``_plan`` fails on the others. A switch for the tests that compare both.
BOUND_BY_OFFERED = True


def _nodes_worth_trying(
    session: Session,
    ok: np.ndarray,
    scores: np.ndarray,
    task: TaskInfo,
    rules: Rules,
    may_go: Callable[[], np.ndarray | None] = lambda: None,
) -> list[int]:
    """Nodes passing the predicates whose room plus every candidate's that the plugins
    could offer for ``task`` (``Rules.held``), and that belongs to a job that could lose
    any (``may_go()``, if known; asked only of nodes the first bound leaves), could hold
    it: those with room already first, then best score first, ties by name. (A node with
    room already is among them: what the candidates hold is never negative.)"""
    nodes = session.nodes
    request = task.request
    future = nodes.future_idle()
    counted = session.room_dims  # see _fits
    held = rules.held(task) if BOUND_BY_OFFERED else rules.held()
    worth = np.flatnonzero(ok & _fit_with(session, request, held))
    if not worth.size:
        return []
    also = may_go()
    if also is not None:  # both bound what victims could free
        worth = worth[_fit_with(session, request, np.minimum(held, also))[worth]]
        if not worth.size:
            return []
    roomy = np.all((request <= future[worth] + EPSILON)[:, counted], axis=1)
    order = np.lexsort((worth, -scores[worth], ~roomy))
    return worth[order].tolist()
