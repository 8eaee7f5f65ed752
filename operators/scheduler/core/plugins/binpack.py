"""The binpack plugin (Volcano's): prefer the nodes the task fills most.

For the configured resources the task requests, with weights w_r:

    score = 10 × binpack.weight × Σ w_r × (used_r + request_r) / allocatable_r / Σ w_r

A resource the task does not request counts for nothing (in neither sum); a
node the task does not fit on (in any resource it requests) scores 0. The
score of a node reads only that node's row, so it stays valid while the node
does not change (DESIGN §10).

Arguments: ``binpack.weight`` (1), ``binpack.cpu`` (1), ``binpack.memory`` (1),
``binpack.resources`` (other resource names, comma separated) and
``binpack.resources.<name>`` (the weight of a listed resource, default 1).

``binpack.lostOpportunity: true`` (Armada's executor, DESIGN §12) also counts the
room a placement would strand: after the task, each configured resource the node has
is free by some fraction, and the node can only take more work as far as its *least*
free resource allows; what the others have beyond that is stranded (a cpu job filling
the cpus of a GPU node strands its GPUs). The score becomes

    10 × binpack.weight × max(fill − stranded, 0)

with ``fill`` the score above (over 10 × weight) and ``stranded`` the weighted mean,
over the configured resources the node has, of (free_r − min free), so that the task
goes where it fills most *and* leaves the fewest resources no job could use, and big
jobs find whole nodes.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.resources import CPU, EPSILON, MEMORY, Dims
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.plugins import arguments

NAME = "binpack"

MAX_SCORE = 10.0

WEIGHT = "binpack.weight"
CPU_WEIGHT = "binpack.cpu"
MEMORY_WEIGHT = "binpack.memory"
RESOURCES = "binpack.resources"
RESOURCE_WEIGHT_PREFIX = "binpack.resources."
LOST_OPPORTUNITY = "binpack.lostOpportunity"


@dataclass(frozen=True, slots=True)
class BinpackArguments:
    weight: float = 1.0
    cpu: float = 1.0
    memory: float = 1.0
    resources: tuple[tuple[str, float], ...] = ()  # other resources and their weights
    lost_opportunity: bool = False  # count the room a placement strands

    def resource_weights(self) -> dict[str, float]:
        return {CPU: self.cpu, MEMORY: self.memory, **dict(self.resources)}


def parse_arguments(args: Mapping[str, Any]) -> BinpackArguments:
    """Validate the weights and the resource list; raise ValueError naming the bad argument."""
    arguments.refuse_unknown(
        args,
        (WEIGHT, CPU_WEIGHT, MEMORY_WEIGHT, RESOURCES, LOST_OPPORTUNITY),
        NAME,
        prefix=RESOURCE_WEIGHT_PREFIX,
    )
    listed = [
        name.strip() for name in arguments.text(args, RESOURCES, "").split(",") if name.strip()
    ]
    for name in listed:
        if name in (CPU, MEMORY):
            raise ValueError(f"{RESOURCES} lists {name!r}: weigh it with binpack.{name} instead")
    for key in args:
        name = str(key).removeprefix(RESOURCE_WEIGHT_PREFIX)
        if str(key).startswith(RESOURCE_WEIGHT_PREFIX) and name not in listed:
            raise ValueError(f"{key} is set but {name!r} is not listed in {RESOURCES}")
    resources = tuple(
        (name, arguments.number(args, RESOURCE_WEIGHT_PREFIX + name, 1.0))
        for name in dict.fromkeys(listed)
    )
    return BinpackArguments(
        weight=arguments.number(args, WEIGHT, 1.0),
        cpu=arguments.number(args, CPU_WEIGHT, 1.0),
        memory=arguments.number(args, MEMORY_WEIGHT, 1.0),
        resources=resources,
        lost_opportunity=arguments.boolean(args, LOST_OPPORTUNITY, False),
    )


def resource_weights(args: BinpackArguments, dims: Dims) -> tuple[np.ndarray, np.ndarray]:
    """Per dimension: its weight, and whether it is configured at all.

    A configured resource no node or pod has in this session has no dimension
    and is left out.
    """
    weights = dims.zeros()
    configured = np.zeros(len(dims), dtype=bool)
    for name, weight in args.resource_weights().items():
        dim = dims.index.get(name)
        if dim is not None:
            weights[dim] = weight
            configured[dim] = True
    return weights, configured


def on_session_open(session: Session, option: PluginOption) -> None:
    args = parse_arguments(option.arguments)
    weights, configured = resource_weights(args, session.dims)
    nodes = session.nodes

    def node_order(task: TaskInfo, idx: np.ndarray) -> np.ndarray:
        request = task.request
        requested = np.flatnonzero(request > EPSILON)
        scored = configured[requested]  # of the requested dimensions, those weighed
        weight = weights[requested[scored]]
        weight_sum = float(weight.sum())
        if args.weight <= 0 or weight_sum <= 0:
            return np.zeros(len(idx))
        # np.take gathers rows several times faster than fancy indexing
        after = nodes.used.take(idx, axis=0)[:, requested] + request[requested]
        allocatable = nodes.allocatable.take(idx, axis=0)[:, requested]
        fits = np.all(after <= allocatable + EPSILON, axis=1)
        fraction = np.zeros((len(idx), len(weight)))
        np.divide(after[:, scored], allocatable[:, scored], out=fraction, where=fits[:, None])
        fill = fraction @ weight / weight_sum
        if args.lost_opportunity:
            fill = np.where(fits, np.maximum(fill - stranded(task, idx), 0.0), 0.0)
        return fill * (MAX_SCORE * args.weight)

    def stranded(task: TaskInfo, idx: np.ndarray) -> np.ndarray:
        """Per node, the weighted mean over the configured resources it has of how much
        more of each is free, after ``task``, than of its least free one."""
        allocatable = nodes.allocatable.take(idx, axis=0)[:, configured]
        after = nodes.used.take(idx, axis=0)[:, configured] + task.request[configured]
        has = allocatable > EPSILON
        free = np.ones_like(allocatable)
        np.divide(allocatable - after, allocatable, out=free, where=has)
        least = np.min(np.where(has, free, np.inf), axis=1, initial=np.inf)
        least = np.where(np.isfinite(least), least, 1.0)
        weight = np.where(has, weights[configured], 0.0)
        total = weight.sum(axis=1)
        excess = np.where(has, np.clip(free - least[:, None], 0.0, 1.0), 0.0)
        out = np.zeros(len(idx))
        np.divide((excess * weight).sum(axis=1), total, out=out, where=total > 0)
        return out

    session.add_node_order_fn(node_order)
