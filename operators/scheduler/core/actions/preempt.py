"""The preempt action: a pending task may evict lower-importance tasks of other jobs
in the same queue (victims from ``preemptable``), then, in a second phase, tasks of
its own job; not one whose preemptionPolicy is Never (``may_preempt``). Per job, all
through one Statement: if the job cannot become ready (pipelined) with the room made,
or a victim's room would be left unused, nothing is evicted. A task its queue may not
take (capability) evicts nothing."""

from collections.abc import Callable, Hashable
from functools import partial

from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.evictable import EvictableRoom
from kbatch.operators.scheduler.core.framework.eviction import make_room, wasted_evictions
from kbatch.operators.scheduler.core.framework.eviction_rules import Rules
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.placement import Placer
from kbatch.operators.scheduler.core.framework.preemptors import jobs_by_queue, outlook
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement

NAME = "preempt"


def execute(session: Session) -> None:
    placer = Placer(session)
    room = EvictableRoom(session)
    keeps = session.preemptable_filter()

    def rules(
        key: Hashable, wanted: Callable[[JobInfo], bool], job: JobInfo, verdicts: Hashable = None
    ) -> Rules:
        """Preempt's rules for ``job``: victims of the jobs ``wanted`` picks."""
        return Rules(
            room,
            key,
            wanted,
            session.preemptable,
            session.preemptable_key,
            queues=frozenset((job.queue,)),
            keeps=keeps,
            verdict_key=verdicts,
        )

    jobs = [job for job in session.jobs_to_place() if may_preempt(session, job)]
    for job in jobs_by_queue(session, jobs):

        def other_job_same_queue(other: JobInfo, job: JobInfo = job) -> bool:
            return other is not job and other.queue == job.queue

        # Alike for every job of the queue that has nothing running to leave out.
        others = ("others in queue", job.queue, job.uid if job.uid in room.holders else None)
        _preempt_for(
            session, placer, job, rules(others, other_job_same_queue, job, "others in queue")
        )
    for job in sorted(jobs, key=session.job_order_key):
        if job.counts[TaskStatus.PENDING]:

            def same_job(other: JobInfo, job: JobInfo = job) -> bool:
                return other is job

            # Alike for every job with nothing running: there are no candidates. (What
            # is learnt of whole gangs is not shared with the first phase: the plugins
            # judge a job's own tasks by other rules, priority by task priority.)
            own = ("own job", job.uid if job.uid in room.holders else None)
            _preempt_for(session, placer, job, rules(own, same_job, job))


def may_preempt(session: Session, job: JobInfo) -> bool:
    """May ``job`` evict for its pending tasks? Not when their preemptionPolicy (their
    own, else their PriorityClass's) is Never: Kubernetes' non-preempting priority,
    which puts them ahead of lower priorities in line but has them evict nobody."""
    never = session.non_preempting
    for task in job.tasks.values():
        if task.status is TaskStatus.PENDING:
            policy = task.template.preemption_policy
            if policy != "Never" and (policy or task.template.priority_class_name not in never):
                return True
    return False


def _preempt_for(session: Session, placer: Placer, job: JobInfo, rules: Rules) -> None:
    pending, fits = outlook(session, placer, job, rules.room)
    if fits:
        return  # room enough; the job waits for allocate, not for victims
    queue = session.queues[job.queue]
    statement = Statement(session)
    statement.claim_kept_room(job)
    for task in pending:
        if not session.allocatable(queue, task):
            break  # its queue may not take it: evicting for it would be in vain
        session.note_preemption_attempt()
        messages = partial(decided.preemption_messages, task, job)
        if not make_room(session, statement, placer, task, rules, messages):
            break
        if session.job_pipelined(job):
            break  # kube-batch's pace: until pipelined, else one task a session
    if session.job_pipelined(job) and not wasted_evictions(session, statement):
        statement.commit()
        rules.room.committed()
    else:
        statement.discard()
