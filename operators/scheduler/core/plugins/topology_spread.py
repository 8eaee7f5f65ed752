"""Pod topology spread: a pod's ``topologySpreadConstraints``, as kube-scheduler's
PodTopologySpread reads them, for the predicates (``DoNotSchedule``) and nodeorder
(``ScheduleAnyway``) plugins. Results are over all nodes.

For a constraint, the pods counted are those its selector (with ``matchLabelKeys``
bound to the pod's labels) selects in the pod's namespace, not terminating, on the
*eligible* nodes: those carrying every topology key of the pod's constraints of that
kind, matching its node selector and required node affinity (``nodeAffinityPolicy``
Honor, the default) and, with ``nodeTaintsPolicy`` Honor, whose NoSchedule and
NoExecute taints it tolerates. A domain is a value of the key on an eligible node.

- Filter: a node without the key fails (``MISSING_LABEL``); else its domain's count,
  plus one if the pod matches the selector itself, less the smallest count of a
  domain (0 while there are fewer domains than ``minDomains``) may not pass
  ``maxSkew`` (``SKEWED``).
- Score: per node, the sum over constraints of its domain's count × log(domains + 2)
  plus ``maxSkew`` − 1, rounded; the fewest scores 10, the most in proportion less
  (kube-scheduler's normalisation, here over every node with the keys rather than
  over the feasible ones only: the order is the same); 0 on a node without the keys.

Pods placed in the session count as soon as they are placed (``PodIndex`` follows the
node set's versions), so a gang's pods spread among themselves as they are placed, and
the placement asks afresh for them (``placement.Placer._sensitive``); so do the tasks an
action plans without placing them (``Session.planned``: ``PodIndex`` counts them).
"""

import math

import numpy as np

from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.podspec import (
    PodAffinityTerm,
    PodTemplate,
    SpreadConstraint,
)
from kbatch.operators.scheduler.core.framework.signatures import DomainSkew, Failures, Lasting
from kbatch.operators.scheduler.core.plugins.node_index import NodeIndex
from kbatch.operators.scheduler.core.plugins.pod_affinity import PodChecks

SKEWED = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"

MAX_SCORE = 10.0

# (per domain: the pods counted; per domain: has an eligible node)
Domains = tuple[np.ndarray, np.ndarray]


class SpreadChecks:
    """The spread checks of one session, on its shared pod checks."""

    def __init__(self, checks: PodChecks) -> None:
        self.checks = checks
        self.labels = checks.labels
        self.size = checks.size

    def failures(self, task: TaskInfo) -> Failures:
        """(reason, mask over all nodes) of the task's ``DoNotSchedule`` constraints, each
        node under the first constraint it fails."""
        template = task.template
        hard = [c for c in template.spread if c.hard]
        reasons = np.zeros(self.size, dtype=np.int8)  # 0 passes, 1 missing key, 2 skewed
        with_keys = keyed(self.labels, hard)
        for constraint in hard:
            column = self.labels.column(constraint.topology_key)
            counted, domains = self._domains(task, constraint, with_keys)
            minimum = counted[domains].min() if domains.any() else math.inf
            if np.count_nonzero(domains) < constraint.min_domains:
                minimum = 0.0
            selector = constraint.selector_for(template.labels)
            own = 1.0 if selector.matches(template.labels) else 0.0
            here = _per_node(counted, column.codes)
            skewed = column.present & (here + own - minimum > constraint.max_skew)
            undecided = reasons == 0
            reasons[undecided & ~column.present] = 1
            reasons[undecided & skewed] = 2
        return [(MISSING_LABEL, reasons == 1), (SKEWED, reasons == 2)]

    def scores(self, task: TaskInfo) -> np.ndarray:
        """0..10 per node from the task's ``ScheduleAnyway`` constraints."""
        soft = [c for c in task.template.spread if not c.hard]
        scored = keyed(self.labels, soft)
        out = np.zeros(self.size)
        if not soft or not scored.any():
            return out
        raw = np.zeros(self.size)
        for constraint in soft:
            column = self.labels.column(constraint.topology_key)
            counted, domains = self._domains(task, constraint, scored)
            weight = math.log(np.count_nonzero(domains) + 2)
            raw += _per_node(counted, column.codes) * weight + (constraint.max_skew - 1)
        raw = np.round(raw)
        high, low = raw[scored].max(), raw[scored].min()
        out[scored] = MAX_SCORE if high == 0 else MAX_SCORE * (high + low - raw[scored]) / high
        return out

    def _domains(self, task: TaskInfo, constraint: SpreadConstraint, keyed: np.ndarray) -> Domains:
        """Per value of the constraint's key: the pods counted on its eligible nodes, and
        whether it has one."""
        column = self.labels.column(constraint.topology_key)
        eligible = keyed & self._included(task.template, constraint)
        selector = constraint.selector_for(task.template.labels)
        pods = self.checks.pods
        pods.refresh()
        term = PodAffinityTerm(selector, constraint.topology_key)
        counts = pods.per_node(pods.matching_all((term,), task.namespace), terminating=False)
        codes = column.codes[eligible]
        size = len(column.values)
        counted = np.bincount(codes, weights=counts[eligible], minlength=size)
        return counted, np.bincount(codes, minlength=size) > 0

    def _included(self, template: PodTemplate, constraint: SpreadConstraint) -> np.ndarray:
        return included(self.labels, template, constraint)


def keyed(index: NodeIndex, constraints: list[SpreadConstraint]) -> np.ndarray:
    """The nodes carrying the topology key of every one of ``constraints``."""
    mask = np.ones(index.size, dtype=bool)
    for constraint in constraints:
        mask &= index.column(constraint.topology_key).present
    return mask


def included(index: NodeIndex, template: PodTemplate, constraint: SpreadConstraint) -> np.ndarray:
    """The nodes the constraint's node inclusion policies let count."""
    mask = np.ones(index.size, dtype=bool)
    if constraint.honor_node_affinity:
        mask &= index.selector_mask(template.node_selector)
        required = template.affinity.node_required
        if required is not None:
            mask &= index.terms_mask(required)
    if constraint.honor_taints:
        mask &= index.no_schedule.untolerated(template.tolerations) == 0
    return mask


def lasting(index: NodeIndex, template: PodTemplate) -> Lasting:
    """What lasts of the template's ``DoNotSchedule`` constraints: the nodes without
    their keys, and, for each that selects the template's own pods, how those must
    spread over its domains (``node_fit``: a gang that cannot spread on the empty nodes
    is told so, and not admitted to hold room it could never use)."""
    hard = [c for c in template.spread if c.hard]
    with_keys = keyed(index, hard)
    skews = []
    for constraint in hard:
        if not constraint.selector_for(template.labels).matches(template.labels):
            continue  # (its own pods are not counted: they never skew a domain)
        counted = with_keys & included(index, template, constraint)
        codes = index.column(constraint.topology_key).codes
        domains = np.where(counted, codes, -1)
        skews.append(
            DomainSkew(
                constraint.topology_key, domains, constraint.max_skew, constraint.min_domains
            )
        )
    barred = [(MISSING_LABEL, ~with_keys)] if not with_keys.all() else []
    return Lasting(barred, (), tuple(skews))


def _per_node(counted: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """Each node's domain's count (0 for a node without the key: code -1)."""
    padded = np.append(counted, 0.0)
    return padded[codes]
