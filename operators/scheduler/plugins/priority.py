"""The priority plugin: PriorityClass values order jobs and tasks, and shield the
higher-priority from the lower."""

from kbatch.config import PluginOption
from kbatch.operators.scheduler.framework.info import JobInfo, TaskInfo
from kbatch.operators.scheduler.framework.session import Session

NAME = "priority"


def job_key(job: JobInfo) -> int:
    return -job.priority


def task_key(task: TaskInfo) -> int:
    return -task.priority


def victims(session: Session, preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
    """Tasks of lower-priority jobs; within the preemptor's own job, lower-priority tasks."""
    mine = session.jobs[preemptor.job].priority
    chosen = []
    for task in candidates:
        if task.job == preemptor.job:
            if task.priority < preemptor.priority:
                chosen.append(task)
        elif session.jobs[task.job].priority < mine:
            chosen.append(task)
    return chosen


def on_session_open(session: Session, option: PluginOption) -> None:
    del option
    session.add_job_order_fn(job_key)
    session.add_task_order_fn(task_key)
    session.add_preemptable_fn(
        lambda preemptor, candidates: victims(session, preemptor, candidates)
    )
