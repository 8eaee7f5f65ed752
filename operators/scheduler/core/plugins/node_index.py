"""Numpy indexes of the nodes' static state: labels, taints, conditions.

Labels, taints and conditions do not change during a session, so whatever is
computed from them (a node selector's mask, the taints a set of tolerations
leaves untolerated) is computed once over all nodes and cached by value; a
predicate or a score then only indexes the result with the nodes it is asked
about (DESIGN §10). One index per session, shared by the plugins that need it —
and by the sessions that follow while their nodes say the same (``of``): the index
holds its own copy of what it was made of, and each session's nodes are compared
with it by value.
"""

import re
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

from kbatch.operators.scheduler.core.framework.kept import KeptAcrossSessions
from kbatch.operators.scheduler.core.framework.nodes import NodeSet
from kbatch.operators.scheduler.core.framework.podspec import (
    NodeSelectorTerm,
    Operator,
    Requirement,
    Taint,
    Toleration,
)
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts

NO_SCHEDULE_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NODE_NAME_FIELD = "metadata.name"
_INTEGER = re.compile(r"[+-]?[0-9]+")
_SET_OPERATORS = (Operator.IN, Operator.NOT_IN)

# The index last made is kept by the scheduler (``Session.kept``): a session whose nodes
# say the same (``static_state``, compared by value with the index's own copy) takes it
# over. Sessions follow one another, and most change no node's labels, taints or
# conditions (``Shortcuts.node_index_across_sessions``; ``node_index_by_version`` off:
# compared by value even when the node sets' maker says they are the same).
# How many masks by value (selectors and terms) an index kept across sessions holds.
MASKS_KEPT = 1024


@dataclass(frozen=True, slots=True)
class LabelColumn:
    """One label key over all nodes: ``codes[i]`` indexes ``values`` (-1: node lacks the key)."""

    codes: np.ndarray
    values: tuple[str, ...]
    vocab: dict[str, int]

    @property
    def present(self) -> np.ndarray:
        return self.codes >= 0

    def where(self, test: Callable[[str], bool]) -> np.ndarray:
        """Nodes whose value passes ``test`` (nodes lacking the key never do)."""
        table = np.array([test(value) for value in self.values] + [False], dtype=bool)
        return table[self.codes]  # code -1 reads the trailing False

    def among(self, wanted: tuple[str, ...]) -> np.ndarray:
        codes = [self.vocab[value] for value in wanted if value in self.vocab]
        return np.isin(self.codes, codes)


def _column(values: list[str | None]) -> LabelColumn:
    vocab: dict[str, int] = {}
    codes = np.fromiter(
        (-1 if value is None else vocab.setdefault(value, len(vocab)) for value in values),
        dtype=np.int64,
        count=len(values),
    )
    return LabelColumn(codes, tuple(vocab), vocab)


# Taints that come and go by themselves: Kubernetes' own, set from a node's conditions
# and cordon (``node.kubernetes.io/not-ready``, ``.../unschedulable``, ...) or until a
# cloud provider initializes it, and the autoscalers' on nodes they are taking away.
# Every other taint an admin or a provisioner set, and it lasts.
PASSING_TAINTS = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "ToBeDeletedByClusterAutoscaler",
    "karpenter.sh/",
)


def lasting(taint: Taint) -> bool:
    """Does ``taint`` stay until someone takes it off (not ``PASSING_TAINTS``)?"""
    return not taint.key.startswith(PASSING_TAINTS)


