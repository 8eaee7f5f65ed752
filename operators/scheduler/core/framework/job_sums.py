"""Sums over a snapshot's jobs kept from the last session by what changed since (the
snapshot's ``delta``), dropped when the snapshot's delta does not follow the last
update's snapshot (then every job is compared with what was last seen of it), when the
mask, queues or dimensions change, or when a sum may be rounded. Two sets of sums:

- ``QueueSums``: each queue's allocated, request and reserved, as the proportion plugin
  adds them up at session open (``kept_sums``);
- ``JobSums``: each queue's allocated cpu and the pods waiting, as the simulator's
  timeline adds them up at every tick.

On a busy cluster one or two of a session's hundreds of jobs change; adding up every
job each time would cost more than the rest of the bookkeeping. So each keeps every
job's *part* (what it adds to the sums) and takes a part again only for a job that is
not the same as at the last update: new, another object, touched by a session, or
changed in what its part reads that may change in place.

A snapshot keeps a job unchanged when nothing of it was written and no session touched
it (``Delta.unchanged_jobs``; a session changes a job's tasks only through what marks
it ``touched``). A job without tasks is kept while its PodGroup stays the same, and
pods that come meanwhile are put in it in place, with its allocation, request and
minResources (hence the count of its tasks, compared); a session may move its
``phase`` and the builder set it back (hence whether it reserves, compared). Nothing
else writes a job's queue, allocation, request or minResources. So when the delta
follows the last update's snapshot, only the jobs it does not keep unchanged are
compared.

The long way adds the parts up as floats, job after job. The sums kept here are of
parts that are whole numbers (and, for the queue sums, non-negative), added and taken
out in any order: as long as every sum stays below 2**53 each of those steps is exact,
and so is each step of the long way, so both give the same floats. A part that is not
whole (a fraction of a millicore), or a sum that reaches 2**53, sends the caller the
long way.

The queue sums are kept for one mask and one list of queues at a time, by the
scheduler whose sessions they are of (``Session.kept``): a session of another line of
snapshots finds other job objects, which costs a rebuild, never a wrong answer. The
dimensions' names are not compared: the parts read the jobs' vectors and the mask only
(as the long way does), and a snapshot under other dimensions makes its jobs anew.
(These sums live in the core, not in ``kbatch.cluster.reuse``, because the proportion
plugin needs them and the core may not import the cluster state; the simulator may
import the core.)
"""

import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from kbatch.api import DEFAULT_QUEUE
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.delta import (
    Delta,
    Generation,
    generation_of,
    gone_jobs,
)
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.kept import KeptAcrossSessions
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

# A part's rows: what it adds to its queue's allocated, request and reserved.
ALLOCATED, REQUEST, RESERVED = range(3)
# Every whole number below this is a float exactly.
_EXACT_BELOW = 2.0**53
_INQUEUE = PodGroupPhase.INQUEUE  # read once: an Enum member off its class is slow

# What a job's part reads that may change in place: its count of tasks, and whether it
# reserves (Inqueue with minResources). With the job itself, compared by identity.
Seen = tuple[JobInfo, int, bool]
# What the sums were kept for: the mask's bytes, the queues' names in order.
Key = tuple[bytes, tuple[str, ...]]


def since(delta: Delta | None, last: Generation | None, by_delta: bool) -> Delta | None:
    """``delta`` when it says what changed since the snapshot of ``last`` (the last
    update's) and the caller takes it so (``by_delta``); None: compare every job."""
    return delta if by_delta and delta is not None and delta.follows(last) else None


def parts(jobs: Sequence[JobInfo], mask: np.ndarray) -> np.ndarray:
    """Each job's part, masked: a (jobs × 3 × dims) array, rows ALLOCATED, REQUEST and
    RESERVED. Element by element the same floats whichever jobs are asked together.
    A job's request is what it holds and what its unplaced tasks ask for; a job with no
    pods yet (most of a long line) holds nothing and asks for its minResources, if it
    says any: its rows are filled in one step with the others of its kind."""
    allocated = np.zeros((len(jobs), len(mask)))
    pending = np.zeros((len(jobs), len(mask)))
    with_pods = [i for i, job in enumerate(jobs) if job.tasks]
    if with_pods:
        held = np.array([jobs[i].allocated for i in with_pods])
        asked = np.array([jobs[i].total_request for i in with_pods])
        allocated[with_pods] = held
        pending[with_pods] = np.maximum(asked - held, 0)
    asking = [i for i, job in enumerate(jobs) if not job.tasks and job.min_resources is not None]
    if asking:
        pending[asking] = np.array([jobs[i].min_resources for i in asking])
    out = np.zeros((len(jobs), 3, len(mask)))
    out[:, ALLOCATED] = allocated * mask
    out[:, REQUEST] = (allocated + pending) * mask
    reserving = [i for i, job in enumerate(jobs) if _reserves(job)]
    if reserving:
        minimums = np.array([jobs[i].min_resources for i in reserving])
        out[reserving, RESERVED] = np.maximum(minimums - allocated[reserving], 0) * mask
    return out


