"""The backfill action: best-effort tasks (no resource requests) onto the first node,
by name, that passes the predicates — still a gang at a time, all or nothing.

``place_best_effort`` is also allocate's step for the best-effort members of a gang
its requested tasks alone cannot make ready."""

from kbatch.operators.scheduler.core.framework.info import NO_NODE, JobInfo, TaskStatus
from kbatch.operators.scheduler.core.framework.placement import Placer
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.statement import Statement

NAME = "backfill"


def execute(session: Session) -> None:
    placer = Placer(session, score=False)
    for job in sorted(session.jobs_to_place(), key=session.job_order_key):
        if not any(t.template.best_effort for t in job.tasks_with(TaskStatus.PENDING)):
            continue
        statement = Statement(session)
        place_best_effort(session, placer, job, statement)
        if session.job_ready(job):
            statement.commit()
        else:
            statement.discard()


def place_best_effort(
    session: Session, placer: Placer, job: JobInfo, statement: Statement, until_ready: bool = False
) -> int:
    """Allocate ``job``'s pending best-effort tasks, by task order, each to the first node
    by name that passes the predicates; stop at one that fits nowhere (its fit error
    recorded) or, if ``until_ready``, once the job is ready. Returns how many were placed."""
    tasks = [t for t in job.tasks_with(TaskStatus.PENDING) if t.template.best_effort]
    placed = 0
    for task in sorted(tasks, key=session.task_order_key):
        node = placer.first_fit(task)
        if node == NO_NODE:
            session.note_fit_error(job, task, placer.explain(task))
            break
        statement.allocate(task, node)
        placed += 1
        if until_ready and session.job_ready(job):
            break
    return placed
