"""The backfill action: best-effort tasks (no resource requests) onto the first node,
by name, that passes the predicates — still a gang at a time, all or nothing."""

from kbatch.operators.scheduler.framework.info import NO_NODE, TaskStatus
from kbatch.operators.scheduler.framework.placement import Placer
from kbatch.operators.scheduler.framework.session import Session
from kbatch.operators.scheduler.framework.statement import Statement

NAME = "backfill"


def execute(session: Session) -> None:
    placer = Placer(session, score=False)
    for job in sorted(session.jobs_to_place(), key=session.job_order_key):
        tasks = [t for t in job.tasks_with(TaskStatus.PENDING) if t.template.best_effort]
        if not tasks:
            continue
        statement = Statement(session)
        for task in sorted(tasks, key=session.task_order_key):
            node = placer.first_fit(task)
            if node == NO_NODE:
                session.record_fit_error(job, task, placer.explain(task))
                break
            statement.allocate(task, node)
        if session.job_ready(job):
            statement.commit()
        else:
            statement.discard()