def _reserves(job: JobInfo) -> bool:
    return job.phase is _INQUEUE and job.min_resources is not None


def _seen(job: JobInfo) -> Seen:
    return job, len(job.tasks), _reserves(job)


class QueueSums:
    """The sums of the parts of the jobs last given, by queue (rows in ``key``'s order)."""

    def __init__(self, key: Key) -> None:
        self.key = key
        self._mask = np.frombuffer(key[0]).copy()  # shareable's floats
        self._rows = {name: i for i, name in enumerate(key[1])}
        self._totals = np.zeros((len(self._rows), 3, len(self._mask)))
        self._seen: dict[str, Seen] = {}  # the jobs last given, by uid
        self._parts: dict[str, tuple[int, np.ndarray]] = {}  # uid -> (queue row, part)
        self._unsure: set[str] = set()  # uids of parts not whole or negative
        self._generation: Generation | None = None  # of the last update's snapshot

    def update(
        self, jobs: Mapping[str, JobInfo], delta: Delta | None = None, by_delta: bool = True
    ) -> np.ndarray | None:
        """Take ``jobs`` (a session's, by uid) as the jobs now: the (queues × 3 × dims)
        sums of their parts, as the long way adds them; None when they are not sure (see
        the module's docstring), for the caller to add them up the long way. ``delta``:
        the snapshot's; when it follows the last update's snapshot, the jobs it keeps
        unchanged are not compared. ``by_delta`` False
        (``Shortcuts.queue_sums_by_unchanged_jobs`` off): every job compared with what
        was last seen of it, whatever the delta."""
        last, self._generation = self._generation, generation_of(delta)
        seen, inqueue = self._seen, _INQUEUE
        kept = since(delta, last, by_delta)
        # (the jobs the delta keeps are the same objects, which no session and no write
        # changed since: the same count of tasks, phase and reservation as last seen)
        uids: Iterable[str] = jobs if kept is None else kept.changed_jobs(jobs)
        changed = [
            uid
            for uid in uids
            # ``_seen(job)``, inline: this runs for every job of every session
            if (job := jobs[uid]).touched
            or seen.get(uid)
            != (job, len(job.tasks), job.phase is inqueue and job.min_resources is not None)
        ]
        if len(changed) == len(jobs):  # none kept (the first session, another scheduler's)
            self._clear()  # all taken out at once, not part by part
        else:
            gone = gone_jobs(seen, jobs, changed, None if kept is None else kept.changed)
            self._take_out([*gone, *changed])
            for uid in gone:
                del seen[uid]
        for uid in changed:
            seen[uid] = _seen(jobs[uid])
        self._put_in([(uid, jobs[uid]) for uid in changed])
        if self._unsure:
            return None
        if not (self._totals < _EXACT_BELOW).all():  # may be rounded: start again
            self._clear()
            self._generation = None  # nothing kept: the next update adds up every job
            return None
        return self._totals

    def _clear(self) -> None:
        self._seen.clear()
        self._totals[:] = 0.0
        self._parts.clear()
        self._unsure.clear()

    def _take_out(self, uids: Iterable[str]) -> None:
        rows: list[int] = []
        values: list[np.ndarray] = []
        for uid in uids:
            part = self._parts.pop(uid, None)
            if part is None:
                self._unsure.discard(uid)
                continue
            rows.append(part[0])
            values.append(part[1])
        if rows:  # exact: each sum stays a whole number below 2**53
            np.subtract.at(self._totals, np.array(rows, dtype=np.intp), np.array(values))

    def _put_in(self, jobs: list[tuple[str, JobInfo]]) -> None:
        ours = [(uid, job) for uid, job in jobs if job.queue in self._rows]
        if not ours:
            return
        each = parts([job for _, job in ours], self._mask)
        rows = np.fromiter((self._rows[job.queue] for _, job in ours), np.intp, len(ours))
        whole = (each >= 0) & (each == np.floor(each))  # (NaN is not; an infinity reaches 2**53)
        sure = whole.reshape(len(ours), -1).all(axis=1)
        uids = [uid for uid, _ in ours]
        if sure.all():  # the common case, in one step (a first session's thousands)
            np.add.at(self._totals, rows, each)
            self._parts.update(zip(uids, zip(rows.tolist(), each, strict=True), strict=True))
            return
        np.add.at(self._totals, rows[sure], each[sure])
        for uid, row, part, is_sure in zip(uids, rows.tolist(), each, sure.tolist(), strict=True):
            if is_sure:
                self._parts[uid] = (row, part)
            else:
                self._unsure.add(uid)


