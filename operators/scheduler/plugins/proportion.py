"""The proportion plugin: queues share the cluster by weight.

Deserved shares come from water-filling: the cluster is split by weight among
the queues whose request is not yet met; a queue that would get more than it
asks keeps just its request (capped by its capability), and what is left is
split again among the others, until nothing is left or every queue is met.
Dimensions that nobody asks for never keep a queue from being met.
"""

from dataclasses import dataclass, field

import numpy as np

from kbatch.api.podgroup import PodGroupPhase
from kbatch.config import PluginOption
from kbatch.operators.scheduler.framework.info import JobInfo, QueueInfo, TaskInfo
from kbatch.operators.scheduler.framework.resources import EPSILON, less_equal, share, shareable
from kbatch.operators.scheduler.framework.session import Session, Vote

NAME = "proportion"


@dataclass(slots=True)
class QueueShare:
    name: str
    weight: int
    capability: np.ndarray
    request: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray  # minResources of Inqueue jobs not yet allocated
    deserved: np.ndarray = field(init=False)
    share: float = 0.0

    def __post_init__(self) -> None:
        self.deserved = np.zeros_like(self.request)

    def refresh(self) -> None:
        self.share = share(self.allocated, self.deserved)


def deserved_shares(
    total: np.ndarray,
    weights: dict[str, int],
    requests: dict[str, np.ndarray],
    capabilities: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """Water-filling of ``total`` between queues by weight (see module doc).

    Each round splits what is left by weight among the queues not yet met; a
    queue never gets more than min(request, capability) in any dimension (the
    excess goes back to the pool). It ends when every queue is met or nothing
    is left.
    """
    deserved = {name: np.zeros_like(total, dtype=float) for name in weights}
    limit = {name: np.minimum(requests[name], capabilities[name]) for name in weights}
    met = {name for name in weights if less_equal(limit[name], deserved[name])}
    remaining = total.astype(float)
    # Each round meets a queue or empties a dimension, so this bound is never the reason to stop.
    for _ in range((len(weights) + 1) * (len(total) + 1)):
        open_weight = sum(w for name, w in weights.items() if name not in met)
        if open_weight == 0 or np.all(remaining <= EPSILON):
            break
        for name, weight in weights.items():
            if name in met:
                continue
            grown = np.minimum(deserved[name] + remaining * (weight / open_weight), limit[name])
            # met: it has what it asks, or it cannot grow (what it lacks, nobody has left)
            if less_equal(limit[name], grown) or not np.any(grown > deserved[name] + EPSILON):
                met.add(name)
            deserved[name] = grown
        remaining = np.maximum(total - sum(deserved.values(), np.zeros_like(remaining)), 0)
    return deserved


class _Proportion:
    def __init__(self, session: Session) -> None:
        self.session = session
        dims = len(session.dims)
        self.mask = shareable(session.dims)
        self.queues: dict[str, QueueShare] = {}
        for name, queue in session.queues.items():
            capability = queue.capability if queue.capability is not None else np.full(dims, np.inf)
            self.queues[name] = QueueShare(
                name, queue.weight, capability, np.zeros(dims), np.zeros(dims), np.zeros(dims)
            )
        for job in session.jobs.values():
            attr = self.queues.get(job.queue)
            if attr is None:
                continue
            attr.allocated += job.allocated * self.mask
            attr.request += (job.allocated + _pending_request(job)) * self.mask
            if job.phase is PodGroupPhase.INQUEUE and job.min_resources is not None:
                attr.reserved += np.maximum(job.min_resources - job.allocated, 0) * self.mask
        deserved = deserved_shares(
            session.total * self.mask,
            {n: q.weight for n, q in self.queues.items()},
            {n: q.request for n, q in self.queues.items()},
            {n: q.capability for n, q in self.queues.items()},
        )
        for name, attr in self.queues.items():
            attr.deserved = deserved[name]
            attr.refresh()

    def queue_key(self, queue: QueueInfo) -> float:
        return self.queues[queue.name].share

    def overused(self, queue: QueueInfo) -> bool:
        attr = self.queues[queue.name]
        return bool(np.any(attr.allocated > attr.deserved + EPSILON))

    def allocatable(self, queue: QueueInfo, task: TaskInfo) -> bool:
        attr = self.queues[queue.name]
        return less_equal(attr.allocated + task.request * self.mask, attr.capability)

    def enqueueable(self, job: JobInfo) -> tuple[Vote, str]:
        attr = self.queues.get(job.queue)
        if attr is None or job.min_resources is None:
            return Vote.ABSTAIN, ""
        wanted = attr.allocated + attr.reserved + job.min_resources * self.mask
        if not less_equal(wanted, attr.capability):
            return Vote.REJECT, f"queue {job.queue} would exceed its capability"
        if less_equal(wanted, attr.deserved):
            return Vote.PERMIT, f"within queue {job.queue}'s deserved share"
        return Vote.ABSTAIN, ""

    def enqueued(self, job: JobInfo) -> None:
        attr = self.queues.get(job.queue)
        if attr is not None and job.min_resources is not None:
            attr.reserved += np.maximum(job.min_resources - job.allocated, 0) * self.mask

    def victims(self, reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        """Tasks of queues above their deserved share that, without them, still hold their
        deserved share in at least one resource they deserve (Volcano's rule: a queue
        over in cpu but exactly at its deserved memory can still give a task back)."""
        del reclaimer
        taken: dict[str, np.ndarray] = {}
        chosen = []
        for task in candidates:
            queue = self.session.jobs[task.job].queue
            attr = self.queues[queue]
            held = attr.allocated - taken.get(queue, 0)
            after = held - task.request * self.mask
            over = np.any(held > attr.deserved + EPSILON)
            deserved = attr.deserved > EPSILON
            if over and np.any(deserved & (after + EPSILON >= attr.deserved)):
                chosen.append(task)
                taken[queue] = taken.get(queue, 0) + task.request * self.mask
        return chosen

    def changed(self, task: TaskInfo, sign: float) -> None:
        attr = self.queues.get(self.session.jobs[task.job].queue)
        if attr is not None:
            attr.allocated += sign * task.request * self.mask
            attr.refresh()

    def close(self, session: Session) -> None:
        for name, queue in session.queues.items():
            attr = self.queues[name]
            queue.deserved = attr.deserved
            queue.allocated = attr.allocated
            queue.request = attr.request
            queue.share = attr.share


def _pending_request(job: JobInfo) -> np.ndarray:
    """What the job's unplaced tasks ask for (its minResources if it has no pods yet)."""
    pending = job.total_request - job.allocated
    if not job.tasks and job.min_resources is not None:
        return job.min_resources
    return np.maximum(pending, 0)


def on_session_open(session: Session, option: PluginOption) -> None:
    del option
    plugin = _Proportion(session)
    session.add_queue_order_fn(plugin.queue_key)
    session.add_overused_fn(plugin.overused)
    session.add_allocatable_fn(plugin.allocatable)
    session.add_job_enqueueable_fn(plugin.enqueueable)
    session.add_reclaimable_fn(plugin.victims)
    session.add_event_handler(
        allocate=lambda task: plugin.changed(task, +1.0),
        deallocate=lambda task: plugin.changed(task, -1.0),
        enqueue=plugin.enqueued,
    )
    session.add_close_fn(plugin.close)
