"""Inter-pod affinity and anti-affinity, and host ports: checks that read the pods on nodes.

The pods on the nodes change during a session, so they are indexed by *kind*
(pod template and namespace: pods of one kind match one term alike) with, for
each kind, how many of its pods sit on which node. The index is brought up to
date node by node, only where ``NodeSet.version`` moved. A term is matched
against kinds, never against every pod; the matching pods' counts are then
summed per topology domain with ``np.bincount``. Results are over all nodes;
callers index them with the nodes they were asked about.

Semantics are Kubernetes' (InterPodAffinity): a pod's required affinity needs,
in the node's domain of every term, an existing pod matching *all* its terms
(unless no such pod exists anywhere and the pod matches its own terms); its
required anti-affinity forbids a domain holding a pod matching a term; an
existing pod's required anti-affinity term that matches the incoming pod
forbids the existing pod's domain.
"""

import weakref
from collections.abc import Iterable, Mapping

import numpy as np

from kbatch.api import selector
from kbatch.operators.scheduler.core.framework.info import (
    FINISHED_STATUSES,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.nodes import NodeSet
from kbatch.operators.scheduler.core.framework.podspec import (
    HostPort,
    PodAffinityTerm,
    PodTemplate,
    WeightedPodAffinityTerm,
)
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.plugins import node_index

# Pods of one kind are alike for every check here: same labels, namespace, terms, ports.
Kind = tuple[PodTemplate, str]
# How many kinds' counts ``PodIndex`` keeps as arrays over the nodes (past it, all are
# dropped and made again as asked)
DENSE_KEPT = 64
Terms = tuple[PodAffinityTerm, ...]


def _occupies(task: TaskInfo) -> bool:
    return task.status is not TaskStatus.PENDING and task.status not in FINISHED_STATUSES


def term_matches(
    term: PodAffinityTerm,
    owner_namespace: str,
    kind: Kind,
    namespace_labels: Mapping[str, dict[str, str]] | None = None,
) -> bool:
    """Does ``term`` (of a pod in ``owner_namespace``) select pods of ``kind``? A
    namespace's labels are ``namespace_labels``' (not there: its name label alone)."""
    template, namespace = kind
    if term.namespace_selector is None:
        if namespace not in (term.namespaces or (owner_namespace,)):
            return False
    elif namespace not in term.namespaces:
        known = (namespace_labels or {}).get(namespace)
        if not term.namespace_selector.matches(selector.namespace_labels(namespace, known)):
            return False
    return term.selector.matches(template.labels)


class PodIndex:
    """Which kinds of pods sit on which nodes, kept current with ``NodeSet.version``."""

    def __init__(
        self,
        nodes: NodeSet,
        planned: list[tuple[TaskInfo, int]] | None = None,
        namespace_labels: Mapping[str, dict[str, str]] | None = None,
    ) -> None:
        self.nodes = nodes
        self.namespace_labels = namespace_labels  # (for the terms' namespaceSelector)
        # Tasks an action plans without placing them, counted as placed (the session's
        # ``planned``, the one list: an action fills and empties it as it plans)
        self.planned = [] if planned is None else planned
        self._seen = np.full(len(nodes), -1, dtype=np.int64)
        # By node, its kinds as last counted (only nodes counted: a session opens one
        # index over every node, and most sessions count a few).
        self._on_node: dict[int, dict[Kind, int]] = {}
        self.placement: dict[Kind, dict[int, int]] = {}
        # Of those, the pods terminating (RELEASING), which topology spread does not count
        self.leaving: dict[Kind, dict[int, int]] = {}
        self._leaving_on_node: dict[int, dict[Kind, int]] = {}
        self.kinds: list[Kind] = []  # every kind ever placed, in the order first seen
        self.anti_kinds: list[Kind] = []  # those with required anti-affinity terms
        self.port_kinds: list[Kind] = []  # those with host ports
        self._matched: dict[tuple[Terms, str], tuple[int, list[Kind]]] = {}
        # ``placement`` as arrays over the nodes, for the kinds counted most (kept as
        # nodes are recounted: a gang's kind is counted once per pod placed)
        self._dense: dict[Kind, np.ndarray] = {}

    def refresh(self) -> None:
        changed = np.flatnonzero(self.nodes.version != self._seen)
        for node in changed.tolist():
            self._recount(node)
        self._seen[changed] = self.nodes.version[changed]
        for task, _ in self.planned:
            if (task.template, task.namespace) not in self.placement:
                self._first_seen((task.template, task.namespace))

    def _recount(self, node: int) -> None:
        dense = self._dense
        for kind in self._on_node.get(node, ()):
            self.placement[kind].pop(node, None)
            if kind in dense:
                dense[kind][node] = 0.0
        for kind in self._leaving_on_node.pop(node, ()):
            self.leaving[kind].pop(node, None)
        counts: dict[Kind, int] = {}
        leaving: dict[Kind, int] = {}
        for task in self.nodes.infos[node].tasks.values():
            if _occupies(task):
                kind = (task.template, task.namespace)
                counts[kind] = counts.get(kind, 0) + 1
                if task.status is TaskStatus.RELEASING:
                    leaving[kind] = leaving.get(kind, 0) + 1
        for kind, count in counts.items():
            if kind not in self.placement:
                self._first_seen(kind)
            self.placement[kind][node] = count
            if kind in dense:
                dense[kind][node] = count
        self._on_node[node] = counts
        for kind, count in leaving.items():
            self.leaving.setdefault(kind, {})[node] = count
        if leaving:
            self._leaving_on_node[node] = leaving

    def _first_seen(self, kind: Kind) -> None:
        self.placement[kind] = {}
        self.kinds.append(kind)
        if kind[0].affinity.anti_required:
            self.anti_kinds.append(kind)
        if kind[0].host_ports:
            self.port_kinds.append(kind)

    def per_node(self, kinds: Iterable[Kind], terminating: bool = True) -> np.ndarray:
        """How many pods of ``kinds`` each node holds (``terminating``: with those leaving),
        with the tasks planned there."""
        counts = np.zeros(len(self.nodes))
        for kind in kinds:
            counts += self._dense_of(kind)
            if not terminating:
                _add(counts, self.leaving.get(kind, {}), -1.0)
        if self.planned:
            wanted = set(kinds)
            for task, node in self.planned:
                if (task.template, task.namespace) in wanted:
                    counts[node] += 1
        return counts

    def _dense_of(self, kind: Kind) -> np.ndarray:
        """``placement[kind]`` over all nodes (made once, then kept current)."""
        found = self._dense.get(kind)
        if found is None:
            if len(self._dense) >= DENSE_KEPT:
                self._dense.clear()
            found = self._dense[kind] = np.zeros(len(self.nodes))
            _add(found, self.placement[kind], 1.0)
        return found

    def matching_all(self, terms: Terms, owner_namespace: str) -> list[Kind]:
        """Kinds matching every one of ``terms``; kinds are checked once, as they appear."""
        key = (terms, owner_namespace)
        checked, matched = self._matched.get(key, (0, []))
        for kind in self.kinds[checked:]:
            labels = self.namespace_labels
            if all(term_matches(term, owner_namespace, kind, labels) for term in terms):
                matched.append(kind)
        self._matched[key] = (len(self.kinds), matched)
        return matched


class PodChecks:
    """The checks of one session; every result is over all nodes."""

    def __init__(self, session: Session) -> None:
        self.pods = PodIndex(session.nodes, session.planned, session.namespace_labels)
        self.labels = node_index.of(session)
        self.size = len(session.nodes)

    def in_domain(self, counts: np.ndarray, topology_key: str) -> np.ndarray:
        """For each node: the pods counted in its ``topology_key`` domain (0 without the key)."""
        column = self.labels.column(topology_key)
        present = column.present
        per_domain = np.bincount(
            column.codes[present], weights=counts[present], minlength=len(column.values)
        )
        spread = np.zeros(self.size)
        spread[present] = per_domain[column.codes[present]]
        return spread

    def port_conflicts(self, template: PodTemplate) -> np.ndarray:
        """Nodes holding a pod whose host ports clash with the template's."""
        self.pods.refresh()
        clashing = [
            kind
            for kind in self.pods.port_kinds
            if _ports_clash(template.host_ports, kind[0].host_ports)
        ]
        return self.pods.per_node(clashing) > 0

    def existing_anti_affinity(self, task: TaskInfo) -> np.ndarray:
        """Nodes in the domain of an existing pod whose required anti-affinity selects ``task``."""
        self.pods.refresh()
        failed = np.zeros(self.size, dtype=bool)
        incoming: Kind = (task.template, task.namespace)
        for kind in self.pods.anti_kinds:
            terms = [
                term
                for term in kind[0].affinity.anti_required
                if term_matches(term, kind[1], incoming, self.pods.namespace_labels)
            ]
            if not terms or not self.pods.placement[kind]:
                continue
            counts = self.pods.per_node((kind,))
            for term in terms:
                failed |= self.in_domain(counts, term.topology_key) > 0
        return failed

    def affinity(self, task: TaskInfo) -> np.ndarray:
        """Nodes that fail the task's required pod affinity."""
        terms = task.template.affinity.pod_required
        self.pods.refresh()
        counts = self.pods.per_node(self.pods.matching_all(terms, task.namespace))
        has_keys = np.ones(self.size, dtype=bool)
        satisfied = np.ones(self.size, dtype=bool)
        anywhere = False
        for term in terms:
            column = self.labels.column(term.topology_key)
            has_keys &= column.present
            in_domain = self.in_domain(counts, term.topology_key)
            satisfied &= in_domain > 0
            anywhere = anywhere or bool(np.any(in_domain > 0))
        own: Kind = (task.template, task.namespace)
        labels = self.pods.namespace_labels
        if not anywhere and all(term_matches(t, task.namespace, own, labels) for t in terms):
            # The first of a series of pods with affinity to each other may go anywhere.
            return ~has_keys
        return ~(has_keys & satisfied)

    def anti_affinity(self, task: TaskInfo) -> np.ndarray:
        """Nodes whose domain holds a pod the task's required anti-affinity selects."""
        self.pods.refresh()
        failed = np.zeros(self.size, dtype=bool)
        for term in task.template.affinity.anti_required:
            counts = self.pods.per_node(self.pods.matching_all((term,), task.namespace))
            failed |= self.in_domain(counts, term.topology_key) > 0
        return failed

    def preferred_score(self, task: TaskInfo) -> np.ndarray:
        """10 × (matched affinity weight − matched anti-affinity weight) / all their weight.

        A term is matched on a node when its domain holds a pod the term selects.
        """
        affinity = task.template.affinity
        total = sum(t.weight for t in (*affinity.pod_preferred, *affinity.anti_preferred))
        score = np.zeros(self.size)
        if total <= 0:
            return score
        self.pods.refresh()
        score += self._matched_weight(task, affinity.pod_preferred)
        score -= self._matched_weight(task, affinity.anti_preferred)
        return 10.0 * score / total

    def _matched_weight(
        self, task: TaskInfo, weighted: tuple[WeightedPodAffinityTerm, ...]
    ) -> np.ndarray:
        weight = np.zeros(self.size)
        for entry in weighted:
            if entry.weight <= 0:
                continue
            kinds = self.pods.matching_all((entry.term,), task.namespace)
            counts = self.pods.per_node(kinds)
            weight += entry.weight * (self.in_domain(counts, entry.term.topology_key) > 0)
        return weight


def _add(counts: np.ndarray, where: dict[int, int], sign: float) -> None:
    if where:
        nodes = np.fromiter(where.keys(), dtype=np.int64, count=len(where))
        counts[nodes] += sign * np.fromiter(where.values(), dtype=np.float64, count=len(where))


def _ports_clash(ours: tuple[HostPort, ...], theirs: tuple[HostPort, ...]) -> bool:
    return any(a.conflicts(b) for a in ours for b in theirs)


_CHECKS: "weakref.WeakKeyDictionary[Session, PodChecks]" = weakref.WeakKeyDictionary()


def of(session: Session) -> PodChecks:
    """The session's pod checks (built on first use, shared by every plugin)."""
    checks = _CHECKS.get(session)
    if checks is None:
        checks = PodChecks(session)
        _CHECKS[session] = checks
    return checks
