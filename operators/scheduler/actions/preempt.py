"""The preempt action: a pending task may evict lower-importance tasks of other jobs
in the same queue (victims from ``preemptable``), then, in a second phase, tasks of
its own job. Per job, all through one Statement: if the job cannot become ready
(pipelined) with the room made, nothing is evicted."""

from kbatch.operators.scheduler.framework.eviction import (
    fits_without_eviction,
    make_room,
    pending_tasks,
)
from kbatch.operators.scheduler.framework.info import JobInfo, TaskInfo, TaskStatus
from kbatch.operators.scheduler.framework.placement import Placer
from kbatch.operators.scheduler.framework.session import Session
from kbatch.operators.scheduler.framework.statement import Statement

NAME = "preempt"


def execute(session: Session) -> None:
    placer = Placer(session)
    jobs = sorted(session.jobs_to_place(), key=session.job_order_key)
    for job in sorted(jobs, key=lambda j: session.queue_order_key(session.queues[j.queue])):

        def other_job_same_queue(t: TaskInfo, job: JobInfo = job) -> bool:
            return t.job != job.uid and session.jobs[t.job].queue == job.queue

        _preempt_for(session, placer, job, other_job_same_queue)
    for job in jobs:
        if job.counts[TaskStatus.PENDING]:

            def same_job(t: TaskInfo, job: JobInfo = job) -> bool:
                return t.job == job.uid

            _preempt_for(session, placer, job, same_job)


def _preempt_for(session: Session, placer: Placer, job: JobInfo, wanted: object) -> None:
    if fits_without_eviction(session, placer, job):
        return  # room enough; the job waits for allocate, not for victims
    statement = Statement(session)
    for task in pending_tasks(session, job):
        session.stats.preemption_attempts += 1
        if not make_room(session, statement, placer, task, wanted, session.preemptable):  # type: ignore[arg-type]
            break
        if session.job_pipelined(job):
            break  # kube-batch's pace: until pipelined, else one task a session
    if session.job_pipelined(job):
        statement.commit()
    else:
        statement.discard()
