"""The nodeorder plugin: Kubernetes' priority functions, on absolute per-node scales.

Each score is on a fixed scale (0..10; pod affinity −10..10) and read from one
node alone — never normalised over the nodes asked about, so a cached score
stays valid while its node does not change (DESIGN §10) — then multiplied by
its weight:

- least-requested: 10 × mean over cpu and memory of
  (allocatable − used − request) / allocatable;
- most-requested: 10 × mean over cpu and memory of (used + request) / allocatable;
- balanced allocation: 10 × (1 − |cpu fraction − memory fraction|), the task counted in;
  a resource at or over capacity scores 0 (as Kubernetes);
- preferred node affinity: 10 × matched term weights / all term weights;
- preferred pod affinity: 10 × (matched affinity − matched anti-affinity weight) / all
  weight (−10..10; a term is matched when the node's domain holds a pod it selects);
- taint toleration: 10 × (1 − untolerated PreferNoSchedule taints / PreferNoSchedule taints);
- pod topology spread (``ScheduleAnyway`` constraints): 0..10, the fewest matching pods
  in the node's domains the most (``topology_spread``; kube-scheduler's weight, 2);
- image locality: 0..10, the more of the pod's image bytes the node holds the more,
  each image's size scaled by the share of nodes holding it (``image_locality``).

The static scores (node affinity, taints) are computed once per template over
all nodes and cached; the others are vector arithmetic on the rows asked for.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import (
    TaskInfo,
)
from kbatch.operators.scheduler.core.framework.nodes import NodeSet
from kbatch.operators.scheduler.core.framework.podspec import PreferredNodeTerm, Toleration
from kbatch.operators.scheduler.core.framework.resources import CPU, MEMORY
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.plugins import arguments, node_index, pod_affinity
from kbatch.operators.scheduler.core.plugins.image_locality import ImageScores
from kbatch.operators.scheduler.core.plugins.topology_spread import SpreadChecks

NAME = "nodeorder"

MAX_SCORE = 10.0

LEAST_REQUESTED_WEIGHT = "leastrequested.weight"
MOST_REQUESTED_WEIGHT = "mostrequested.weight"
BALANCED_RESOURCE_WEIGHT = "balancedresource.weight"
NODE_AFFINITY_WEIGHT = "nodeaffinity.weight"
POD_AFFINITY_WEIGHT = "podaffinity.weight"
TAINT_TOLERATION_WEIGHT = "tainttoleration.weight"
POD_TOPOLOGY_SPREAD_WEIGHT = "podtopologyspread.weight"
IMAGE_LOCALITY_WEIGHT = "imagelocality.weight"


@dataclass(frozen=True, slots=True)
class NodeOrderArguments:
    least_requested: float = 1.0
    most_requested: float = 0.0
    balanced_resource: float = 1.0
    node_affinity: float = 1.0
    pod_affinity: float = 1.0
    taint_toleration: float = 1.0
    pod_topology_spread: float = 2.0
    image_locality: float = 1.0


_DEFAULTS = NodeOrderArguments()
_NAMES = {
    LEAST_REQUESTED_WEIGHT: "least_requested",
    MOST_REQUESTED_WEIGHT: "most_requested",
    BALANCED_RESOURCE_WEIGHT: "balanced_resource",
    NODE_AFFINITY_WEIGHT: "node_affinity",
    POD_AFFINITY_WEIGHT: "pod_affinity",
    TAINT_TOLERATION_WEIGHT: "taint_toleration",
    POD_TOPOLOGY_SPREAD_WEIGHT: "pod_topology_spread",
    IMAGE_LOCALITY_WEIGHT: "image_locality",
}


def parse_arguments(args: Mapping[str, Any]) -> NodeOrderArguments:
    """Validate the weights (non-negative numbers); raise ValueError naming the bad one."""
    arguments.refuse_unknown(args, _NAMES, NAME)
    weights = {
        field: arguments.number(args, name, getattr(_DEFAULTS, field))
        for name, field in _NAMES.items()
    }
    return NodeOrderArguments(**weights)


def _fractions(nodes: NodeSet, task: TaskInfo, idx: np.ndarray, dims: np.ndarray) -> np.ndarray:
    """(used + request) / allocatable for ``dims`` of the nodes ``idx``; inf where nothing is
    allocatable (a resource a node does not have is always over capacity)."""
    # np.take gathers rows several times faster than fancy indexing
    requested = nodes.used.take(idx, axis=0)[:, dims] + task.request[dims]
    allocatable = nodes.allocatable.take(idx, axis=0)[:, dims]
    out = np.full(requested.shape, np.inf)
    np.divide(requested, allocatable, out=out, where=allocatable > 0)
    return out


def least_requested(fractions: np.ndarray) -> np.ndarray:
    free = np.clip(1.0 - fractions, 0.0, None)  # over capacity: 0
    return MAX_SCORE * 0.5 * (free[:, 0] + free[:, 1])


def most_requested(fractions: np.ndarray) -> np.ndarray:
    used = np.where(fractions <= 1.0, fractions, 0.0)  # over capacity: 0
    return MAX_SCORE * 0.5 * (used[:, 0] + used[:, 1])


def balanced_allocation(fractions: np.ndarray) -> np.ndarray:
    """For two resources (cpu, memory): 10 × (1 − |difference|); 0 when either is full."""
    cpu, memory = fractions[:, 0], fractions[:, 1]
    full = (cpu >= 1.0) | (memory >= 1.0)
    spread = np.abs(np.minimum(cpu, 1.0) - np.minimum(memory, 1.0))  # no inf − inf
    return np.where(full, 0.0, MAX_SCORE * (1.0 - spread))


class StaticScores:
    """Scores from node labels and taints, per template over all nodes, cached by value."""

    def __init__(self, session: Session) -> None:
        self.index = node_index.of(session)
        self._affinity: dict[tuple[PreferredNodeTerm, ...], np.ndarray] = {}
        self._taints: dict[tuple[Toleration, ...], np.ndarray] = {}

    def node_affinity(self, preferred: tuple[PreferredNodeTerm, ...]) -> np.ndarray:
        score = self._affinity.get(preferred)
        if score is None:
            score = np.zeros(self.index.size)
            total = sum(p.weight for p in preferred if p.weight > 0)
            for entry in preferred:
                if entry.weight > 0:
                    score += entry.weight * self.index.term_mask(entry.term)
            if total > 0:
                score *= MAX_SCORE / total
            self._affinity[preferred] = score
        return score

    def taint_toleration(self, tolerations: tuple[Toleration, ...]) -> np.ndarray:
        score = self._taints.get(tolerations)
        if score is None:
            table = self.index.prefer_no_schedule
            untolerated = table.untolerated(tolerations).astype(np.float64)
            score = np.full(self.index.size, MAX_SCORE)
            has = table.counts > 0
            score[has] = MAX_SCORE * (1.0 - untolerated[has] / table.counts[has])
            self._taints[tolerations] = score
        return score


def on_session_open(session: Session, option: PluginOption) -> None:
    weights = parse_arguments(option.arguments)
    nodes = session.nodes
    static = StaticScores(session)
    pod_checks = pod_affinity.of(session)
    spread = SpreadChecks(pod_checks)
    resources = np.array([session.dims.index[CPU], session.dims.index[MEMORY]])
    uses_fractions = weights.least_requested or weights.most_requested or weights.balanced_resource
    # (no node lists an image: no score to work out, as in the simulator's clusters)
    images = ImageScores(nodes, session.node_images) if session.node_images else None

    def node_order(task: TaskInfo, idx: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(idx))
        if uses_fractions:
            fractions = _fractions(nodes, task, idx, resources)
            if weights.least_requested:
                scores += weights.least_requested * least_requested(fractions)
            if weights.most_requested:
                scores += weights.most_requested * most_requested(fractions)
            if weights.balanced_resource:
                scores += weights.balanced_resource * balanced_allocation(fractions)
        template = task.template
        if weights.node_affinity and template.affinity.node_preferred:
            preferred = template.affinity.node_preferred
            scores += weights.node_affinity * static.node_affinity(preferred)[idx]
        if weights.taint_toleration:
            taints = static.taint_toleration(template.tolerations)
            scores += weights.taint_toleration * taints[idx]
        affinity = template.affinity
        if weights.pod_affinity and (affinity.pod_preferred or affinity.anti_preferred):
            scores += weights.pod_affinity * pod_checks.preferred_score(task)[idx]
        if weights.pod_topology_spread and template.spread:
            scores += weights.pod_topology_spread * spread.scores(task)[idx]
        if weights.image_locality and images is not None and template.images:
            scores += weights.image_locality * images.scores(template.images)[idx]
        return scores

    session.add_node_order_fn(node_order)
