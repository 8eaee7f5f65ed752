"""The priority plugin: PriorityClass values order jobs and tasks, and shield the
higher-priority from the lower.

With the preempt action configured it also votes on admission (enqueue): a
Pending group whose minResources are covered by what lower-priority jobs of its
own queue hold is admitted although the cluster has no idle room for it — else a
high-priority gang whose pods are held until it is admitted (delayed pod
creation) could never get pods, and preempt could never make room for it. This
is the counterpart of proportion's "within the queue's deserved share, so that
reclaim can make room". What earlier admissions were promised is not promised
again: in the session, what this plugin permitted; from earlier sessions, what the
queue's Inqueue groups at least as important still wait for (a group admitted on
that room is Inqueue until its pods are placed; one less important does not count:
once placed, it is itself room to preempt).
"""

import bisect

import numpy as np

from kbatch.api.podgroup import PodGroupPhase
from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.resources import less_equal, shareable
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.signatures import Vote

NAME = "priority"
_INQUEUE = PodGroupPhase.INQUEUE


def job_key(job: JobInfo) -> int:
    return -job.priority


def task_key(task: TaskInfo) -> int:
    return -task.priority


def victims(session: Session, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
    """Tasks of lower-priority jobs; within the preemptor's own job, lower-priority tasks."""
    return [task for task in candidates if lower(session, preemptor, task)]


def lower(session: Session, preemptor: TaskInfo, task: TaskInfo) -> bool:
    """Is ``task`` less important than ``preemptor`` (``victims`` task by task)?"""
    if task.job == preemptor.job:
        return task.priority < preemptor.priority
    return session.jobs[task.job].priority < session.jobs[preemptor.job].priority


def preemptor_key(session: Session, preemptor: TaskInfo) -> tuple[int, int]:
    """What ``victims`` reads of the preemptor: its job's priority and its own. (Its job
    matters too, for candidates of that very job: the preempt action's rule names the
    job whenever those can be candidates.)"""
    return session.jobs[preemptor.job].priority, preemptor.priority


# Per queue: priorities, ascending, and the running sums of what the jobs up to each
# hold (or, of claims, of what the groups from each up still wait for).
Sums = dict[str, tuple[list[int], np.ndarray]]


class PreemptibleRoom:
    """Per queue, what lower-priority jobs hold (as the session opened), less what is
    promised of it (see the module's docstring)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.mask = shareable(session.dims)
        self._held: Sums | None = None
        self._claimed: Sums | None = None  # by the Inqueue groups, as the session opened
        self.promised: dict[str, np.ndarray] = {}  # by this session's admissions

    def held_below(self, queue: str, priority: int) -> np.ndarray:
        self._sum_up()
        assert self._held is not None
        priorities, held = self._held.get(queue, ([], None))
        below = bisect.bisect_left(priorities, priority)
        if held is None or below == 0:
            return self.session.dims.zeros()
        return held[below - 1] * self.mask

    def claimed_from(self, queue: str, priority: int) -> np.ndarray:
        """What the Inqueue groups of ``queue`` of at least ``priority`` wait for still."""
        self._sum_up()
        assert self._claimed is not None
        priorities, claims = self._claimed.get(queue, ([], None))
        first = bisect.bisect_left(priorities, priority)
        if claims is None or first == len(priorities):
            return self.session.dims.zeros()
        return claims[first]

    def _sum_up(self) -> None:
        """Both sums, on first use: enqueue asks before it admits anything that counts
        (a group without minResources claims nothing), so the jobs are as they opened."""
        if self._held is not None:
            return
        held: dict[str, list[tuple[int, np.ndarray]]] = {}
        claims: dict[str, list[tuple[int, np.ndarray]]] = {}
        for job in self.session.jobs.values():
            if job.allocated.any():
                held.setdefault(job.queue, []).append((job.priority, job.allocated))
            if job.phase is _INQUEUE and (unplaced := job.minimum_unplaced()) is not None:
                claims.setdefault(job.queue, []).append((job.priority, unplaced * self.mask))
        self._held = {queue: _running(entries) for queue, entries in held.items()}
        self._claimed = {
            queue: _running(entries, from_top=True) for queue, entries in claims.items()
        }

    def permits(self, job: JobInfo) -> bool:
        """Do lower-priority jobs of ``job``'s queue hold its minResources, beyond what
        is promised of it?"""
        if job.min_resources is None:
            return False
        need = job.min_resources * self.mask
        room = (
            self.held_below(job.queue, job.priority)
            - self.claimed_from(job.queue, job.priority)
            - self.promised.get(job.queue, 0)
        )
        return bool(need.any()) and less_equal(need, room)

    def enqueueable(self, job: JobInfo) -> tuple[Vote, str]:
        """A verdict, which changes nothing (enqueue may ask it of one group for many
        alike, or ask without admitting)."""
        if not self.permits(job):
            return Vote.ABSTAIN, ""
        return Vote.PERMIT, f"lower-priority jobs of queue {job.queue} hold room to preempt"

    def enqueued(self, job: JobInfo) -> None:
        # Admitted right after its verdict, nothing moved between: asked again, the same.
        if self.permits(job) and job.min_resources is not None:
            promised = self.promised.get(job.queue, self.session.dims.zeros())
            self.promised[job.queue] = promised + job.min_resources * self.mask


def _running(
    entries: list[tuple[int, np.ndarray]], from_top: bool = False
) -> tuple[list[int], np.ndarray]:
    """``entries`` (priority, amount) by priority, ascending, and the sums of their
    amounts up to each (``from_top``: from each to the last)."""
    entries.sort(key=lambda entry: entry[0])
    amounts = np.array([amount for _, amount in entries])
    sums = np.cumsum(amounts[::-1], axis=0)[::-1] if from_top else np.cumsum(amounts, axis=0)
    return [priority for priority, _ in entries], sums


def on_session_open(session: Session, option: PluginOption) -> None:
    del option
    session.add_job_order_fn(job_key)
    session.add_task_order_fn(task_key)
    session.add_preemptable_fn(
        lambda preemptor, candidates: victims(session, preemptor, candidates),
        preemptor_key=lambda preemptor: preemptor_key(session, preemptor),
        keeps=lambda preemptor, task: lower(session, preemptor, task),
    )
    if "preempt" in session.conf.actions:
        room = PreemptibleRoom(session)
        session.add_job_enqueueable_fn(room.enqueueable)
        session.add_event_handler(enqueue=room.enqueued)
