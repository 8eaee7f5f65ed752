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
(``Placer.choose_alike(..., within=...)``, as fast as anywhere: a ranking of the domain's
nodes); if the placement fails after all, the next domain is tried (up to
``DOMAINS_TRIED``).

What is placed already binds the choice: a gang with pods running (its surplus, or a
gang completed after a restart) stays in the domain they are in. A level that the
conf does not list still works for ``required`` (its label is the domain); the conf's
levels give ``preferred`` its way out.
"""

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from weakref import WeakKeyDictionary

import numpy as np

from kbatch.api.quantity import format_quantity
from kbatch.operators.scheduler.core.framework.info import (
    NO_NODE,
    PLACED_STATUSES,
    PREFERRED,
    REQUIRED,
    JobInfo,
    TaskInfo,
    TopologyRequest,
)
from kbatch.operators.scheduler.core.framework.nodes import NodeSet
from kbatch.operators.scheduler.core.framework.placement import Placer
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


@dataclass(slots=True)
class _Copies:
    """``Levels.copies``' answers for one request, and what they were worked out from."""

    version: np.ndarray  # the nodes' versions then
    ok: np.ndarray
    per_node: np.ndarray
    holds: dict[str, np.ndarray] = field(default_factory=dict)  # level -> per domain


class Levels:
    """The domains of each level, found once per session from the nodes' labels; and
    how many copies of a request each node holds, kept from one gang to the next."""

    def __init__(self, nodes: NodeSet, levels: Sequence[str]) -> None:
        self.nodes = nodes
        self.levels = tuple(levels)
        self._ids: dict[str, tuple[np.ndarray, list[str]]] = {}
        self._members: dict[str, list[np.ndarray]] = {}
        self._copies: dict[bytes, _Copies] = {}  # by request
        self._sizes: dict[str, np.ndarray] = {}

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

    def sizes(self, level: str) -> np.ndarray:
        """Per domain of ``level`` (by number), its nodes' allocatable summed (domains ×
        dims): what it holds when empty. Allocatable does not change in a session."""
        found = self._sizes.get(level)
        if found is None:
            ids, names = self.ids(level)
            inside = ids >= 0
            found = np.zeros((len(names), self.nodes.allocatable.shape[1]))
            np.add.at(found, ids[inside], self.nodes.allocatable[inside])
            self._sizes[level] = found
        return found

    def members(self, level: str) -> list[np.ndarray]:
        """Per domain of ``level`` (by number), its nodes in node order."""
        found = self._members.get(level)
        if found is None:
            ids, names = self.ids(level)
            order = np.argsort(ids, kind="stable")  # by domain, then by node
            bounds = np.searchsorted(ids[order], np.arange(len(names) + 1))
            found = self._members[level] = [order[a:b] for a, b in itertools.pairwise(bounds)]
        return found

    def copies(self, largest: np.ndarray, ok: np.ndarray) -> np.ndarray:
        """Per node: how many copies of ``largest`` fit in its room for new pods, where
        ``ok`` (0 elsewhere). Worked out again only for the nodes that changed (their
        version, or ``ok``) since this request was last asked about: a gang placed
        changes a few nodes, and every gang asks."""
        nodes = self.nodes
        key = largest.tobytes()
        kept = self._copies.get(key)
        if kept is None:
            per_node = _copies(largest, ok, nodes.future)
            kept = self._copies[key] = _Copies(nodes.version.copy(), ok.copy(), per_node)
            return per_node
        stale = np.flatnonzero((kept.version != nodes.version) | (kept.ok != ok))
        if stale.size:
            fresh = _copies(largest, ok[stale], nodes.future[stale])
            more = fresh - kept.per_node[stale]
            for level, holds in kept.holds.items():
                domains = self.ids(level)[0][stale]
                inside = domains >= 0
                np.add.at(holds, domains[inside], more[inside])
            kept.per_node[stale] = fresh
            kept.version[stale] = nodes.version[stale]
            kept.ok[stale] = ok[stale]
        return kept.per_node

    def holds(self, level: str, per_node: np.ndarray) -> np.ndarray:
        """Per domain of ``level`` (by number): how many pods it holds, the sum of
        ``per_node`` over its nodes — kept up to date along with ``copies``' answers."""
        kept = next((k for k in self._copies.values() if k.per_node is per_node), None)
        if kept is not None and level in kept.holds:
            return kept.holds[level]
        ids, names = self.ids(level)
        inside = ids >= 0
        weights = per_node[inside]
        holds = np.bincount(ids[inside], weights=weights, minlength=len(names)).astype(np.int64)
        if kept is not None:
            kept.holds[level] = holds
        return holds

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
    need: int,
) -> Placement:
    """Where ``job`` (its pending ``tasks``, of which ``need`` must be placed) may go.
    ``ok``: the nodes whose predicates its pods pass."""
    per_node = _per_node(levels, tasks, ok)
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


def _one_per_template(tasks: list[TaskInfo]) -> list[TaskInfo]:
    """The first of ``tasks`` of each template (a gang's are mostly of one)."""
    first = tasks[0].template
    if all(task.template is first for task in tasks):
        return tasks[:1]
    return list({id(t.template): t for t in tasks}.values())


