"""The preempt action: a pending task may evict lower-importance tasks of other jobs
in the same queue (victims from ``preemptable``), then, in a second phase, tasks of
its own job. Per job, all through one Statement: if the job cannot become ready
(pipelined) with the room made, nothing is evicted."""

from kbatch.operators.scheduler.framework.eviction import make_room
from kbatch.operators.scheduler.framework.info import JobInfo, TaskInfo, TaskStatus
from kbatch.operators.scheduler.framework.placement import Placer
from kbatch.operators.scheduler.framework.session import Session
from kbatch.operators.scheduler.framework.statement import Statement

NAME = "preempt"


def execute(session: Session) -> None:
    placer = Placer(session)
    jobs = sorted(session.jobs_to_place(), key=session.job_order_key)
    for job in sorted(jobs, key=lambda j: session.queue_order_key(session.queues[j.queue])):
        if session.job_pipelined(job):
            continue

        def other_job_same_queue(t: TaskInfo, job: JobInfo = job) -> bool:
            return t.job != job.uid and session.jobs[t.job].queue == job.queue

        _preempt_for(session, placer, job, other_job_same_queue)
    for job in jobs:
        if job.counts[TaskStatus.PENDING]:

            def same_job(t: TaskInfo, job: JobInfo = job) -> bool:
                return t.job == job.uid

            _preempt_for(session, placer, job, same_job)


def _preempt_for(session: Session, placer: Placer, job: JobInfo, wanted: object) -> None:
    statement = Statement(session)
    tasks = sorted(
        (t for t in job.tasks_with(TaskStatus.PENDING) if not t.template.best_effort),
        key=session.task_order_key,
    )
    for task in tasks:
        session.stats.preemption_attempts += 1
        if not make_room(session, statement, placer, task, wanted, session.preemptable):  # type: ignore[arg-type]
            break
        if session.job_pipelined(job):
            break
    if session.job_pipelined(job):
        statement.commit()
    else:
        statement.discard()
