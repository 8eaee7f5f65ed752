"""The lifetime plugin: Armada's churn guard and protected shares (DESIGN §11).

A PodGroup's ``kbatch.io/lifetime`` (a duration) says how long it runs protected:

- reclaimable: a task may be taken back for another queue's fair share only if its
  job has run longer than its lifetime (since its first pod started). A job with
  lifetime ``0`` may go at any time; a job without one never (it is not preemptible
  for fair share). Put the plugin in the tier that decides victims (the first one
  that has a reclaimable function: gang's and conformance's in the default conf);
  each plugin of that tier chooses among what the ones before it chose, and the
  reclaim action keeps every victim's queue at its deserved share itself.
- allocatable, with the argument ``nonPreemptibleShareFactor`` (Armada's example:
  1.2): a queue's non-preemptible work (jobs without a lifetime) may take at most
  that factor times its fair share — its weight over all weights, of the cluster —
  in each resource. Absent: no limit.
- allocatable, with the argument ``excessBudget`` (resource-minutes per queue, e.g.
  ``{cpu: "600"}``: 600 cpu-minutes; ``{memory: 100Gi}``: 100 GiB-minutes): a task of
  a job with a finite lifetime X > 0 that takes its queue past its fair share (in any
  resource) is placed only if X × its request fits what is left of the queue's
  budget, in every resource the budget names. A job's charge is its lifetime times
  what it holds, and it is returned when the job ends or its lifetime is over (from
  then on it is reclaimable, so it holds nothing protected). The budget is not stored
  anywhere: each session charges the queue's running jobs with a finite lifetime still
  protected, newest first, as far as they take the queue past its fair share — the
  jobs that came last are the ones beyond it. Lifetime 0 costs nothing (preemptible at
  once); jobs without a lifetime are ``nonPreemptibleShareFactor``'s business.
  Absent: no budget, no limit.

Not configured, nothing changes: kube-batch's behaviour.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbatch.api.quantity import scheduler_amount
from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import SHARE_STATUSES, QueueInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.resources import EPSILON, shareable
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.victims import no_preemptor
from kbatch.operators.scheduler.core.plugins import arguments

NAME = "lifetime"
SHARE_FACTOR = "nonPreemptibleShareFactor"
EXCESS_BUDGET = "excessBudget"
MINUTE = 60.0


@dataclass(frozen=True, slots=True)
class LifetimeArguments:
    share_factor: float | None = None
    # resource -> resource-minutes, in scheduler units (cpu: millicore-minutes)
    excess_budget: Mapping[str, float] | None = None


def parse_arguments(args: Mapping[str, Any]) -> LifetimeArguments:
    arguments.refuse_unknown(args, (SHARE_FACTOR, EXCESS_BUDGET), NAME)
    factor = arguments.number(args, SHARE_FACTOR, 1.0) if SHARE_FACTOR in args else None
    return LifetimeArguments(share_factor=factor, excess_budget=_budget(args.get(EXCESS_BUDGET)))


def _budget(value: object) -> dict[str, float] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        raise ValueError(
            f"{EXCESS_BUDGET} must map resource names to resource-minutes "
            f"(e.g. {{cpu: 600, memory: 100Gi}}), not {value!r}"
        )
    budget = {}
    for resource, minutes in value.items():
        try:
            budget[str(resource)] = scheduler_amount(str(resource), minutes)
        except ValueError as exc:
            raise ValueError(f"{EXCESS_BUDGET}.{resource}: {exc}") from exc
    return budget


class _Lifetimes:
    def __init__(self, session: Session, share_factor: float | None) -> None:
        self.session = session
        self.share_factor = share_factor
        self.mask = shareable(session.dims)
        weights = sum(q.weight for q in session.queues.values()) or 1
        total = session.total * self.mask
        self.fair = {name: total * q.weight / weights for name, q in session.queues.items()}
        self.protected = {name: np.zeros(len(session.dims)) for name in session.queues}
        # Jobs whose lifetime has ended (their pods' start times do not change in a
        # session); the others' ends are when this plugin decides otherwise (reclaimable,
        # no longer charged): the session is given the first (``Session.wake_at``).
        self.expired: set[str] = set()
        for job in session.jobs.values():
            until = job.protected_until()
            if until is None:
                continue
            if session.now >= until - EPSILON:
                self.expired.add(job.uid)
            else:
                session.wake_at(until - EPSILON)
        for job in session.jobs.values():
            if job.lifetime is None and job.queue in self.protected:
                self.protected[job.queue] += job.allocated * self.mask

    def victims(self, candidates: list[TaskInfo]) -> list[TaskInfo]:
        return [t for t in candidates if t.job in self.expired]

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        if self.share_factor is None or self.session.jobs[task.job].lifetime is not None:
            return True
        limit = self.fair[queue.name] * self.share_factor
        wanted = self.protected[queue.name] + task.request * self.mask
        return bool(np.all(wanted <= limit + EPSILON))

    def changed(self, task: TaskInfo, sign: float) -> None:
        job = self.session.jobs[task.job]
        if job.lifetime is None and job.queue in self.protected:
            self.protected[job.queue] += sign * task.request * self.mask


class _ExcessBudgets:
    """Each queue's excess budget: what its protected finite-lifetime work beyond its
    fair share has charged (lifetime × request), per task, for this session."""

    def __init__(
        self, session: Session, budget: Mapping[str, float], fair: dict[str, np.ndarray]
    ) -> None:
        self.session = session
        self.fair: dict[str, np.ndarray] = fair
        self.mask = np.zeros(len(session.dims))
        self.budget = session.dims.zeros()
        for resource, minutes in budget.items():
            if resource in session.dims.index:  # a resource no pod asks for limits nothing
                self.mask[session.dims.index[resource]] = 1.0
                self.budget[session.dims.index[resource]] = minutes
        share_mask = shareable(session.dims)
        self.held = {name: session.dims.zeros() for name in session.queues}
        for job in session.jobs.values():
            if job.queue in self.held:
                self.held[job.queue] += job.allocated * share_mask
        self.share_mask = share_mask
        self.charges: dict[str, np.ndarray] = {}  # task uid -> its charge
        self.charged = {name: session.dims.zeros() for name in session.queues}
        self._charge_running()

    def _charge_running(self) -> None:
        """Charge, per queue, its protected finite-lifetime jobs newest first while they
        take the queue past its fair share."""
        now = self.session.now
        protected = [
            (until - job.lifetime, job.uid, job, job.lifetime)
            for job in self.session.jobs.values()
            if job.lifetime and job.queue in self.held
            and (until := job.protected_until()) is not None and now < until - EPSILON
        ]  # fmt: skip
        above = {name: held.copy() for name, held in self.held.items()}
        for _, _, job, lifetime in sorted(protected, key=lambda entry: (-entry[0], entry[1])):
            if np.all(above[job.queue] <= self.fair[job.queue] + EPSILON):
                continue
            above[job.queue] -= job.allocated * self.share_mask
            for task in job.tasks.values():
                if task.status in SHARE_STATUSES:
                    self._charge(job.queue, task, lifetime)

    def _charge(self, queue: str, task: TaskInfo, lifetime: float) -> None:
        charge = task.request * self.mask * (lifetime / MINUTE)
        self.charges[task.uid] = charge
        self.charged[queue] += charge

    def _beyond_fair_share(self, queue: str, request: np.ndarray) -> bool:
        wanted = self.held[queue] + request * self.share_mask
        return bool(np.any(wanted > self.fair[queue] + EPSILON))

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        lifetime = self.session.jobs[task.job].lifetime
        if not lifetime or not self._beyond_fair_share(queue.name, task.request):
            return True
        wanted = self.charged[queue.name] + task.request * self.mask * (lifetime / MINUTE)
        return bool(np.all(wanted <= self.budget + EPSILON))

    def changed(self, task: TaskInfo, sign: float) -> None:
        job = self.session.jobs[task.job]
        if job.queue not in self.held:
            return
        if sign > 0:
            if job.lifetime and self._beyond_fair_share(job.queue, task.request):
                self._charge(job.queue, task, job.lifetime)
            self.held[job.queue] += task.request * self.share_mask
            return
        self.held[job.queue] -= task.request * self.share_mask
        charge = self.charges.pop(task.uid, None)
        if charge is not None:
            self.charged[job.queue] -= charge


def on_session_open(session: Session, option: PluginOption) -> None:
    parsed = parse_arguments(option.arguments)
    plugin = _Lifetimes(session, parsed.share_factor)
    session.add_reclaimable_fn(
        lambda _reclaimer, candidates: plugin.victims(candidates), preemptor_key=no_preemptor
    )
    session.add_allocatable_fn(plugin.allocatable)
    session.add_event_handler(
        allocate=lambda task: plugin.changed(task, +1.0),
        deallocate=lambda task: plugin.changed(task, -1.0),
    )
    if parsed.excess_budget is not None:
        budgets = _ExcessBudgets(session, parsed.excess_budget, plugin.fair)
        session.add_allocatable_fn(budgets.allocatable)
        session.add_event_handler(
            allocate=lambda task: budgets.changed(task, +1.0),
            deallocate=lambda task: budgets.changed(task, -1.0),
        )
