"""Topology-aware gang placement (DESIGN §12): the domain a whole gang is placed in.

The scheduler conf names topology levels as node label keys, outermost first
(``topology: {levels: [topology.kubernetes.io/zone, kbatch.io/block, kbatch.io/rack,
kubernetes.io/hostname]}``). A *domain* of a level is the set of nodes that share one
value of its label (a node without the label is in no domain of that level). A
PodGroup asks with an annotation naming a level:

- ``kbatch.io/topology-required: LEVEL``: every pod in one domain of LEVEL, or the
  gang waits (its condition names the closest domains and how many pods they hold);
- ``kbatch.io/topology-preferred: LEVEL``: one domain of LEVEL if one can hold the
  gang, else one domain of the next level out, and so on; spread only when none can.

The domain is chosen for the whole gang before any of its pods is placed — not task
by task — as the *smallest* domain that can hold it (best fit: the one with the least
room for it among those with enough), so that two gangs do not fragment each other's
racks. How many of the gang's pods a domain holds is counted node by node as whole
copies of its largest request that fit (where the pod's predicates pass), summed over
the domain: a lower bound for mixed requests, exact for the uniform gangs of training
jobs. The allocate action then places the gang's pods only on that domain's nodes
(``Placer.choose(..., within=...)``); if the placement fails after all, the next domain
is tried (up to ``DOMAINS_TRIED``).

What is placed already binds the choice: a gang with pods running (its surplus, or a
gang completed after a restart) stays in the domain they are in. A level that the
conf does not list still works for ``required`` (its label is the domain); the conf's
levels give ``preferred`` its way out.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from weakref import WeakKeyDictionary

import numpy as np

from kbatch.operators.scheduler.core.framework.info import (
    NO_NODE,
    PLACED_STATUSES,
    PREFERRED,
    JobInfo,
    NodeSet,
    TaskInfo,
    TopologyRequest,
)
from kbatch.operators.scheduler.core.framework.placement import Choice, Placer
from kbatch.operators.scheduler.core.framework.session import Session

DOMAINS_TRIED = 3
CLOSEST_SHOWN = 3


@dataclass(frozen=True, slots=True)
class Domain:
    level: str
    name: str  # the label's value
    nodes: np.ndarray  # node indices, in node order
    holds: int  # how many of the gang's pods it has room for


@dataclass(frozen=True, slots=True)
class Placement:
    """Where a gang may go: domains to try in turn (none: anywhere), or why it waits."""

    domains: tuple[Domain, ...] = ()
    waiting: str | None = None  # required and no domain can hold it: why, in words


ANYWHERE = Placement()


class Levels:
    """The domains of each level, found once per session from the nodes' labels."""

    def __init__(self, nodes: NodeSet, levels: Sequence[str]) -> None:
        self.nodes = nodes
        self.levels = tuple(levels)
        self._ids: dict[str, tuple[np.ndarray, list[str]]] = {}

    def ids(self, level: str) -> tuple[np.ndarray, list[str]]:
        """Per node, its domain's number at ``level`` (-1: none), and the domains' names."""
        found = self._ids.get(level)
        if found is None:
            values = [info.labels.get(level) for info in self.nodes.infos]
            names = sorted({v for v in values if v is not None})
            number = {name: i for i, name in enumerate(names)}
            ids = np.array([number.get(v, -1) if v is not None else -1 for v in values])
            found = self._ids[level] = (ids.astype(np.int64), names)
        return found

    def outward(self, level: str) -> list[str]:
        """``level`` and then the levels outside it, innermost first."""
        if level not in self.levels:
            return [level]
        return list(reversed(self.levels[: self.levels.index(level) + 1]))


def placement(
    levels: Levels,
    request: TopologyRequest,
    job: JobInfo,
    tasks: list[TaskInfo],
    ok: np.ndarray,
    room: np.ndarray,
    need: int,
) -> Placement:
    """Where ``job`` (its pending ``tasks``, of which ``need`` must be placed) may go.
    ``ok``: the nodes whose predicates its pods pass; ``room``: each node's room for new
    pods (nodes × dims)."""
    per_node = _copies(tasks, ok, room)
    placed = _placed_domain(levels, request, job)
    if placed is not None:
        return Placement((_domain(levels, request.level, placed, per_node),))
    tried_levels = levels.outward(request.level) if request.mode == PREFERRED else [request.level]
    for level in tried_levels:
        fitting = _fitting(levels, level, per_node, need)
        if fitting:
            return Placement(tuple(fitting))
    if request.mode == PREFERRED:
        return ANYWHERE
    return Placement(waiting=_why_not(levels, request.level, per_node, need))


