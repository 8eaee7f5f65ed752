"""A Statement: the changes one action makes to a session, kept or undone together.

``commit()`` puts them in the session's outcome (binds for allocations, evictions,
nominations for room kept while a node drains), which the backend applies when the
session ends (a listener is told a commit's binds at once: ``Session.committed_binds``);
``discard()`` undoes them in the session and keeps nothing. Pipelined tasks are never
sent: they hold room on a node until the resources being released there are free. This
is what makes a gang all or nothing without touching the API server.
"""

from dataclasses import dataclass
from enum import Enum

from kbatch.operators.scheduler.core.framework.info import NO_NODE, JobInfo, TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.session import Session


class Op(Enum):
    ALLOCATE = "allocate"
    PIPELINE = "pipeline"
    EVICT = "evict"
    UNRESERVE = "unreserve"
    DRAIN = "drain"


# Read per task placed and sent: an Enum member read off its class is a Python call.
_ALLOCATE, _PIPELINE, _EVICT, _DRAIN = Op.ALLOCATE, Op.PIPELINE, Op.EVICT, Op.DRAIN
_ALLOCATED, _PIPELINED = TaskStatus.ALLOCATED, TaskStatus.PIPELINED


@dataclass(slots=True)
class _Change:
    op: Op
    task: TaskInfo
    previous: TaskStatus
    reason: str = ""
    disruption: str = ""  # an eviction's DisruptionTarget message (who takes the room)
    nominated: int = NO_NODE


class Statement:
    def __init__(self, session: Session) -> None:
        self.session = session
        self._changes: list[_Change] = []

    def __len__(self) -> int:
        return len(self._changes)

    def allocate(self, task: TaskInfo, node: int) -> None:
        self._changes.append(_Change(_ALLOCATE, task, task.status))
        self.session.set_status(task, _ALLOCATED, node)

    def pipeline(self, task: TaskInfo, node: int) -> None:
        self._changes.append(_Change(_PIPELINE, task, task.status))
        self.session.set_status(task, _PIPELINED, node)

    def place(self, task: TaskInfo, node: int, pipelined: bool) -> None:
        """Allocate ``task`` on ``node``, or pipeline it there if it must wait for room
        being released."""
        if pipelined:
            self.pipeline(task, node)
        else:
            self.allocate(task, node)

    def evict(self, task: TaskInfo, reason: str, disruption: str = "") -> None:
        """Evict ``task``: ``reason`` for its Evict events, ``disruption`` for the
        DisruptionTarget condition its pod gets first (none for a trial eviction that
        is rolled back)."""
        self._changes.append(_Change(Op.EVICT, task, task.status, reason, disruption))
        self.session.set_status(task, TaskStatus.RELEASING)

    def claim_kept_room(self, job: JobInfo) -> None:
        """The room kept for ``job``'s pending tasks (their nominated nodes) is theirs to
        take now: no longer held against them as against everyone else."""
        if not self.session.any_room_kept():
            return
        for task in job.tasks_with(TaskStatus.PENDING):
            if task.nominated != NO_NODE:
                node = self.session.unkeep(task)
                self._changes.append(_Change(Op.UNRESERVE, task, task.status, nominated=node))

    def drain(self, task: TaskInfo, node: int, why: str) -> None:
        """Keep ``node``'s room for pending ``task`` until what runs there ends: no one
        else is placed in it, in this session at once. ``commit`` keeps it in the
        cluster too (the task's nominated node) and past this session's close, and tells
        the job ``why`` it waits; ``discard`` gives the room back to where it was kept
        before (if anywhere)."""
        before = task.nominated
        self._changes.append(_Change(Op.DRAIN, task, task.status, why, nominated=before))
        if before != node:
            if before != NO_NODE:
                self.session.unkeep(task)
            self.session.keep(task, node)

    def signature(self) -> tuple[tuple[Op, str, int], ...]:
        """The changes made so far, as a key: from one session state, statements with
        equal signatures leave equal states (eviction keeps verdicts by it)."""
        return tuple((c.op, c.task.uid, c.task.node) for c in self._changes)

    def evicted(self) -> list[TaskInfo]:
        return [c.task for c in self._changes if c.op is Op.EVICT]

    def mark(self) -> int:
        """A point to roll back to (see ``rollback``)."""
        return len(self._changes)

    def rollback(self, mark: int) -> None:
        """Undo, in the session, the changes made since ``mark``."""
        for change in reversed(self._changes[mark:]):
            self._undo(change)
        del self._changes[mark:]

    def commit(self) -> None:
        """Send the changes. Tasks pipelined by a statement that evicts are nominated to
        their nodes: the room their victims free is kept for them in the next sessions,
        not taken by whoever comes first once the victims are gone. The binds it sends
        are told, all together, to whoever listens (``Session.committed_binds``)."""
        evicts = any(change.op is _EVICT for change in self._changes)
        dispatch = self.session.dispatch
        binds = self.session.outcome.binds
        before = len(binds)
        for change in self._changes:
            op = change.op
            if op is _ALLOCATE:
                dispatch(change.task)
            elif op is _EVICT:
                self.session.evict_now(change.task, change.reason, change.disruption)
            elif op is _PIPELINE and evicts and change.task.status is _PIPELINED:
                self.session.nominate(change.task, change.task.node)
            elif op is _DRAIN:
                if change.task.nominated != change.nominated:
                    self.session.nominate(change.task, change.task.nominated)
                self.session.keep_draining(change.task, change.reason)
        self._changes.clear()
        listener = self.session.committed_binds
        if listener is not None and len(binds) > before:
            listener(binds[before:])

    def discard(self) -> None:
        self.rollback(0)

    def _undo(self, change: _Change) -> None:
        if change.op is Op.UNRESERVE:
            self.session.keep(change.task, change.nominated)
            return
        if change.op is Op.DRAIN:
            if change.task.nominated != change.nominated:
                self.session.unkeep(change.task)
                if change.nominated != NO_NODE:
                    self.session.keep(change.task, change.nominated)
            return
        node = change.task.node if change.previous is not TaskStatus.PENDING else NO_NODE
        self.session.set_status(change.task, change.previous, node)
