"""Where a task can go: predicate results and node scores shared by alike tasks.

Pods of one template get the same answers, so a view is computed once per
template over all nodes (vectorised) and afterwards refreshed only for the
nodes whose version changed since (a placement, an eviction, a discard). The
exception is a task whose answer depends on pods on *other* nodes — pod
(anti-)affinity — which is evaluated afresh.
"""

from dataclasses import dataclass, field

import numpy as np

from kbatch.operators.scheduler.core.framework.info import NO_NODE, TaskInfo
from kbatch.operators.scheduler.core.framework.resources import EPSILON
from kbatch.operators.scheduler.core.framework.session import Session


@dataclass(slots=True)
class _View:
    version: np.ndarray
    ok: np.ndarray  # predicates pass
    scores: np.ndarray
    fit_idle: np.ndarray
    fit_future: np.ndarray
    ranked: np.ndarray = field(init=False)  # scores where ok and fit_idle, else -inf

    def __post_init__(self) -> None:
        self.ranked = np.where(self.ok & self.fit_idle, self.scores, -np.inf)


@dataclass(frozen=True, slots=True)
class Choice:
    node: int
    pipelined: bool  # fits only once the releasing resources there are gone


class Placer:
    """Chooses nodes for tasks within one action."""

    def __init__(self, session: Session, score: bool = True) -> None:
        self.session = session
        self.nodes = session.nodes
        self.score = score
        self._views: dict[int, _View] = {}
        self._check = session.room_dims

    def _fits(self, request: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        need = request[self._check] - EPSILON
        nodes = self.nodes
        return (
            np.all(nodes.free[idx][:, self._check] >= need, axis=1),
            np.all(nodes.future[idx][:, self._check] >= need, axis=1),
        )

    def _evaluate(self, task: TaskInfo, idx: np.ndarray) -> tuple[np.ndarray, ...]:
        ok, _ = self.session.predicate(task, idx)
        scores = self.session.node_scores(task, idx) if self.score else np.zeros(len(idx))
        fit_idle, fit_future = self._fits(task.request, idx)
        return ok, scores, fit_idle, fit_future

    def _sensitive(self, task: TaskInfo) -> bool:
        return task.template.affinity.has_pod_terms or self.session.anti_affinity_pods > 0

    def view(self, task: TaskInfo) -> _View:
        nodes = self.nodes
        if self._sensitive(task):
            return _View(nodes.version.copy(), *self._evaluate(task, nodes.all))
        key = id(task.template)
        view = self._views.get(key)
        if view is None:
            view = _View(nodes.version.copy(), *self._evaluate(task, nodes.all))
            self._views[key] = view
            return view
        changed = np.flatnonzero(view.version != nodes.version)
        if changed.size:
            ok, scores, fit_idle, fit_future = self._evaluate(task, changed)
            view.ok[changed] = ok
            view.scores[changed] = scores
            view.fit_idle[changed] = fit_idle
            view.fit_future[changed] = fit_future
            view.ranked[changed] = np.where(ok & fit_idle, scores, -np.inf)
            view.version[changed] = nodes.version[changed]
        return view

    def choose(self, task: TaskInfo, allow_pipeline: bool = True) -> Choice | None:
        """The best node for ``task`` (ties to the first by name), or None."""
        if not len(self.nodes):
            return None
        view = self.view(task)
        best = int(np.argmax(view.ranked))
        if view.ranked[best] > -np.inf:
            return Choice(best, pipelined=False)
        if allow_pipeline:
            candidates = view.ok & view.fit_future
            if candidates.any():
                return Choice(int(np.argmax(np.where(candidates, view.scores, -np.inf))), True)
        return None

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
