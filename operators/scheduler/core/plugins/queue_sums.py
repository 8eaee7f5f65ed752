"""Each queue's allocated, request and reserved as the proportion plugin adds them up at
session open, kept from one session to the next by the jobs that changed (issue 12: a
simulator session's cost should follow what changed; in the half-hour trace, adding up
every job of ~430, of which two or three change per session, cost 9% of a session).

A job's *part* is what it adds to its queue's sums (``parts``): its allocation, its
request (what it holds and what its unplaced tasks ask; without tasks, its
minResources) and, Inqueue with minResources, its reservation, all masked. A part is
taken again only for a job that is not the same as at the last session open: new,
another object, touched by a session, or changed in what its part reads that may change
in place. A snapshot hands a job on unchanged when nothing of it was written and no
session touched it (``kbatch.cluster.kept_jobs``; a session changes a job's tasks only
through what marks it ``touched``); a job without tasks is handed on while its PodGroup
stays the same (``kbatch.cluster.group_parts``), and pods that come meanwhile are put in
it in place, with its allocation, request and minResources (hence the count of its
tasks, compared); a session may move its ``phase`` and the builder set it back (hence
whether it reserves, compared). Nothing else writes a job's queue, allocation, request
or minResources. When the snapshot is the next one of the line of the last update's
(``Snapshot.lineage``), the jobs it hands on (``Snapshot.handed_on``: the same objects,
which neither a write nor a session changed since; with tasks, or without and their
unit not written, so that no pod came and their phase is their group's) are
unchanged, and only the others are compared.

The long way adds the parts up as floats, job after job. The sums kept here are of
parts that are whole and non-negative, added and taken out in any order: as
long as every sum stays below 2**53 each of those steps is exact, and so is each step
of the long way, so both give the same floats. A part that is not whole (a fraction of
a millicore), or a sum that reaches 2**53, sends the caller the long way.

The sums are kept for one mask and one list of queues at a time, by the scheduler whose
sessions they are of (``Session.kept``): a session of another line of snapshots finds
other job objects, which costs a rebuild, never a wrong answer. The dimensions' names are not
compared: the parts read the jobs' vectors and the mask only (as the long way does), and
a snapshot under other dimensions makes its jobs anew (``kept_jobs.JobContext``).
"""

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.info import JobInfo
from kbatch.operators.scheduler.core.framework.interface import (
    follows,
    gone_from,
    not_handed_on_of,
)
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
Lineage = tuple[object, int]  # a snapshot's maker and its number (Snapshot.lineage)


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
        self._lineage: Lineage | None = None  # of the last update's snapshot

    def update(
        self,
        jobs: Mapping[str, JobInfo],
        lineage: Lineage | None = None,
        handed_on: Mapping[str, JobInfo] | None = None,
        not_handed_on: frozenset[str] | None = None,
        handed_on_unchanged: bool = True,
    ) -> np.ndarray | None:
        """Take ``jobs`` (a session's, by uid) as the jobs now: the (queues × 3 × dims)
        sums of their parts, as the long way adds them; None when they are not sure (see
        the module's docstring), for the caller to add them up the long way. ``lineage``
        and ``handed_on``: those of the snapshot ``jobs`` are of; when it is the next
        of the line of the last update's, the jobs it hands on are those unchanged;
        ``not_handed_on`` (``Snapshot.not_handed_on``), the others, when known.
        ``handed_on_unchanged`` False (``Shortcuts.queue_sums_by_jobs_handed_on`` off):
        every job compared with what was last seen of it, whatever the snapshot."""
        last, self._lineage = self._lineage, lineage
        seen, inqueue = self._seen, _INQUEUE
        uids: Iterable[str] = jobs
        said = handed_on is not None and follows(lineage, last) and handed_on_unchanged
        if said:
            assert handed_on is not None
            # The same objects, which no session and no write changed since: the same
            # count of tasks, phase (and so reservation) as at the last update.
            uids = not_handed_on_of(jobs, handed_on, not_handed_on)
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
            gone = gone_from(seen, jobs, not_handed_on if said else None, changed)
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
            self._lineage = None  # nothing kept: the next update adds up every job
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
    lineage: Lineage | None = None,
    handed_on: Mapping[str, JobInfo] | None = None,
    not_handed_on: frozenset[str] | None = None,
    shortcuts: Shortcuts = ALL,
) -> np.ndarray | None:
    """The (queues × 3 × dims) sums of the parts of ``jobs`` by queue, in the order of
    ``queues``, from those ``kept`` at the last call (the scheduler's: ``Session.kept``);
    None: add them up the long way (always, ``Shortcuts.queue_sums`` off). ``lineage``,
    ``handed_on``, ``not_handed_on``: of the snapshot of ``jobs`` (``QueueSums.update``)."""
    if not shortcuts.queue_sums:
        kept.drop(QueueSums)
        return None
    key = (np.asarray(mask, dtype=float).tobytes(), tuple(queues))
    sums = kept.get(QueueSums)
    if sums is None or sums.key != key:
        sums = QueueSums(key)
        kept.put(sums)
    return sums.update(
        jobs, lineage, handed_on, not_handed_on, shortcuts.queue_sums_by_jobs_handed_on
    )
