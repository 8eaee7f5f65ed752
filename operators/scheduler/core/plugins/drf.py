"""The drf plugin: dominant resource fairness between jobs.

A job's share is the largest, over resources, of what it holds divided by the
cluster's total. Jobs with the smaller share go first; a task may preempt
another job's task only if its own job's share stays below the victim job's.

What the plugin holds for a job (its row) is the job's allocation at the session's
open, masked, plus or minus the masked request of each task that entered or left
SHARE_STATUSES since (pipelined tasks count, which ``job.allocated`` does not). A
session asks the shares of the jobs it orders (those with pending work) and the rows of
few others, so a job's row and share are worked out when first needed, not at the open
for every job. A job's allocation is still as at the open when first needed: the plugin
hears of every status change before the session makes it (``changing``), and takes the
row of a job it has not seen then, from the allocation not yet changed.
"""

import numpy as np

from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import (
    SHARE_STATUSES,
    JobInfo,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.resources import rows, share, shareable, shares
from kbatch.operators.scheduler.core.framework.session import Session

NAME = "drf"
# A job without tasks (it holds nothing) is keyed 0.0 without its row
# (``Shortcuts.drf_holding_nothing_first``; off: by share() of its row, as any other):
# enqueue orders the whole line of waiting groups every session.
# A session that asks this many jobs' shares one by one is given every job's at once:
# one numpy step for thousands of jobs costs less than a share() each (a 5,000-node
# session keys every job it places; a simulated second's session keys a few).
ALL_AT_ONCE_AFTER = 64


class _Shares:
    """The jobs' rows and shares, kept current with a session's changes (see the module's
    docstring); ``lazy=False``: every job's worked out at the open (the long way)."""

    def __init__(self, session: Session, lazy: bool = True) -> None:
        self.session = session
        self.mask = shareable(session.dims)
        self.total = session.total * self.mask
        self.allocated: dict[str, np.ndarray] = {}  # job -> its row, once needed
        self.share: dict[str, float] = {}  # job -> its share, until its row changes
        self._masked: dict[int, np.ndarray] = {}  # a template's request, masked
        self._asked = 0  # shares worked out one by one so far
        self.holding_nothing_first = session.shortcuts.drf_holding_nothing_first
        if not lazy:
            # Every job's, at once (a row each: rows of one matrix, never of two jobs).
            allocations = (job.allocated for job in session.jobs.values())
            masked = rows(allocations, len(self.mask)) * self.mask
            self.allocated = dict(zip(session.jobs, masked, strict=True))
            self.share = dict(zip(session.jobs, shares(masked, self.total), strict=True))

    def row(self, uid: str) -> np.ndarray:
        """The job's row (taken when first needed)."""
        row = self.allocated.get(uid)
        return self._first_row(uid) if row is None else row

    def _first_row(self, uid: str) -> np.ndarray:
        """The job's row taken, at its first need: its allocation, still as at the open,
        masked (the same floats as its row of ``rows(...) * mask``)."""
        row = self.allocated[uid] = self.session.jobs[uid].allocated * self.mask
        return row

    def key(self, job: JobInfo) -> float:
        # ``share`` of a row gives the floats ``shares`` gives it (resources.shares).
        value = self.share.get(job.uid)
        if value is None:
            if not job.tasks and self.holding_nothing_first:
                return 0.0  # share() of its row of zeros: a backlog's jobs, every session
            self._asked += 1
            if self._asked == ALL_AT_ONCE_AFTER:
                self._take_the_rest()
                value = self.share.get(job.uid)
            if value is None:
                value = self.share[job.uid] = share(self.row(job.uid), self.total)
        return value

    def _take_the_rest(self) -> None:
        """A session that keys many jobs (a gang of every job to place) keys them all:
        every job's row not yet taken, and its share, worked out at once (``shares``:
        the floats ``share`` gives each row). Those rows are still as at the open."""
        jobs = self.session.jobs
        rest = [uid for uid in jobs if uid not in self.allocated]
        masked = rows((jobs[uid].allocated for uid in rest), len(self.mask)) * self.mask
        self.allocated.update(zip(rest, masked, strict=True))
        self.share.update(zip(rest, shares(masked, self.total), strict=True))

    def changing(self, task: TaskInfo, status: TaskStatus) -> None:
        """Before ``task`` moves to ``status``: its job's row taken if not yet (its
        allocation is as at the open until this change), then changed as ``changed``
        would be by the event the session sends after it."""
        row = self.allocated.get(task.job)
        if row is None:
            row = self._first_row(task.job)
        now = status in SHARE_STATUSES
        if now != (task.status in SHARE_STATUSES):
            self._change(row, task, now)

    def changed(self, task: TaskInfo, sign: float) -> None:
        """The allocate (+1) / deallocate (-1) event, after the change (the long way)."""
        self._change(self.allocated[task.job], task, sign > 0)

    def _change(self, row: np.ndarray, task: TaskInfo, added: bool) -> None:
        masked = self._masked.get(id(task.template))
        if masked is None:
            masked = self._masked[id(task.template)] = task.request * self.mask
        if added:
            row += masked
        else:
            row -= masked
        # Worked out when next asked: a gang placed task by task asks for it once, not
        # once per task.
        self.share.pop(task.job, None)

    def victims(self, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        mine = share(self.row(preemptor.job) + preemptor.request * self.mask, self.total)
        chosen = []
        taken: dict[str, np.ndarray] = {}
        for task in candidates:
            if task.job == preemptor.job:
                continue
            freed = task.request * self.mask
            left = self.row(task.job) - taken.get(task.job, 0) - freed
            if mine < share(left, self.total):
                chosen.append(task)
                taken[task.job] = taken.get(task.job, 0) + freed
        return chosen


def on_session_open(session: Session, option: PluginOption) -> None:
    del option
    # (``Shortcuts.drf_shares_when_needed`` off: every job's row and share at the open)
    lazy = session.shortcuts.drf_shares_when_needed
    shares = _Shares(session, lazy)
    session.add_job_order_fn(shares.key)
    session.add_preemptable_fn(shares.victims)
    if lazy:
        session.add_event_handler(changing=shares.changing)
        return
    session.add_event_handler(
        allocate=lambda task: shares.changed(task, +1.0),
        deallocate=lambda task: shares.changed(task, -1.0),
    )