def _copies(tasks: list[TaskInfo], ok: np.ndarray, room: np.ndarray) -> np.ndarray:
    """Per node: how many copies of the largest of the tasks' requests fit in its room."""
    largest = np.max([t.request for t in tasks], axis=0)
    asked = largest > 0
    if not asked.any():
        return np.where(ok, len(tasks), 0)
    copies = np.floor(np.min(np.maximum(room[:, asked], 0) / largest[asked], axis=1) + 1e-9)
    return np.where(ok, copies, 0).astype(np.int64)


def _placed_domain(levels: Levels, request: TopologyRequest, job: JobInfo) -> int | None:
    """The domain at the request's level of the job's placed pods, if they share one."""
    ids, _ = levels.ids(request.level)
    placed = [t.node for t in job.tasks.values() if t.status in PLACED_STATUSES]
    where = {int(ids[node]) for node in placed if node != NO_NODE}
    if len(where) == 1 and -1 not in where:
        return where.pop()
    return None


def _holds(levels: Levels, level: str, per_node: np.ndarray) -> np.ndarray:
    ids, names = levels.ids(level)
    inside = ids >= 0
    return np.bincount(ids[inside], weights=per_node[inside], minlength=len(names)).astype(np.int64)


def _domain(levels: Levels, level: str, number: int, per_node: np.ndarray) -> Domain:
    ids, names = levels.ids(level)
    nodes = np.flatnonzero(ids == number)
    return Domain(level, names[number], nodes, int(per_node[nodes].sum()))


def _fitting(levels: Levels, level: str, per_node: np.ndarray, need: int) -> list[Domain]:
    """The (first ``DOMAINS_TRIED``) domains of ``level`` with room for ``need`` pods,
    the tightest first."""
    holds = _holds(levels, level, per_node)
    _, names = levels.ids(level)
    order = sorted(np.flatnonzero(holds >= need), key=lambda d: (holds[d], names[d]))
    return [_domain(levels, level, int(d), per_node) for d in order[:DOMAINS_TRIED]]


def _why_not(levels: Levels, level: str, per_node: np.ndarray, need: int) -> str:
    """'needs 8 pods in one kbatch.io/rack: the closest are rack-3 (room for 5), ...'."""
    holds = _holds(levels, level, per_node)
    _, names = levels.ids(level)
    if not names:
        return f"needs {need} pods in one {level} domain: no node has the label {level}"
    closest = sorted(range(len(names)), key=lambda d: (-holds[d], names[d]))[:CLOSEST_SHOWN]
    shown = ", ".join(f"{names[d]} (room for {holds[d]})" for d in closest)
    return f"needs {need} pods in one {level} domain: the closest are {shown}"


_LEVELS: "WeakKeyDictionary[Session, Levels]" = WeakKeyDictionary()


def levels_of(session: Session) -> Levels:
    """The session's levels (the conf's), with their domains found once per session."""
    found = _LEVELS.get(session)
    if found is None:
        conf = session.conf.topology
        found = _LEVELS[session] = Levels(session.nodes, conf.levels if conf else ())
    return found


def where(
    session: Session, placer: Placer, job: JobInfo, tasks: list[TaskInfo]
) -> list[np.ndarray | None]:
    """The node sets to try ``job``'s pending ``tasks`` on, in turn (None: every node);
    none at all when it must wait (and the session is told why)."""
    request = job.topology
    if request is None or not tasks:
        return [None]
    ok = np.zeros(len(session.nodes), dtype=bool)
    for template in {id(t.template): t for t in tasks}.values():
        ok |= placer.view(template).ok
    need = 1 if session.job_ready(job) else max(job.min_member - job.ready_count, 1)
    found = placement(levels_of(session), request, job, tasks, ok, session.nodes.future, need)
    if found.waiting is not None:
        session.note_waiting(job, found.waiting)
        return []
    tries: list[np.ndarray | None] = [domain.nodes for domain in found.domains]
    if not tries or request.mode == PREFERRED:
        tries.append(None)  # preferred: spread only when no domain worked
    return tries


def choose(placer: Placer, task: TaskInfo, within: np.ndarray) -> Choice | None:
    """``Placer.choose`` among the nodes ``within`` only: the best with idle room (ties to
    the first by name), else the best where room is being released (pipelined)."""
    view = placer.view(task)
    ranked = view.ranked[within]
    if ranked.size and (np.isnan(ranked).any() or ranked.max() > -np.inf):
        return Choice(int(within[int(np.argmax(ranked))]), pipelined=False)
    later = view.ok[within] & view.fit_future[within]
    if later.any():
        best = int(np.argmax(np.where(later, view.scores[within], -np.inf)))
        return Choice(int(within[best]), pipelined=True)
    return None
