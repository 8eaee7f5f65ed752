"""The kinds of function a plugin registers with a session (``tiers.TieredFunctions``),
as types, and the small answers some of them give (``Invalid``, ``Vote``)."""

from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from kbatch.operators.scheduler.core.framework.info import JobInfo, QueueInfo, TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate

Key = Any
OrderKeyFn = Callable[[Any], Key]
# A predicate answers, for the nodes ``idx``, which fail and why: a list of
# (reason, mask over idx); nodes failing none of them pass.
Failures = list[tuple[str, np.ndarray]]
PredicateFn = Callable[[TaskInfo, np.ndarray], Failures]


@dataclass(frozen=True, slots=True)
class DomainSkew:
    """Pods alike kept spread over the domains of a label key (a topology spread
    constraint that selects them): per node, its domain's number (-1: a node not
    counted in any domain); how many more of them a domain may hold than the emptiest;
    and how many domains there must be for the emptiest to count (fewer: it is 0)."""

    key: str
    domains: np.ndarray
    max_skew: int
    min_domains: int = 1


@dataclass(frozen=True, slots=True)
class Lasting:
    """Where a template's pods may go, of what lasts as the nodes stand (what an admin
    set, not what comes and goes: conditions, cordons, room, the pods on them): the
    nodes, of all, they may never go on, and why (labels, taints); the node label
    keys of which a domain takes at most one of them ('': a node; host ports, or a
    required anti-affinity to their own kind); how they must spread (``skews``); and
    whether they must all go on one node (``together``: they share a claim bound on
    first use, whose volume is made for the node of the first), or only one of them may
    run at all (``alone``: they share a claim only one pod may use)."""

    barred: Failures = field(default_factory=list)
    one_per: tuple[str, ...] = ()
    skews: tuple[DomainSkew, ...] = ()
    together: bool = False
    alone: bool = False

    @staticmethod
    def combined(found: "list[Lasting]") -> "Lasting":
        """What each of ``found`` says, together."""
        if len(found) == 1:
            return found[0]
        return Lasting(
            [f for it in found for f in it.barred],
            sum((it.one_per for it in found), ()),
            sum((it.skews for it in found), ()),
            any(it.together for it in found),
            any(it.alone for it in found),
        )


LastingFn = Callable[[PodTemplate], Lasting]
NodeOrderFn = Callable[[TaskInfo, np.ndarray], np.ndarray]
VictimsFn = Callable[[TaskInfo, list[TaskInfo]], list[TaskInfo]]
# What a victims function reads of the preemptor: two preemptors with equal keys get
# the same victims from the same candidates in the same session state.
PreemptorKeyFn = Callable[[TaskInfo], Hashable]
# A victims function's per-task form, for one that keeps each candidate on its own
# merits: ``fn(preemptor, candidates) == [t for t in candidates if keeps(preemptor, t)]``
# whatever else is offered, reading nothing that changes in a session (priorities, the
# task's own fields). Eviction bounds the room victims could free with it.
TaskFilterFn = Callable[[TaskInfo, TaskInfo], bool]


JobCheckFn = Callable[[JobInfo], bool]
OverusedFn = Callable[[QueueInfo], bool]
AllocatableFn = Callable[[QueueInfo, TaskInfo], bool]
# Reclaim's questions about queue shares (the proportion plugin answers them):
# may this queue take back room for this task / lose this task now; how far above its
# share a queue is (the most over-served gives back first).
QueueTaskFn = Callable[[QueueInfo, TaskInfo], bool]
QueueShareFn = Callable[[QueueInfo], float]
# May this queue, over its deserved share, borrow room for this task? The queue whose
# unused share it would use (None: it may not).
LenderFn = Callable[[QueueInfo, TaskInfo], str | None]
TaskEventFn = Callable[[TaskInfo], None]
# Told before a task moves to a status (the status it moves to): its job's sums are
# still what they were, for a plugin that reads a job's only when first needed.
TaskChangingFn = Callable[[TaskInfo, TaskStatus], None]
JobEventFn = Callable[[JobInfo], None]
CloseFn = Callable[[Any], None]  # called with the session


@dataclass(frozen=True, slots=True)
class Invalid:
    """Why a job may not be scheduled at all (from a job_valid function)."""

    reason: str
    message: str


JobValidFn = Callable[[JobInfo], Invalid | None]


class Vote(Enum):
    """A plugin's say on admitting a Pending job (enqueue)."""

    PERMIT = "permit"  # admit even if the idle resources do not cover it
    REJECT = "reject"  # never admit now
    # Admit ahead of the idle room if room can be kept for it as nodes drain (the
    # reserve action): its queue's own work holds the room it would have.
    WAIT = "wait"
    ABSTAIN = "abstain"


EnqueueFn = Callable[[JobInfo], tuple[Vote, str]]
