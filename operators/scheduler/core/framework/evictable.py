"""The running tasks an action could evict, indexed once per action (see EvictableRoom)."""

import itertools
import weakref
from collections.abc import Callable, Hashable, Iterable

import numpy as np

from kbatch.operators.scheduler.core.framework.info import NO_NODE, JobInfo, TaskInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.session import Session

EVICTABLE = (TaskStatus.RUNNING, TaskStatus.BOUND)
# How many rules' room per node EvictableRoom keeps at once.
HELD_KEPT = 32


class EvictableRoom:
    """The running tasks an action could evict, indexed as the action starts (or taken
    from an earlier action of the session that evicted nothing: ``running_tasks``): per
    job, the nodes its evictable tasks are on and their requests, and the jobs by queue.
    What a rule's candidates hold on every node is then one ``np.add.at`` over the jobs
    of the rule's queues, not a loop over every node's tasks for every task that needs
    room (DESIGN §10).

    Tasks evicted later in the action are still counted, so this bounds the room a
    node could give from above; ``_plan`` then makes the exact plan on the nodes the
    bound leaves.

    It also remembers what failed. The session changes in an action only through its
    statements, and those that are not committed are undone, so a session state is known
    by ``generation`` (the commits so far) and the signature of the statement under way
    (``state``). A failed plan depends on that state, the node, the task's request, the
    rule and what the deciding plugins read of the preemptor; with all of these equal it
    fails again, and so does a search over every node for a task of the same template.
    A backlog of alike jobs that can evict nothing costs one search per rule and
    template while nothing is committed, not one per job.
    """

    def __init__(self, session: Session) -> None:
        running = running_tasks(session)
        self._shape = session.nodes.allocatable.shape
        self._jobs = running.jobs
        self._tasks = running.tasks
        self._nodes = running.nodes
        self._requests = running.requests
        self._by_queue = running.by_queue
        self.holders = running.holders  # uids of the jobs with evictable tasks
        self._held: dict[Hashable, np.ndarray] = {}  # by rule key: what its jobs hold
        self.failed: set[Hashable] = set()
        self.generation = 0  # statements committed in the action so far
        # Whether a gang that can lose none of its tasks may go whole, by (rule key, what
        # the plugins read of the preemptor) and job (and whether the rule allows alike
        # members, by what it reads of them), as the cluster stands before any
        # statement's victims; ``committed`` forgets it when victims are committed.
        self.whole_gangs: dict[Hashable, dict[Hashable, bool]] = {}
        # preemptors.outlook's answers by job: (state, pending tasks, fits without eviction)
        self.outlooks: dict[str, tuple[Hashable, list[TaskInfo], bool]] = {}

    def held_by(
        self,
        key: Hashable,
        wanted: Callable[[JobInfo], bool],
        queues: Iterable[str] | None = None,
        keeps: Callable[[TaskInfo], bool] | None = None,
    ) -> np.ndarray:
        """(nodes × dims): what the evictable tasks of the jobs ``wanted`` accepts hold
        (only jobs of ``queues`` are asked, if given; only tasks ``keeps`` accepts count,
        if given). Rules with one ``key`` pick the same tasks: the answer is kept by key
        (a few at a time; the jobs of a queue take their turns one after another). None:
        not kept."""
        held = None if key is None else self._held.get(key)
        if held is not None:
            return held
        if len(self._held) >= HELD_KEPT:
            self._held.clear()
        among = range(len(self._jobs)) if queues is None else self._of_queues(queues)
        chosen = [i for i in among if wanted(self._jobs[i])]
        room = np.zeros(self._shape)
        if not chosen:
            return self._kept(key, room)
        nodes = np.concatenate([self._nodes[i] for i in chosen])
        requests = np.concatenate([self._requests[i] for i in chosen])
        if keeps is not None:  # asked of all the chosen jobs' tasks at once, in order
            tasks = [t for i in chosen for t in self._tasks[i]]
            kept = np.fromiter(map(keeps, tasks), bool, len(tasks))
            nodes, requests = nodes[kept], requests[kept]
        np.add.at(room, nodes, requests)
        return self._kept(key, room)

    def _kept(self, key: Hashable, room: np.ndarray) -> np.ndarray:
        """``room``, kept by ``key`` (None: not kept)."""
        if key is not None:
            self._held[key] = room
        return room

    def _of_queues(self, queues: Iterable[str]) -> list[int]:
        return sorted(i for queue in queues for i in self._by_queue.get(queue, []))

    def state(self, signature: Hashable) -> Hashable:
        """The session state, told apart from every other of the action (see class doc),
        under a statement whose changes so far have ``signature``."""
        return (self.generation, signature)

    def committed(self) -> None:
        """A statement's changes were committed: the session state is a new one, and what
        may go whole may have changed."""
        self.generation += 1
        self.whole_gangs.clear()


class RunningTasks:
    """A session's evictable tasks (running or bound, on a node), by job: per job, its
    tasks, their nodes and their requests; the jobs by queue. Read only."""

    def __init__(self, session: Session) -> None:
        self.jobs: list[JobInfo] = []
        self.tasks: list[list[TaskInfo]] = []
        self.nodes: list[np.ndarray] = []
        self.requests: list[np.ndarray] = []
        self.by_queue: dict[str, list[int]] = {}
        self.holders: set[str] = set()
        for job in session.jobs.values():
            tasks = [t for t in job.tasks.values() if t.status in EVICTABLE and t.node != NO_NODE]
            if tasks:
                self.holders.add(job.uid)
                self.by_queue.setdefault(job.queue, []).append(len(self.jobs))
                self.jobs.append(job)
                self.tasks.append(tasks)
        # All tasks' nodes and requests at once, then each job's slice of them.
        every = [t for tasks in self.tasks for t in tasks]
        nodes = np.fromiter((t.node for t in every), np.int64, len(every))
        requests = _requests(every)
        starts = np.cumsum([0] + [len(tasks) for tasks in self.tasks]).tolist()
        for start, end in itertools.pairwise(starts):
            self.nodes.append(nodes[start:end])
            self.requests.append(requests[start:end])


# Each session's RunningTasks, with the number of evictions it had sent when they were
# indexed.
_INDEXED: "weakref.WeakKeyDictionary[Session, tuple[int, RunningTasks]]" = (
    weakref.WeakKeyDictionary()
)


def running_tasks(session: Session) -> RunningTasks:
    """The session's evictable tasks, indexed once for the actions that follow one
    another (reclaim, then preempt) while none of those tasks changed. In a session a
    task becomes evictable only in the snapshot (a bind makes it Binding, not Bound),
    and stops being so only by an eviction: a statement's, undone unless committed, and
    the committed ones are the outcome's. So the index an earlier action made holds as
    long as the outcome has no more evictions than then."""
    sent = len(session.outcome.evictions)
    known = _INDEXED.get(session)
    if known is not None and known[0] == sent:
        return known[1]
    running = RunningTasks(session)
    _INDEXED[session] = (sent, running)
    return running


def _requests(tasks: list[TaskInfo]) -> np.ndarray:
    """(tasks × dims): their requests. Tasks share a few templates: each is stacked once."""
    if not tasks:
        return np.zeros((0, 0))
    index: dict[int, int] = {}
    shared: list[np.ndarray] = []
    which = []
    for task in tasks:
        i = index.get(id(task.template))
        if i is None:
            i = index[id(task.template)] = len(shared)
            shared.append(task.request)
        which.append(i)
    return np.stack(shared)[which]
