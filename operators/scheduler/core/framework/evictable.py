"""The running tasks an action could evict, indexed once per action (see EvictableRoom)."""

from collections.abc import Callable, Hashable

import numpy as np

from kbatch.operators.scheduler.core.framework.info import NO_NODE, JobInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.session import Session

EVICTABLE = (TaskStatus.RUNNING, TaskStatus.BOUND)
# How many rules' room per node EvictableRoom keeps at once.
HELD_KEPT = 32


class EvictableRoom:
    """The running tasks an action could evict, indexed once as the action starts: per
    job, the nodes its evictable tasks are on and their requests. What a rule's
    candidates hold on every node is then one ``np.add.at``, not a loop over every
    node's tasks for every task that needs room (DESIGN §10).

    Tasks evicted later in the action are still counted, so this bounds the room a
    node could give from above; ``_plan`` then makes the exact plan on the nodes the
    bound leaves.

    It also remembers the plans that failed. A failed plan depends on the node (its
    version), the session's task states (``Session.changes``), the task's request,
    the rule and what the deciding plugins read of the preemptor; with all of these
    equal it fails again, so a backlog of alike jobs that can evict nothing costs one
    plan per node, not one per job and node.
    """

    def __init__(self, session: Session) -> None:
        self._shape = session.nodes.allocatable.shape
        self._jobs: list[JobInfo] = []
        self._nodes: list[np.ndarray] = []
        self._requests: list[np.ndarray] = []
        self._held: dict[Hashable, np.ndarray] = {}  # by rule key: what its jobs hold
        self.failed: set[Hashable] = set()
        # Whether a gang that can lose none of its tasks may go whole, by (rule key, what
        # the plugins read of the preemptor) and job, as the cluster stands before any
        # statement's victims; ``committed`` forgets it when victims are committed.
        self.whole_gangs: dict[Hashable, dict[str, bool]] = {}
        self.holders: set[str] = set()  # uids of the jobs with evictable tasks
        for job in session.jobs.values():
            tasks = [t for t in job.tasks.values() if t.status in EVICTABLE and t.node != NO_NODE]
            if tasks:
                self.holders.add(job.uid)
                self._jobs.append(job)
                self._nodes.append(np.fromiter((t.node for t in tasks), np.int64, len(tasks)))
                self._requests.append(np.stack([t.request for t in tasks]))

    def held_by(self, key: Hashable, wanted: Callable[[JobInfo], bool]) -> np.ndarray:
        """(nodes × dims): what the evictable tasks of the jobs ``wanted`` accepts hold.
        Rules with one ``key`` pick the same jobs: the answer is kept by key (a few at a
        time; the jobs of a queue take their turns one after another). None: not kept."""
        held = None if key is None else self._held.get(key)
        if held is not None:
            return held
        if len(self._held) >= HELD_KEPT:
            self._held.clear()
        picked = [i for i, job in enumerate(self._jobs) if wanted(job)]
        room = np.zeros(self._shape)
        if picked:
            np.add.at(
                room,
                np.concatenate([self._nodes[i] for i in picked]),
                np.concatenate([self._requests[i] for i in picked]),
            )
        if key is not None:
            self._held[key] = room
        return room

    def committed(self) -> None:
        """A statement's evictions were committed: what may go whole may have changed."""
        self.whole_gangs.clear()