class TaintTable:
    """The taints of some effects over all nodes, as (node, distinct taint) pairs."""

    def __init__(self, nodes: NodeSet, effects: frozenset[str]) -> None:
        distinct: dict[Taint, int] = {}
        pair_nodes: list[int] = []
        pair_taints: list[int] = []
        for node, info in enumerate(nodes.infos):
            for taint in info.taints:
                if taint.effect in effects:
                    pair_nodes.append(node)
                    pair_taints.append(distinct.setdefault(taint, len(distinct)))
        self.size = len(nodes)
        self.taints = tuple(distinct)
        self._nodes = np.array(pair_nodes, dtype=np.int64)
        self._taints = np.array(pair_taints, dtype=np.int64)
        self.counts = np.bincount(self._nodes, minlength=self.size)

    def untolerated(
        self, tolerations: tuple[Toleration, ...], lasting_only: bool = False
    ) -> np.ndarray:
        """Per node: how many of its taints (``lasting`` ones only, or all) none of
        ``tolerations`` tolerates."""
        if not self.taints:
            return np.zeros(self.size, dtype=np.int64)
        left = np.array(
            [
                not any(t.tolerates(taint) for t in tolerations)
                and (not lasting_only or lasting(taint))
                for taint in self.taints
            ],
            dtype=np.int64,
        )
        return np.bincount(self._nodes, weights=left[self._taints], minlength=self.size).astype(
            np.int64
        )


# What the index reads of a node: name, labels, taints, cordon, conditions.
NodeState = tuple[str, dict[str, str], tuple[Taint, ...], bool, dict[str, str]]


def static_state(nodes: NodeSet) -> list[NodeState]:
    """What an index reads of ``nodes``, in order (the nodes' own dicts, not copies)."""
    return [
        (info.name, info.labels, info.taints, info.unschedulable, info.conditions)
        for info in nodes.infos
    ]


class NodeIndex:
    """Masks over all nodes (in ``NodeSet`` order), built lazily and cached by value.
    It reads the nodes only as they were when it was made (``state``, its own copy), so
    it holds on to no session's NodeSet and serves any whose nodes say the same.
    ``derived``: what plugins work out of the same state, kept with it (by plugin)."""

    def __init__(self, nodes: NodeSet) -> None:
        self.state: list[NodeState] = [
            (name, dict(labels), taints, cordoned, dict(conditions))
            for name, labels, taints, cordoned, conditions in static_state(nodes)
        ]
        self.size = len(nodes)
        self.static_version: object | None = None  # its nodes' (``_kept_or_new``)
        self._columns: dict[str, LabelColumn] = {}
        self._names = _column(list(nodes.names))
        self._terms: dict[tuple[NodeSelectorTerm, ...], np.ndarray] = {}
        self._selectors: dict[tuple[tuple[str, str], ...], np.ndarray] = {}
        self.no_schedule = TaintTable(nodes, NO_SCHEDULE_EFFECTS)
        self.prefer_no_schedule = TaintTable(nodes, frozenset({PREFER_NO_SCHEDULE}))
        self.derived: dict[Hashable, object] = {}

    def forget_if_many(self) -> None:
        """Forget the masks by value once they are many (a long run meets many selectors
        and terms; every one is worked out again when next asked)."""
        if len(self._terms) + len(self._selectors) > MASKS_KEPT:
            self._terms.clear()
            self._selectors.clear()

    # ------------------------------------------------------------------ labels
    def column(self, key: str) -> LabelColumn:
        column = self._columns.get(key)
        if column is None:
            column = _column([labels.get(key) for _, labels, _, _, _ in self.state])
            self._columns[key] = column
        return column

    def selector_mask(self, node_selector: tuple[tuple[str, str], ...]) -> np.ndarray:
        """Nodes carrying every label of a pod's ``nodeSelector``."""
        mask = self._selectors.get(node_selector)
        if mask is None:
            mask = np.ones(self.size, dtype=bool)
            for key, value in node_selector:
                mask &= self.column(key).among((value,))
            self._selectors[node_selector] = mask
        return mask

    def terms_mask(self, terms: tuple[NodeSelectorTerm, ...]) -> np.ndarray:
        """Nodes matching any of ``terms`` (no terms, or only empty ones, match no node)."""
        mask = self._terms.get(terms)
        if mask is None:
            mask = np.zeros(self.size, dtype=bool)
            for term in terms:
                mask |= self.term_mask(term)
            self._terms[terms] = mask
        return mask

    def term_mask(self, term: NodeSelectorTerm) -> np.ndarray:
        """Nodes matching every requirement of ``term``; an empty or invalid term matches none."""
        if not term.match_expressions and not term.match_fields:
            return np.zeros(self.size, dtype=bool)
        mask = np.ones(self.size, dtype=bool)
        for req in term.match_expressions:
            mask &= self._label_requirement(req)
        for req in term.match_fields:
            mask &= self._field_requirement(req)
        return mask

    def _label_requirement(self, req: Requirement) -> np.ndarray:
        if not _valid(req):
            return np.zeros(self.size, dtype=bool)
        return _requirement_mask(req, self.column(req.key))

    def _field_requirement(self, req: Requirement) -> np.ndarray:
        # Kubernetes knows one node field, with In/NotIn and exactly one value.
        if req.key != NODE_NAME_FIELD or req.operator not in _SET_OPERATORS:
            return np.zeros(self.size, dtype=bool)
        if len(req.values) != 1:
            return np.zeros(self.size, dtype=bool)
        return _requirement_mask(req, self._names)

    # ------------------------------------------------------------------ conditions
    def condition_is(self, kind: str, status: str) -> np.ndarray:
        """Nodes reporting condition ``kind`` with ``status``."""
        return np.array(
            [conditions.get(kind) == status for _, _, _, _, conditions in self.state], dtype=bool
        )

    def condition_is_not(self, kind: str, status: str) -> np.ndarray:
        """Nodes reporting condition ``kind`` with any other status (absent: not reported)."""
        return np.array(
            [conditions.get(kind, status) != status for _, _, _, _, conditions in self.state],
            dtype=bool,
        )

    def unschedulable(self) -> np.ndarray:
        return np.array([cordoned for _, _, _, cordoned, _ in self.state], dtype=bool)


