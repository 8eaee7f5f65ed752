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

Not configured, nothing changes: kube-batch's behaviour.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import QueueInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.resources import EPSILON, shareable
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.tiers import no_preemptor
from kbatch.operators.scheduler.core.plugins import arguments

NAME = "lifetime"
SHARE_FACTOR = "nonPreemptibleShareFactor"


@dataclass(frozen=True, slots=True)
class LifetimeArguments:
    share_factor: float | None = None


def parse_arguments(args: Mapping[str, Any]) -> LifetimeArguments:
    arguments.refuse_unknown(args, (SHARE_FACTOR,), NAME)
    if SHARE_FACTOR not in args:
        return LifetimeArguments()
    return LifetimeArguments(share_factor=arguments.number(args, SHARE_FACTOR, 1.0))


class _Lifetimes:
    def __init__(self, session: Session, share_factor: float | None) -> None:
        self.session = session
        self.share_factor = share_factor
        self.mask = shareable(session.dims)
        weights = sum(q.weight for q in session.queues.values()) or 1
        total = session.total * self.mask
        self.fair = {name: total * q.weight / weights for name, q in session.queues.items()}
        self.protected = {name: np.zeros(len(session.dims)) for name in session.queues}
        # Jobs whose lifetime has ended (their pods' start times do not change in a session).
        self.expired = {
            job.uid
            for job in session.jobs.values()
            if (until := job.protected_until()) is not None and session.now >= until - EPSILON
        }
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


def on_session_open(session: Session, option: PluginOption) -> None:
    plugin = _Lifetimes(session, parse_arguments(option.arguments).share_factor)
    session.add_reclaimable_fn(
        lambda _reclaimer, candidates: plugin.victims(candidates), preemptor_key=no_preemptor
    )
    session.add_allocatable_fn(plugin.allocatable)
    session.add_event_handler(
        allocate=lambda task: plugin.changed(task, +1.0),
        deallocate=lambda task: plugin.changed(task, -1.0),
    )
