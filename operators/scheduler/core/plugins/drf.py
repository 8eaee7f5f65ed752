"""The drf plugin: dominant resource fairness between jobs.

A job's share is the largest, over resources, of what it holds divided by the
cluster's total. Jobs with the smaller share go first; a task may preempt
another job's task only if its own job's share stays below the victim job's.
"""

import numpy as np

from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.resources import rows, share, shareable, shares
from kbatch.operators.scheduler.core.framework.session import Session

NAME = "drf"


class _Shares:
    def __init__(self, session: Session) -> None:
        self.session = session
        self.mask = shareable(session.dims)
        self.total = session.total * self.mask
        # Every job's, at once (a row each: rows of one matrix, never of two jobs).
        masked = rows((job.allocated for job in session.jobs.values()), len(self.mask)) * self.mask
        self.allocated = dict(zip(session.jobs, masked, strict=True))
        self.share = dict(zip(session.jobs, shares(masked, self.total), strict=True))
        self._stale: set[str] = set()  # jobs whose share is worked out when next asked
        self._masked: dict[int, np.ndarray] = {}  # a template's request, masked

    def key(self, job: JobInfo) -> float:
        if job.uid in self._stale:
            self._stale.discard(job.uid)
            self.share[job.uid] = share(self.allocated[job.uid], self.total)
        return self.share[job.uid]

    def changed(self, task: TaskInfo, sign: float) -> None:
        # A gang placed task by task asks for its share once, not once per task.
        masked = self._masked.get(id(task.template))
        if masked is None:
            masked = self._masked[id(task.template)] = task.request * self.mask
        if sign > 0:
            self.allocated[task.job] += masked
        else:
            self.allocated[task.job] -= masked
        self._stale.add(task.job)

    def victims(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        mine = share(self.allocated[preemptor.job] + preemptor.request * self.mask, self.total)
        chosen = []
        taken: dict[str, np.ndarray] = {}
        for task in candidates:
            if task.job == preemptor.job:
                continue
            freed = task.request * self.mask
            left = self.allocated[task.job] - taken.get(task.job, 0) - freed
            if mine < share(left, self.total):
                chosen.append(task)
                taken[task.job] = taken.get(task.job, 0) + freed
        return chosen


def on_session_open(session: Session, option: PluginOption) -> None:
    del option
    shares = _Shares(session)
    session.add_job_order_fn(shares.key)
    session.add_preemptable_fn(shares.victims)
    session.add_event_handler(
        allocate=lambda task: shares.changed(task, +1.0),
        deallocate=lambda task: shares.changed(task, -1.0),
    )
