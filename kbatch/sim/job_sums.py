"""What the timeline adds up over a snapshot's jobs every tick — each queue's allocated
cpu and the pods waiting — kept from one tick to the next by the jobs that changed, not
added up again over every job (issue 12: in a trace of 1,000 nodes, a tick's ~600 jobs,
of which one or two change, cost 4% of the tick that way).

A job is the same as at the last tick when the snapshot holds the very object the last
one held, no session touched it, and it had tasks then or has none now: a snapshot hands
a job with tasks on only when nothing of it was written and no session touched it
(``kbatch.cluster.kept_jobs``), and a session changes a job's tasks only through what
marks it ``touched``; but a job without tasks is handed on while its PodGroup stays the
same (``kbatch.cluster.group_parts``), and pods that come meanwhile are put in it, in
place. Its queue, allocation and counts are then what they were when it was last added
up.

The long way adds the jobs' cpu as floats, in the snapshot's order; the sums here are
kept as integers (an integer's removal undoes its addition exactly). The two agree when
every job's cpu is a whole number of millicores and their magnitudes add up to at most
2**53: then no partial sum, in any order, is rounded. When that does not hold (a
fraction of a millicore), ``totals`` says so and the sample is added up the long way.
"""

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kbatch.api import DEFAULT_QUEUE
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.interface import follows, gone_from

# What waits for a node, read from a session's snapshot as the session left it.
WAITING = (TaskStatus.PENDING, TaskStatus.PIPELINED)
# A job's counts of its tasks in WAITING (``JobInfo.counts`` is by status).
_waiting_counts = operator.itemgetter(*WAITING)
# Every integer up to this is a float exactly.
_EXACT_UP_TO = 2**53


def queue_of(job: JobInfo) -> str:
    """The queue a job's allocation counts in (a pod without a group: the default's)."""
    return job.queue if job.has_pod_group else DEFAULT_QUEUE


def waiting(job: JobInfo) -> int:
    """The job's tasks waiting for a node."""
    return sum(_waiting_counts(job.counts))


@dataclass(frozen=True, slots=True)
class Part:
    """What one job adds to the sums."""

    queue: str
    cpu: float  # allocated millicores
    waiting: int
    has_tasks: bool

    @classmethod
    def of(cls, job: JobInfo, cpu: int) -> "Part":
        """``job``'s part; ``cpu``: the index of cpu in its snapshot's dimensions."""
        return cls(queue_of(job), float(job.allocated[cpu]), waiting(job), bool(job.tasks))

    @property
    def whole(self) -> bool:
        """Is its cpu a whole number of millicores (which integer sums hold exactly)?"""
        return self.cpu.is_integer()


def in_order(jobs: dict[str, JobInfo], some: list[JobInfo]) -> list[JobInfo]:
    """``some`` of ``jobs``, put in its order (a few, among thousands: mostly among the
    last, as new jobs come last, so looked for from the end)."""
    if len(some) < 2:
        return some
    by_uid = {job.uid: job for job in some}
    found: list[JobInfo] = []
    for uid in reversed(jobs):
        job = by_uid.get(uid)
        if job is not None:
            found.append(job)
            if len(found) == len(by_uid):
                break
    found.reverse()
    return found


