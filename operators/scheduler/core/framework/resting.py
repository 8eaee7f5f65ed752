"""Resting gangs, kept from the last session: the running gangs a session need not walk,
dropped when the snapshot is not the next one after the last close's (its ``delta``
does not follow it), or the conf or the set of queues changed.

A session's cost should follow what changed: on a busy cluster nearly every live job
is a quiet running gang, and the open, gang's close, the placing actions' choice of
jobs, publish and the pods' conditions would otherwise each walk every one of them.

A job *rests* in a session when, at its open, it is a quiet gang (``job_status.
quiet_gang``: the last close found it valid and ready and set only its Scheduled
condition, and nothing that finding came from has changed) that is Running, with a
Running status, and no task pending. For such a job, while the session does not touch
it (a session changes a job's tasks only through what marks it ``touched``):

- the open asks no verdict of it; gang's close would set its kept condition again,
  which ``Session.conditions_of`` gives without gang setting it;
- no placing action takes it (nothing pending), the pods' conditions pass it (none
  pending), and publish finds its kept status, the old one: nothing to write, its phase
  Running (its queue's count of running groups has it, ``Session.resting_in``).

So those passes walk ``Session.active_jobs()``, the others, in the snapshot's order; a
resting job the session touches joins them (``Session`` keeps which it touched first).

Which jobs rest is kept from one session to the next (``RestingGangs``): a job resting
at a close rests at the next open when the snapshot's delta is the change since the
last close's snapshot and keeps the job unchanged (``Delta.unchanged``: the same
object, which no session and no write changed since), under the same conf and the same
queues. The quiet-gang test of it would find what it found. Every other job is tested
as before. (The core keeps this itself rather than in ``kbatch.cluster.reuse``: the
core may not import the cluster state; it reads only the snapshot's delta.)
"""

from collections import Counter
from collections.abc import Iterable

from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.delta import Generation
from kbatch.operators.scheduler.core.framework.info import JobInfo, KeptStatus, TaskStatus
from kbatch.operators.scheduler.core.framework.interface import Snapshot

_RUNNING = PodGroupPhase.RUNNING
_PENDING = TaskStatus.PENDING


def rests(job: JobInfo, kept: KeptStatus) -> bool:
    """May ``job``, a quiet gang with ``kept`` its kept status, rest (see the module)?"""
    return not job.counts[_PENDING] and job.phase is _RUNNING and kept.status.phase is _RUNNING


class RestingGangs:
    """The jobs resting at the last close of a scheduler's sessions, and their count by
    queue, with what they rest under: that close's snapshot, conf and queues.
    ``rest_quiet_gangs`` False (``Shortcuts.rest_quiet_gangs`` off): no job rests, every
    pass walks every job."""

    def __init__(self, rest_quiet_gangs: bool = True) -> None:
        self.rest_quiet_gangs = rest_quiet_gangs
        self.jobs: dict[str, JobInfo] = {}
        self.by_queue: Counter[str] = Counter()
        self._under: tuple[Generation, object, frozenset[str]] | None = None

    def carried(self, snapshot: Snapshot, conf: object) -> dict[str, JobInfo]:
        """The jobs that rest in a session on ``snapshot`` under ``conf`` because they
        rested at the last close (this object's own dict, which the session goes on
        with: ``add``, ``wake``, and ``closed`` when it closes)."""
        under, self._under = self._under, None  # until ``closed``: a session may fail
        delta = snapshot.delta
        if (
            not self.rest_quiet_gangs
            or under is None
            or delta is None
            or not delta.follows(under[0])
            or under[1] is not conf
            or under[2] != snapshot.queues.keys()
        ):
            self.jobs.clear()
            self.by_queue.clear()
            return self.jobs
        self.wake(delta.changed_jobs(self.jobs))
        return self.jobs

    def add(self, job: JobInfo) -> None:
        self.jobs[job.uid] = job
        self.by_queue[job.queue] += 1

    def wake(self, uids: Iterable[str]) -> None:
        """These no longer rest."""
        for uid in uids:
            job = self.jobs.pop(uid)
            self.by_queue[job.queue] -= 1

    def closed(self, snapshot: Snapshot, conf: object) -> None:
        """A session on ``snapshot`` under ``conf`` closed with ``jobs`` resting."""
        if snapshot.delta is not None:
            self._under = (snapshot.delta.generation, conf, frozenset(snapshot.queues))