def _per_node(levels: Levels, tasks: list[TaskInfo], ok: np.ndarray) -> np.ndarray:
    """Per node: how many copies of the largest of the tasks' requests fit in its room."""
    alike = _one_per_template(tasks)
    largest = alike[0].request if len(alike) == 1 else np.max([t.request for t in alike], axis=0)
    if not (largest > 0).any():  # asking for nothing: all fit where the predicates pass
        return np.where(ok, len(tasks), 0)
    return levels.copies(largest, ok)


def _copies(largest: np.ndarray, ok: np.ndarray, room: np.ndarray) -> np.ndarray:
    """Per node (of ``room``'s rows): how many copies of ``largest`` fit in its room."""
    asked = largest > 0
    copies = np.floor(np.min(np.maximum(room[:, asked], 0) / largest[asked], axis=1) + 1e-9)
    return np.where(ok, copies, 0).astype(np.int64)


def _placed_domain(levels: Levels, request: TopologyRequest, job: JobInfo) -> int | None:
    """The domain at the request's level of the job's placed pods, if they share one."""
    if not job.count(*PLACED_STATUSES):
        return None
    ids, _ = levels.ids(request.level)
    placed = [t.node for t in job.tasks.values() if t.status in PLACED_STATUSES]
    where = {int(ids[node]) for node in placed if node != NO_NODE}
    if len(where) == 1 and -1 not in where:
        return where.pop()
    return None


def _domain(levels: Levels, level: str, number: int, per_node: np.ndarray) -> Domain:
    _, names = levels.ids(level)
    nodes = levels.members(level)[number]
    return Domain(level, names[number], nodes, int(per_node[nodes].sum()))


def _fitting(levels: Levels, level: str, per_node: np.ndarray, need: int) -> list[Domain]:
    """The (first ``DOMAINS_TRIED``) domains of ``level`` with room for ``need`` pods,
    the tightest first."""
    holds = levels.holds(level, per_node)
    fitting = np.flatnonzero(holds >= need)
    # Domains are numbered in the order of their names: ties go to the first by name.
    order = fitting[np.lexsort((fitting, holds[fitting]))][:DOMAINS_TRIED]
    _, names = levels.ids(level)
    members = levels.members(level)
    return [Domain(level, names[d], members[d], int(holds[d])) for d in order.tolist()]


def _why_not(levels: Levels, level: str, per_node: np.ndarray, need: int) -> str:
    """'needs 8 pods in one kbatch.io/rack: the closest are rack-3 (room for 5), ...'."""
    holds = levels.holds(level, per_node)
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


def never_fits(session: Session, job: JobInfo) -> str | None:
    """Why ``job``, which requires one domain of a level, can never run: its
    minResources exceed what every domain of that level has in all (its nodes'
    allocatable summed), e.g. 'minResources cpu 12 fit in no kbatch.io/rack domain: the
    largest has cpu 8'; None when some domain is large enough, or nothing is required.
    Enqueue refuses such a gang rather than promise it room it cannot use."""
    request, need = job.topology, job.min_resources
    if request is None or request.mode != REQUIRED or need is None:
        return None
    levels = levels_of(session)
    _, names = levels.ids(request.level)
    totals = levels.sizes(request.level)
    counted = np.flatnonzero(session.room_dims & (need > 0))
    if not names:
        return f"no node has the label {request.level}"
    if not counted.size:
        return None
    # How many times each domain holds the gang's minimum, in its scarcest resource.
    times = (totals[:, counted] / need[counted]).min(axis=1)
    if times.max() + 1e-9 >= 1.0:
        return None
    largest = totals[int(np.argmax(times))]
    dims = session.dims.names
    asked = ", ".join(f"{dims[i]} {format_quantity(dims[i], need[i])}" for i in counted)
    has = ", ".join(f"{dims[i]} {format_quantity(dims[i], largest[i])}" for i in counted)
    return f"minResources {asked} fit in no {request.level} domain: the largest has {has}"


def where(
    session: Session, placer: Placer, job: JobInfo, tasks: list[TaskInfo]
) -> list[np.ndarray | None]:
    """The node sets to try ``job``'s pending ``tasks`` on, in turn (None: every node);
    none at all when it must wait (and the session is given why)."""
    request = job.topology
    if request is None or not tasks:
        return [None]
    alike = _one_per_template(tasks)
    ok = placer.view(alike[0]).ok
    if len(alike) > 1:
        ok = ok.copy()
        for task in alike[1:]:
            ok |= placer.view(task).ok
    need = 1 if session.job_ready(job) else max(job.min_member - job.ready_count, 1)
    found = placement(levels_of(session), request, job, tasks, ok, need)
    if found.waiting is not None:
        session.note_waiting(job, found.waiting)
        return []
    tries: list[np.ndarray | None] = [domain.nodes for domain in found.domains]
    if not tries or request.mode == PREFERRED:
        tries.append(None)  # preferred: spread only when no domain worked
    return tries
