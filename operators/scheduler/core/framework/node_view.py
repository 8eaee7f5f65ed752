"""A template's answers over all nodes, as the placer keeps them (``placement.Placer``):
the view (which nodes pass its predicates, their scores, where it fits now and once
what is releasing is gone, and the ranks these give), the plan of a run of alike tasks,
a topology domain's ranking, and the best node by the view alone."""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.ranking import (
    RANK,
    Answer,
    Answers,
    Lookahead,
    Ranking,
)


@dataclass(slots=True)
class Plan:
    """The nodes ``choose_alike`` gave a run of tasks, and what they answer afterwards."""

    tasks: Sequence[TaskInfo]
    nodes: list[int]
    after: list[Answer | None]  # each node's answers once its task is there (None: ask)
    seen: int  # len(NodeSet.changed) when planned
    ranking: Ranking  # the ranking that planned: it holds the known nodes at their ranks


@dataclass(slots=True)
class Domain:
    """A template's ranking over one node subset (a topology domain's nodes)."""

    nodes: np.ndarray  # ascending
    inside: np.ndarray  # per node of the cluster: in the domain
    ranking: Ranking = field(default_factory=Ranking)

    def holds(self, within: np.ndarray) -> bool:
        nodes = self.nodes
        return nodes is within or (len(nodes) == len(within) and np.array_equal(nodes, within))


@dataclass(slots=True)
class View:
    """A template's answers over all nodes, kept current by its Placer."""

    version: np.ndarray
    ok: np.ndarray  # predicates pass
    scores: np.ndarray
    fit_idle: np.ndarray
    fit_future: np.ndarray
    ranked: np.ndarray = field(init=False)  # scores where ok and fit_idle, else -inf
    seen: int = 0  # how much of NodeSet.changed the view has taken in
    ranking: Ranking | None = None  # made on first use (see Placer._heap_of)
    lookahead: Lookahead | None = None  # shared by ``ranking`` and ``domain``
    domain: Domain | None = None  # the last domain asked about (Placer._domain_heap_of)
    by_argmax: bool = False  # a NaN rank: argmax's rules (a NaN wins), not the heap's
    plan: Plan | None = None  # the last plan, until the view catches up with it

    def __post_init__(self) -> None:
        self.ranked = np.where(self.ok & self.fit_idle, self.scores, -np.inf)

    def take(self, node: int, answer: Answer) -> None:
        """An answer known already (from the look-ahead) for ``node``."""
        self.ok[node], self.scores[node], self.fit_idle[node], self.fit_future[node] = answer[:4]
        self.ranked[node] = answer[RANK]

    def update(self, idx: np.ndarray, answers: Answers) -> None:
        ok, scores, fit_idle, fit_future = answers
        self.ok[idx] = ok
        self.scores[idx] = scores
        self.fit_idle[idx] = fit_idle
        self.fit_future[idx] = fit_future
        self.ranked[idx] = np.where(ok & fit_idle, scores, -np.inf)


class Choice(NamedTuple):
    node: int
    pipelined: bool  # fits only once the releasing resources there are gone


def best_idle(view: View, within: np.ndarray | None) -> Choice | None:
    """The best node with idle room by the view's ranks alone (ties to the first by name).
    Among all nodes a NaN rank is taken for no room; within a domain it wins, as
    ``np.argmax`` has it (what topology placement always did)."""
    if within is None:
        best = int(np.argmax(view.ranked))
        return Choice(best, pipelined=False) if view.ranked[best] > -np.inf else None
    ranked = view.ranked[within]
    if np.isnan(ranked).any() or ranked.max() > -np.inf:
        return Choice(int(within[int(np.argmax(ranked))]), pipelined=False)
    return None


def best_pipelined(view: View, within: np.ndarray | None) -> list[Choice]:
    """The best node where room is being released (ties to the first by name), if any."""
    ok, fit_future, scores = view.ok, view.fit_future, view.scores
    if within is not None:
        ok, fit_future, scores = ok[within], fit_future[within], scores[within]
    later = ok & fit_future
    if not later.any():
        return []
    best = int(np.argmax(np.where(later, scores, -np.inf)))
    return [Choice(best if within is None else int(within[best]), pipelined=True)]
