"""Where a task can go: predicate results and node scores shared by alike tasks.

Pods of one template get the same answers, so a view is computed once per
template over all nodes (vectorised) and afterwards refreshed only for the
nodes that changed since (a placement, an eviction, a discard), found in the node
set's log of changes. The exception is a task whose answer depends on pods on
*other* nodes — pod (anti-)affinity — which is evaluated afresh.

Nor is the best node an argmax over all nodes per task: a template keeps its best
nodes in a heap (``ranking.Ranking``) and, for them, the answers they will give once
one more of its tasks is allocated there (``ranking.Lookahead``, one vectorised call
for a few hundred nodes). So ``choose_alike`` plans the nodes of a run of alike tasks
(a gang's) at once, with a few heap operations per task, and once they are placed
the view takes the planned nodes' answers from the look-ahead instead of asking the
plugins again. The contract that makes this exact: for a template without pod
(anti-)affinity terms or host ports, what a node answers (the plugins' predicates
and scores, and the room) depends on that node's resource rows alone —
``NodeSet.used``, ``free`` and ``future`` — and on nothing else that changes during a
session. The choices are the argmax's, task by task: same node, same ties (the
first by name).

A topology domain (``within=``: a gang's pods go only to these nodes) gets its own
ranking of the template's nodes there, beside the template's ranking over all nodes,
both kept current from the one view and sharing the look-ahead: a gang placed in a
rack costs heap operations too, not one evaluation per pod.
"""

from collections.abc import Sequence
from functools import partial

import numpy as np

from kbatch.operators.scheduler.core.framework.info import NO_NODE, TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.node_view import Choice as Choice
from kbatch.operators.scheduler.core.framework.node_view import (
    Domain,
    Plan,
    View,
    best_idle,
    best_pipelined,
)
from kbatch.operators.scheduler.core.framework.ranking import (
    Answers,
    Lookahead,
    Ranking,
    heap_size,
)
from kbatch.operators.scheduler.core.framework.resources import EPSILON
from kbatch.operators.scheduler.core.framework.session import Session

# (Choice is imported from here by the actions.)

# Within a domain, the look-ahead covers up to this many of its best nodes (``_breadth``).
DOMAIN_LOOK_AHEAD = 64

# A planned task counts as placed as planned while it has one of these statuses.
_ALLOCATED = (TaskStatus.ALLOCATED, TaskStatus.BINDING)


_NO_NODES = np.zeros(0, dtype=np.int64)


def _answers(session: Session, score: bool, task: TaskInfo, idx: np.ndarray) -> Answers:
    """The template's answers for the nodes ``idx``: predicates, scores, and whether it
    fits now and once what is releasing is gone. Of the session, not of a Placer: a
    look-ahead keeps it, and one holding its Placer would close a cycle (Placer, view,
    look-ahead) left with all it reaches to the cyclic collector."""
    ok, _ = session.predicate(task, idx)
    scores = session.node_scores(task, idx) if score else np.zeros(len(idx))
    nodes, check = session.nodes, session.room_dims
    need = task.request[check] - EPSILON
    fit_idle = (nodes.free.take(idx, axis=0)[:, check] >= need).all(axis=1)
    fit_future = (nodes.future.take(idx, axis=0)[:, check] >= need).all(axis=1)
    return ok, scores, fit_idle, fit_future


