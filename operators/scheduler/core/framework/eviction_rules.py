"""The rules of an eviction (``Rules``: what an action may evict, and in which order),
whether a running task may go for a preemptor (alone, its job keeping its minimums, or
with its whole gang: ``may_go``), and the nodes where what may go could make room at all
(``nodes_worth_trying``): what ``eviction.make_room`` asks before it makes a plan."""

from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from kbatch.operators.scheduler.core.framework.evictable import EVICTABLE, EvictableRoom
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.resources import EPSILON
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement

# (preemptor, candidates on one node) -> the victims the plugins allow
VictimChooser = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]
# (preemptor, candidate) -> may the plugins offer it at all (tiers.TaskFilterFn)
TaskFilter = Callable[[TaskInfo, TaskInfo], bool]


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


def shared_verdicts(
    statement: Statement, task: TaskInfo, rules: Rules
) -> dict[Hashable, bool] | None:
    """Where ``may_go`` keeps its answers (job -> may it go whole), shared by every plan
    of the action while no victim is taken yet (plans are rolled back, so the cluster
    is as it was); None when they are not shared (victims taken, or the rule or the
    plugins do not say what they read): the task then keeps its own."""
    key = rules.choose_key(task)
    verdicts = rules.key if rules.verdict_key is None else rules.verdict_key
    if verdicts is None or key is None or statement.evicted():
        return None
    return rules.room.whole_gangs.setdefault((verdicts, key), {})


# The nodes tried are bounded by what the jobs that may lose anything hold (a job above
# its minimum, or one that may go whole), not by what every candidate holds: a full
# cluster of gangs at their minimum that may not go whole is given up at once, not node
# by node (``Shortcuts.bound_by_what_may_go``; off: no such bound).


def held_by_what_may_go(
    statement: Statement,
    task: TaskInfo,
    rules: Rules,
    whole: dict[Hashable, bool] | None,
) -> np.ndarray | None:
    """(nodes × dims): what the rule's candidates hold of the jobs that could give any of
    it: those above their minimum (their surplus may go, their roles aside) and those
    that may go whole (``may_go``'s verdict, kept in ``whole``, the shared verdicts).
    Any plan's victims are among these, so a node where even all of it would not make
    room fails its plan. Kept by the verdicts' key and the commits so far, as the
    verdicts are; None (no bound) when the verdicts are not shared (``whole`` None)."""
    if whole is None or not statement.session.shortcuts.bound_by_what_may_go:
        return None
    verdicts = whole
    key = ("may go", rules.key, rules.verdict_key, rules.choose_key(task), rules.room.generation)

    def may_give(job: JobInfo) -> bool:
        if not rules.wanted(job):
            return False
        if job.ready_count - 1 >= job.min_member:
            return True
        return may_go_whole(statement, task, job, rules, verdicts)

    return rules.room.held_by(key, may_give, rules.queues)


def may_go(
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
    return may_go_whole(statement, task, job, rules, whole)


def may_go_whole(
    statement: Statement,
    task: TaskInfo,
    job: JobInfo,
    rules: Rules,
    whole: dict[Hashable, bool],
) -> bool:
    """May all of ``job``'s running tasks go for ``task`` (see ``may_go``)? Kept in
    ``whole`` by job."""
    verdict = whole.get(job.uid)
    if verdict is None:
        rest = [t for t in job.tasks.values() if t.status in EVICTABLE]
        offered = {id(t) for t in rules.choose(task, rest)}
        verdict = all(id(t) in offered for t in rest)
        if verdict:
            verdict = allowed_in_turn(statement, rest, rules, whole)
        whole[job.uid] = verdict
    return verdict


def allowed_in_turn(
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


def _fit_with(session: Session, request: np.ndarray, freed: np.ndarray) -> np.ndarray:
    """Per node: would ``request`` fit with ``freed`` (nodes × dims) given back? (As
    ``_fits``, for every node at once.)"""
    room = session.nodes.future_idle() + freed
    return np.all((request <= room + EPSILON)[:, session.room_dims], axis=1)


# Only the nodes where what the plugins could offer for the task (``Rules.held`` for
# the preemptor) could make room are tried, not every node where the rule's candidates
# could: ``eviction._plan`` fails on the others (``Shortcuts.bound_by_offered``).


def nodes_worth_trying(
    session: Session,
    ok: np.ndarray,
    scores: np.ndarray,
    task: TaskInfo,
    rules: Rules,
    givers_hold: Callable[[], np.ndarray | None] = lambda: None,
) -> list[int]:
    """Nodes passing the predicates whose room plus every candidate's that the plugins
    could offer for ``task`` (``Rules.held``), and that belongs to a job that could lose
    any (``givers_hold()``: ``held_by_what_may_go``, if known; asked only when the first
    bound leaves nodes), could hold it: those with room already first, then best score
    first, ties by name. (A node with room already is among them: what the candidates
    hold is never negative.)"""
    nodes = session.nodes
    request = task.request
    future = nodes.future_idle()
    counted = session.room_dims  # see _fits
    held = rules.held(task) if session.shortcuts.bound_by_offered else rules.held()
    worth = np.flatnonzero(ok & _fit_with(session, request, held))
    if not worth.size:
        return []
    also = givers_hold()
    if also is not None:  # both bound what victims could free
        worth = worth[_fit_with(session, request, np.minimum(held, also))[worth]]
        if not worth.size:
            return []
    roomy = np.all((request <= future[worth] + EPSILON)[:, counted], axis=1)
    order = np.lexsort((worth, -scores[worth], ~roomy))
    return worth[order].tolist()
