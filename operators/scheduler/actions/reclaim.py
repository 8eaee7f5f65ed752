"""The reclaim action: a queue below its deserved share takes resources back from
queues above theirs — the most over-served queue first — never taking a queue
below its deserved share, and only from queues marked reclaimable (victims from
``reclaimable``). Per job through one Statement: if the job cannot become ready
(pipelined) with the room taken back, nothing is evicted."""

from kbatch.operators.scheduler.framework.eviction import (
    fits_without_eviction,
    make_room,
    pending_tasks,
)
from kbatch.operators.scheduler.framework.info import JobInfo, TaskInfo
from kbatch.operators.scheduler.framework.placement import Placer
from kbatch.operators.scheduler.framework.session import Session
from kbatch.operators.scheduler.framework.statement import Statement

NAME = "reclaim"


def execute(session: Session) -> None:
    placer = Placer(session)
    jobs = session.jobs_to_place()
    by_queue = sorted(
        jobs,
        key=lambda j: (session.queue_order_key(session.queues[j.queue]), session.job_order_key(j)),
    )
    for job in by_queue:
        if session.overused(session.queues[job.queue]):
            continue
        if fits_without_eviction(session, placer, job):
            continue  # allocate will place it
        _reclaim_for(session, placer, job)


def _reclaim_for(session: Session, placer: Placer, job: JobInfo) -> None:
    def from_other_overused_queue(t: TaskInfo) -> bool:
        queue = session.queues.get(session.jobs[t.job].queue)
        return (
            queue is not None
            and queue.name != job.queue
            and queue.reclaimable
            and session.overused(queue)
        )

    def most_over_served_first(reclaimer: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
        victims = session.reclaimable(reclaimer, candidates)
        return sorted(
            victims,
            key=lambda t: session.queue_order_key(session.queues[session.jobs[t.job].queue]),
        )

    def still_over(t: TaskInfo) -> bool:
        return session.overused(session.queues[session.jobs[t.job].queue])

    statement = Statement(session)
    for task in pending_tasks(session, job):
        if not make_room(
            session,
            statement,
            placer,
            task,
            from_other_overused_queue,
            most_over_served_first,
            still_over,
        ):
            break
        if session.job_pipelined(job):
            break
    if session.job_pipelined(job):
        statement.commit()
    else:
        statement.discard()