class Placer:
    """Chooses nodes for tasks within one action."""

    def __init__(self, session: Session, score: bool = True) -> None:
        self.session = session
        self.nodes = session.nodes
        self.score = score
        self._views: dict[int, View] = {}

    def _evaluate(self, task: TaskInfo, idx: np.ndarray) -> Answers:
        return _answers(self.session, self.score, task, idx)

    def _asker(self, task: TaskInfo) -> "partial[Answers]":
        """``_evaluate`` for ``task``, for a look-ahead to keep (it holds no Placer)."""
        return partial(_answers, self.session, self.score, task)

    def _sensitive(self, task: TaskInfo) -> bool:
        """Do the template's answers on a node change with tasks placed on others (pod
        affinity, topology spread; a PV or a claim a task binds: ``plugins.volume_checks``; a
        device a task's claim takes: ``plugins.device_checks``),
        or with tasks an action plans without placing them (``Session.planned``: host
        ports too)? Then asked afresh."""
        volumes = task.template.volumes
        return (
            task.template.affinity.has_pod_terms
            or bool(task.template.spread)
            or bool(self.session.planned and task.template.host_ports)
            or self.session.anti_affinity_pods > 0
            or (volumes is not None and volumes.binds_claims)
            or (task.template.devices is not None and bool(task.template.devices.requests))
        )

    def _fresh(self, task: TaskInfo) -> View:
        nodes = self.nodes
        view = View(nodes.version.copy(), *self._evaluate(task, nodes.all))
        view.seen = len(nodes.changed)
        return view

    # ----------------------------------------------------------------- keeping views current
    def view(self, task: TaskInfo) -> View:
        """The template's answers over all nodes, as they are now."""
        if self._sensitive(task):
            return self._fresh(task)
        key = id(task.template)
        view = self._views.get(key)
        if view is None:
            view = self._views[key] = self._fresh(task)
        else:
            self._catch_up(task, view)
        return view

    def _catch_up(self, task: TaskInfo, view: View) -> None:
        """Take in what changed since the view last looked: from the plan if its tasks
        were placed as planned and nothing else changed, else from the plugins."""
        plan, view.plan = view.plan, None
        placed = self._placed_as_planned(view, plan)
        if plan is not None and placed is not None:
            self._follow(task, view, plan, placed)
            return
        changed = self._changed_since(view)
        if changed.size:
            view.update(changed, self._evaluate(task, changed))
            view.version[changed] = self.nodes.version[changed]
        moved = changed.tolist()
        if plan is not None:  # its nodes are in the heap at their planned ranks
            moved = sorted(set(moved).union(plan.nodes))
        self._rerank(view, moved)

    def _follow(self, task: TaskInfo, view: View, plan: Plan, placed: int) -> None:
        """The first ``placed`` tasks of ``plan`` were placed as planned, and nothing else
        changed: their nodes answer as the plan says (asked of the plugins where it
        could not tell: a node given a second task)."""
        nodes = self.nodes
        final = dict(zip(plan.nodes[:placed], plan.after[:placed], strict=True))
        version = nodes.version
        unknown = []
        for node, answer in final.items():
            if answer is None:
                unknown.append(node)
            else:
                view.take(node, answer)
                view.version[node] = version[node]
        if unknown:
            idx = np.array(unknown, dtype=np.int64)
            view.update(idx, self._evaluate(task, idx))
            view.version[idx] = version[idx]
        view.seen = len(nodes.changed)
        # The planning heap holds the nodes it knows at their ranks now (the other
        # ranking does not); the others it touched go back at theirs.
        known = {node for node, answer in final.items() if answer is not None}
        self._rerank(view, sorted(set(plan.nodes).difference(known)))
        self._rerank(view, sorted(known), besides=plan.ranking)

    def _placed_as_planned(self, view: View, plan: Plan | None) -> int | None:
        """How many of ``plan``'s tasks were allocated on their planned nodes if, since
        the plan, that is all that changed (None if not)."""
        if plan is None or view.seen != plan.seen:
            return None
        since = self.nodes.changed[plan.seen :]
        placed = len(since)
        if placed > len(plan.nodes) or since != plan.nodes[:placed]:
            return None
        for task, node in zip(plan.tasks, since, strict=False):
            if task.node != node or task.status not in _ALLOCATED:
                return None
        return placed

    def _changed_since(self, view: View) -> np.ndarray:
        """The nodes that changed since ``view`` last looked."""
        nodes = self.nodes
        log = nodes.changed
        start, view.seen = view.seen, len(log)
        if start == view.seen:
            return _NO_NODES
        if view.seen - start > len(nodes) // 8:  # many changes: compare every version
            return np.flatnonzero(view.version != nodes.version)
        touched = np.array(sorted(set(log[start:])), dtype=np.int64)
        return touched[view.version[touched] != nodes.version[touched]]

    def _rerank(self, view: View, moved: list[int], besides: Ranking | None = None) -> None:
        """Put ``moved`` nodes in the heaps (but ``besides``) at their ranks in the view:
        the template's, and its domain's for the nodes in that domain."""
        if (view.ranking is None and view.domain is None) or not moved:
            return
        ranks = view.ranked[moved].tolist()
        if any(rank != rank for rank in ranks):  # NaN
            view.by_argmax, view.ranking, view.lookahead, view.domain = True, None, None, None
            return
        if view.ranking is not None and view.ranking is not besides:
            for node, rank in zip(moved, ranks, strict=True):
                view.ranking.moved(node, rank)
        domain = view.domain
        if domain is not None and domain.ranking is not besides:
            inside = domain.inside[moved].tolist()
            for node, rank, there in zip(moved, ranks, inside, strict=True):
                if there:
                    domain.ranking.moved(node, rank)

    # ----------------------------------------------------------------- choosing
    def _heap_of(
        self, task: TaskInfo, view: View, tasks: int, more_alike: bool = False
    ) -> Ranking | None:
        """The template's heap of best nodes, filled (for ``tasks`` to place); None where
        the argmax decides (pod terms: the view is afresh each time; or NaN ranks). The
        look-ahead is worked out at the fill for more than one task, or when alike tasks
        may follow one call at a time (``more_alike``); for one task alone, its node is
        asked about once placed, if the view is asked again at all (most single-pod jobs
        are the one task of their template: the answers for its best nodes went unread).
        Nor is a heap made for one task alone: the argmax chooses the same node (ties to
        the first by name); a heap is made when a run of more asks."""
        if view.ranking is None and tasks == 1 and not more_alike:
            return None
        if view.ranking is None and not self._sensitive(task) and not view.by_argmax:
            view.by_argmax = bool(np.isnan(view.ranked).any())
            view.ranking = None if view.by_argmax else Ranking()
        ranking = view.ranking
        if ranking is not None and ranking.best() == -1:
            held = ranking.fill(view.ranked, size=heap_size(tasks))
            view.lookahead = None
            if not task.template.host_ports:  # a port taken is not in the rows
                view.lookahead = Lookahead(task.request, self._asker(task))
                if tasks > 1 or more_alike:
                    view.lookahead.add(self.nodes, held)
        return ranking

    def _domain_heap_of(
        self, task: TaskInfo, view: View, within: np.ndarray, tasks: int
    ) -> Ranking | None:
        """The template's heap of best nodes among ``within``, filled; None where the
        argmax decides. One domain is kept per template (a gang's pods are placed in one
        after another); another replaces it. Its look-ahead answers are worked out when
        planning (``_look_ahead``), for as many nodes as there are tasks."""
        if self._sensitive(task) or view.by_argmax:
            return None
        domain = view.domain
        if domain is None or not domain.holds(within):
            if np.isnan(view.ranked[within]).any():
                return None
            inside = np.zeros(len(self.nodes), dtype=bool)
            inside[within] = True
            domain = view.domain = Domain(within, inside)
        ranking = domain.ranking
        if ranking.best() == -1:
            ranking.fill(view.ranked, among=within, size=heap_size(tasks))
        if view.lookahead is None and not task.template.host_ports:
            view.lookahead = Lookahead(task.request, self._asker(task))
        return ranking

    def _look_ahead(self, view: View, ranking: Ranking, count: int) -> None:
        """Before planning ``count`` tasks: if the best node's answers after one more
        task are not known (it changed since the heap was filled), work them out for
        the nodes at the top of the heap, in one call."""
        best = ranking.best()
        lookahead = view.lookahead
        if lookahead is None or best is None or best == -1:
            return
        if lookahead.after(best, int(self.nodes.version[best])) is None:
            lookahead.add(self.nodes, ranking.leaders(count))

    def choose_alike(
        self,
        tasks: Sequence[TaskInfo],
        allow_pipeline: bool = True,
        within: np.ndarray | None = None,
        more_alike: bool = False,
    ) -> list[Choice]:
        """Nodes for the first tasks of ``tasks`` that are alike (the first one's template,
        no room kept for them), placed one after another, each allocated where chosen:
        what ``choose`` would answer task by task. As far as known ahead — at least the
        first task's choice (which may be pipelined); [] if no node takes it. The
        choices hold only if nothing else changes the nodes before they are placed.
        ``within``: among these nodes only (ascending node indices, e.g. a domain's).
        ``more_alike``: tasks alike to these may follow, one call at a time."""
        if not len(self.nodes) or not tasks or (within is not None and not len(within)):
            return []
        first = tasks[0]
        view = self.view(first)
        if within is None:
            ranking = self._heap_of(first, view, len(tasks), more_alike)
        else:
            ranking = self._domain_heap_of(first, view, within, len(tasks))
        if ranking is None:
            choice = best_idle(view, within)
            if choice is not None:
                return [choice]
        else:
            # A plan gives each node one task at most: in a domain, no more than its nodes.
            most = len(tasks) if within is None else min(len(tasks), len(within))
            count = 1
            while count < most and _alike(tasks[count], first):
                count += 1
            if first.nominated != NO_NODE:  # placing it gives back the room kept for it
                count = 1
            if count > 1:
                self._look_ahead(view, ranking, _breadth(count, within))
            nodes, after = ranking.plan(view.lookahead, self.nodes.version, count)
            if nodes:
                view.plan = Plan(tasks[: len(nodes)], nodes, after, view.seen, ranking)
                return [Choice(node, pipelined=False) for node in nodes]
        if allow_pipeline:
            return best_pipelined(view, within)
        return []

    def choose(
        self, task: TaskInfo, allow_pipeline: bool = True, within: np.ndarray | None = None
    ) -> Choice | None:
        """The best node for ``task`` (ties to the first by name), among ``within`` only
        if given, or None. Alike tasks may follow, asked one at a time."""
        choices = self.choose_alike([task], allow_pipeline, within, more_alike=True)
        return choices[0] if choices else None

    def first_fit(self, task: TaskInfo) -> int:
        """The first node by name that passes the predicates (backfill), or NO_NODE."""
        if not len(self.nodes):
            return NO_NODE
        view = self.view(task)
        candidates = np.flatnonzero(view.ok & view.fit_idle)
        return int(candidates[0]) if candidates.size else NO_NODE

    def explain(self, task: TaskInfo) -> dict[str, int]:
        """Why no node takes ``task``: reason -> number of nodes (Kubernetes' FitError)."""
        nodes = self.nodes
        _, failures = self.session.predicate(task, nodes.all)
        reasons: dict[str, int] = {}
        failed_any = np.zeros(len(nodes), dtype=bool)
        for reason, failed in failures:
            if failed.any():
                reasons[reason] = reasons.get(reason, 0) + int(failed.sum())
                failed_any |= failed
        future = nodes.future_idle()
        for dim, name in enumerate(self.session.dims.names):
            if not self.session.room_dims[dim] or task.request[dim] <= EPSILON:
                continue
            short = (task.request[dim] > future[:, dim] + EPSILON) & ~failed_any
            if short.any():
                reasons[f"Insufficient {name}"] = int(short.sum())
        if not reasons:
            reasons["node(s) could not take the task"] = len(nodes)
        return reasons


def _breadth(count: int, within: np.ndarray | None) -> int:
    """How many of the best nodes to look ahead for, planning ``count`` tasks: as many,
    and in a domain all its nodes (up to ``DOMAIN_LOOK_AHEAD``). The next gang is most
    likely placed in the same domain (the tightest that holds it), and the nodes this
    one leaves untouched keep their answers for it: one call for a small domain's
    nodes costs hardly more than for a few, and calls are what cost."""
    if within is None:
        return count
    return max(count, min(len(within), DOMAIN_LOOK_AHEAD))


def _alike(task: TaskInfo, first: TaskInfo) -> bool:
    return task.template is first.template and task.nominated == NO_NODE