def _valid(req: Requirement) -> bool:
    """Kubernetes refuses a malformed requirement (and then the term matches no node)."""
    if req.operator in _SET_OPERATORS:
        return bool(req.values)
    if req.operator in (Operator.EXISTS, Operator.DOES_NOT_EXIST):
        return not req.values
    return len(req.values) == 1 and _INTEGER.fullmatch(req.values[0]) is not None


def _requirement_mask(req: Requirement, column: LabelColumn) -> np.ndarray:
    op = req.operator
    if op is Operator.IN:
        return column.among(req.values)
    if op is Operator.NOT_IN:
        return ~column.among(req.values)
    if op is Operator.EXISTS:
        return column.present
    if op is Operator.DOES_NOT_EXIST:
        return ~column.present
    bound = int(req.values[0])
    if op is Operator.GT:
        return column.where(
            lambda value: _INTEGER.fullmatch(value) is not None and int(value) > bound
        )
    return column.where(lambda value: _INTEGER.fullmatch(value) is not None and int(value) < bound)


_INDEXES: "weakref.WeakKeyDictionary[Session, NodeIndex]" = weakref.WeakKeyDictionary()


def of(session: Session) -> NodeIndex:
    """The session's node index (built on first use, shared by every plugin): the last
    session's, if its nodes say the same."""
    index = _INDEXES.get(session)
    if index is None:
        index = _kept_or_new(session.nodes, session.kept, session.shortcuts)
        _INDEXES[session] = index
    return index


def _kept_or_new(nodes: NodeSet, kept: KeptAcrossSessions, shortcuts: Shortcuts) -> NodeIndex:
    last = kept.get(NodeIndex)
    if (
        shortcuts.node_index_across_sessions
        and last is not None
        and _says_the_same(last, nodes, shortcuts.node_index_by_version)
    ):
        last.forget_if_many()
        return last
    index = NodeIndex(nodes)
    index.static_version = nodes.static_version
    kept.put(index)
    return index


def _says_the_same(index: NodeIndex, nodes: NodeSet, by_version: bool = True) -> bool:
    """Do ``nodes`` say what the nodes ``index`` was made of said? Known without a look
    when their maker says they are the same (``NodeSet.static_version``; unless not
    ``by_version``), else compared."""
    version = nodes.static_version
    if version is not None and version is index.static_version and by_version:
        return True
    return index.state == static_state(nodes)