def kept_sums(
    kept: KeptAcrossSessions,
    jobs: Mapping[str, JobInfo],
    mask: np.ndarray,
    queues: Iterable[str],
    delta: Delta | None = None,
    shortcuts: Shortcuts = ALL,
) -> np.ndarray | None:
    """The (queues × 3 × dims) sums of the parts of ``jobs`` by queue, in the order of
    ``queues``, from those ``kept`` at the last call (the scheduler's: ``Session.kept``);
    None: add them up the long way (always, ``Shortcuts.queue_sums`` off). ``delta``:
    the snapshot's (``QueueSums.update``)."""
    if not shortcuts.queue_sums:
        kept.drop(QueueSums)
        return None
    key = (np.asarray(mask, dtype=float).tobytes(), tuple(queues))
    sums = kept.get(QueueSums)
    if sums is None or sums.key != key:
        sums = QueueSums(key)
        kept.put(sums)
    return sums.update(jobs, delta, shortcuts.queue_sums_by_unchanged_jobs)


# What waits for a node, read from a session's snapshot as the session left it.
WAITING = (TaskStatus.PENDING, TaskStatus.PIPELINED)
# A job's counts of its tasks in WAITING (``JobInfo.counts`` is by status).
_waiting_counts = operator.itemgetter(*WAITING)


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
    """Each queue's allocated cpu and the pods waiting, over the jobs last given (the
    timeline's). ``by_delta`` False (``Shortcuts.timeline_sums_by_unchanged_jobs``
    off): each job compared with the one last given, also those the snapshot's delta
    keeps unchanged. ``said_only`` False (``Shortcuts.timeline_by_jobs_said_changed``
    off): every job looked at, not only those the delta says may have changed."""

    def __init__(self, by_delta: bool = True, said_only: bool = True) -> None:
        self._by_delta = by_delta
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
        self._generation: Generation | None = None  # of the last update's snapshot

    def update(
        self, jobs: Mapping[str, JobInfo], cpu: int, delta: Delta | None = None
    ) -> list[JobInfo]:
        """Take ``jobs`` (a snapshot's, by uid, as its session left them; ``cpu``: the
        index of cpu in its dimensions) as the jobs now. Returns those not the same as
        at the last update (new, another object, touched, or with tasks where they had
        none): in their order when every job was looked at, else in none (their sums
        do not depend on it; ``in_order`` puts a few in order). ``delta``: the
        snapshot's; when it follows the last update's snapshot, a job it keeps
        unchanged is the same unless its session touched it, and when it knows which
        jobs changed and which sessions changed, only those are looked at. ``jobs`` is
        kept, not copied (a snapshot's own dict, which nothing changes after)."""
        last_generation, self._generation = self._generation, generation_of(delta)
        if cpu != self._cpu_index:  # other dimensions: no job is the same
            for uid in list(self._parts):
                self._take_out(uid)
            self._jobs, last_generation = {}, None
        last, without_tasks = self._jobs, self._without_tasks
        kept = since(delta, last_generation, self._by_delta)
        unchanged: Mapping[str, JobInfo] = {} if kept is None else kept.unchanged_jobs
        candidates: Iterable[tuple[str, JobInfo]] = jobs.items()
        among = None
        if unchanged and self._said_only:
            assert kept is not None
            changed_uids, by_sessions = kept.changed, kept.changed_by_sessions
            if changed_uids is not None and by_sessions is not None:
                among = changed_uids
                candidates = [(u, jobs[u]) for u in {*changed_uids, *by_sessions} if u in jobs]
        changed = [
            (uid, job)
            for uid, job in candidates
            if job.touched
            or (
                uid not in unchanged
                and (
                    last.get(uid) is not job
                    or (job.tasks and uid in without_tasks)  # pods came to a job kept unchanged
                )
            )
        ]
        for uid in gone_jobs(last, jobs, [uid for uid, _ in changed], among):
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
        if self._fractions or self._magnitude > _EXACT_BELOW:
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