class JobSums:
    """Each queue's allocated cpu and the pods waiting, over the jobs last given.
    ``handed_on_unchanged`` False (``Shortcuts.timeline_sums_by_jobs_handed_on`` off):
    each job compared with the one last given, also those a snapshot hands on
    (``Snapshot.handed_on``: the same objects, which no write and no session changed)
    along the line of the last update's. ``said_only`` False
    (``Shortcuts.timeline_by_jobs_said_changed`` off): every job looked at, not only
    those the snapshot and its session said may have changed."""

    def __init__(self, handed_on_unchanged: bool = True, said_only: bool = True) -> None:
        self._handed_on_unchanged = handed_on_unchanged
        self._said_only = said_only
        self._jobs: Mapping[str, JobInfo] = {}  # the jobs last given, by uid (kept as given)
        self._cpu_index = -1  # the index of cpu in their snapshot's dimensions
        self._parts: dict[str, Part] = {}
        self._without_tasks: set[str] = set()  # uids of the parts of jobs without tasks
        self._jobs_in: dict[str, int] = {}  # queue -> how many jobs count in it
        self._cpu: dict[str, int] = {}  # queue -> its jobs' whole millicores, added up
        self._magnitude = 0  # the whole millicores' magnitudes, added up
        self._fractions = 0  # parts whose cpu is not whole
        self._pending = 0  # tasks waiting for a node
        self._lineage: tuple[object, int] | None = None  # of the last update's snapshot

    def update(
        self,
        jobs: Mapping[str, JobInfo],
        cpu: int,
        lineage: tuple[object, int] | None = None,
        handed_on: Mapping[str, JobInfo] | None = None,
        said: tuple[frozenset[str] | None, list[str] | None] = (None, None),
    ) -> list[JobInfo]:
        """Take ``jobs`` (a snapshot's, by uid, as its session left them; ``cpu``: the
        index of cpu in its dimensions) as the jobs now. Returns those not the same as
        at the last update (new, another object, touched, or with tasks where they had
        none): in their order when every job was looked at, else in none (their sums
        do not depend on it; ``in_order`` puts a few in order). ``lineage``,
        ``handed_on``: the snapshot's; when it is the next of the line of the last
        update's, a job it hands on is the same unless its session touched it.
        ``said``: the snapshot's ``not_handed_on`` and ``told``; when it has both, only
        those jobs and the ones its session told are looked at. ``jobs`` is kept, not
        copied (a snapshot's own dict, which nothing changes after)."""
        last_lineage, self._lineage = self._lineage, lineage
        if cpu != self._cpu_index:  # other dimensions: no job is the same
            for uid in list(self._parts):
                self._take_out(uid)
            self._jobs, last_lineage = {}, None
        last, without_tasks = self._jobs, self._without_tasks
        unchanged: Mapping[str, JobInfo] = {}
        if handed_on and follows(lineage, last_lineage) and self._handed_on_unchanged:
            unchanged = handed_on
        not_handed_on, told = said
        candidates: Iterable[tuple[str, JobInfo]] = jobs.items()
        said_only = unchanged and not_handed_on is not None and told is not None and self._said_only
        if said_only:
            assert not_handed_on is not None and told is not None
            candidates = [(uid, jobs[uid]) for uid in {*not_handed_on, *told} if uid in jobs]
        changed = [
            (uid, job)
            for uid, job in candidates
            if job.touched
            or (
                uid not in unchanged
                and (
                    last.get(uid) is not job
                    or (job.tasks and uid in without_tasks)  # pods came to a job handed on
                )
            )
        ]
        among = not_handed_on if said_only else None
        for uid in gone_from(last, jobs, among, [uid for uid, _ in changed]):
            self._take_out(uid)
        for uid, job in changed:
            self._take_out(uid)
            self._put_in(uid, Part.of(job, cpu))
        self._jobs, self._cpu_index = jobs, cpu
        return [job for _, job in changed]

    def totals(self) -> tuple[dict[str, float], int] | None:
        """Each queue some job counts in, with its jobs' allocated millicores added up as
        floats in any order would be, and the pods waiting; None when those sums are not
        sure (see the module's docstring): the caller adds them up the long way."""
        if self._fractions or self._magnitude > _EXACT_UP_TO:
            return None
        cpu = {queue: float(self._cpu.get(queue, 0)) for queue in self._jobs_in}
        return cpu, self._pending

    def _put_in(self, uid: str, part: Part) -> None:
        self._parts[uid] = part
        if not part.has_tasks:
            self._without_tasks.add(uid)
        self._jobs_in[part.queue] = self._jobs_in.get(part.queue, 0) + 1
        self._pending += part.waiting
        if not part.whole:
            self._fractions += 1
            return
        whole = int(part.cpu)
        self._cpu[part.queue] = self._cpu.get(part.queue, 0) + whole
        self._magnitude += abs(whole)

    def _take_out(self, uid: str) -> None:
        part = self._parts.pop(uid, None)
        if part is None:
            return
        self._without_tasks.discard(uid)
        left = self._jobs_in[part.queue] - 1
        if left:
            self._jobs_in[part.queue] = left
        else:
            del self._jobs_in[part.queue]
        self._pending -= part.waiting
        if not part.whole:
            self._fractions -= 1
            return
        whole = int(part.cpu)
        self._cpu[part.queue] -= whole
        self._magnitude -= abs(whole)
