"""The gang plugin: a job runs all together or not at all.

- job_valid: a job needs at least minMember tasks that can still run;
- job_ready / job_pipelined: minMember tasks placed (or waiting for released room);
- job_order: jobs that are not ready yet go first;
- preemptable / reclaimable: a running gang is never left with 0 < running < minMember;
- on close: the Unschedulable / Scheduled conditions and events, in words.
"""

from kbatch.api.podgroup import ConditionType
from kbatch.config import PluginOption
from kbatch.operators.podgroup.status import condition
from kbatch.operators.scheduler.core.framework.info import (
    READY_STATUSES,
    JobInfo,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.operators.scheduler.core.framework.session import Session, histogram
from kbatch.operators.scheduler.core.framework.tiers import Invalid, no_preemptor

NAME = "gang"


def valid(job: JobInfo) -> Invalid | None:
    have = job.valid_count
    if have >= job.min_member:
        return None
    return Invalid(
        "NotEnoughTasks",
        f"{have}/{job.min_member} tasks in gang: minMember is {job.min_member} "
        f"but only {have} pod(s) exist that can run",
    )


def ready(job: JobInfo) -> bool:
    return job.ready_count >= job.min_member


def pipelined(job: JobInfo) -> bool:
    return job.ready_count + job.counts[TaskStatus.PIPELINED] >= job.min_member


def order_key(job: JobInfo) -> int:
    return 1 if ready(job) else 0


def victims(session: Session, candidates: list[TaskInfo]) -> list[TaskInfo]:
    """Candidates whose eviction keeps every job at ≥ minMember ready tasks (its least
    important ones by task order), or takes the whole gang. Victims already chosen
    this session count (they are Releasing)."""
    spare: dict[str, int] = {}
    by_job: dict[str, list[TaskInfo]] = {}
    for task in candidates:
        by_job.setdefault(task.job, []).append(task)
    chosen: list[TaskInfo] = []
    for job_uid, tasks in by_job.items():
        job = session.jobs[job_uid]
        occupying = job.ready_count - job.counts[TaskStatus.SUCCEEDED]
        spare[job_uid] = job.ready_count - job.min_member
        if spare[job_uid] > 0:
            least_important = sorted(tasks, key=session.task_order_key, reverse=True)
            chosen.extend(least_important[: spare[job_uid]])
        elif 0 < occupying <= len(tasks):
            chosen.extend(tasks)  # the whole running gang at once
    keep = {id(t) for t in chosen}
    return [t for t in candidates if id(t) in keep]


def close(session: Session) -> None:
    for job in session.jobs.values():
        if session.invalid_reason(job) is not None:
            if not job.tasks and session.waiting_reason(job) is not None:
                _report_not_admitted(session, job)
            continue
        pending = job.tasks_with(TaskStatus.PENDING)
        if not job.has_pod_group:
            if pending and not ready(job):
                _report_pods(session, job, pending, "waiting")
            continue
        if ready(job):
            if _was_unschedulable(job):
                session.set_condition(
                    job, condition(ConditionType.UNSCHEDULABLE, False, "Scheduled", "")
                )
            scheduled = sum(job.counts[s] for s in READY_STATUSES)
            session.set_condition(
                job,
                condition(
                    ConditionType.SCHEDULED,
                    True,
                    "Scheduled",
                    f"{scheduled}/{len(job.tasks)} tasks in gang scheduled",
                ),
            )
        elif pending:
            _report_unschedulable(session, job, pending)


def _was_unschedulable(job: JobInfo) -> bool:
    return any(c.type is ConditionType.UNSCHEDULABLE and c.status == "True" for c in job.conditions)


def _report_unschedulable(session: Session, job: JobInfo, pending: list[TaskInfo]) -> None:
    errors = session.fit_errors_of(job)
    waiting = session.waiting_reason(job)
    draining = session.draining_reason(job)
    if draining is not None:  # room is kept for it: say where, not why it did not fit
        why, reason = draining, "NotEnoughResources"
    elif errors:
        why = nodes_unavailable(len(session.nodes), next(iter(errors.values())))
        reason = "NotEnoughResources"
    else:
        why = waiting or "waiting for other gang members to be placed"
        reason = "NotEnoughResources" if waiting is not None else "Unschedulable"
    message = f"{len(pending)}/{len(job.tasks)} tasks in gang unschedulable: {why}"
    session.set_condition(job, condition(ConditionType.UNSCHEDULABLE, True, reason, message))
    session.record_event(
        ObjectRef("PodGroup", job.namespace, job.name), "Warning", "Unschedulable", message
    )
    _report_pods(session, job, pending, message)


def _report_not_admitted(session: Session, job: JobInfo) -> None:
    """A group with no pods yet that enqueue did not admit: its pods may well be held
    until it is (delayed pod creation), so the reason is admission, not a gang with too
    few pods."""
    message = f"gang of {job.min_member} {session.waiting_reason(job)}"
    session.set_condition(
        job, condition(ConditionType.UNSCHEDULABLE, True, "NotEnoughResources", message)
    )
    session.record_event(
        ObjectRef("PodGroup", job.namespace, job.name), "Warning", "Unschedulable", message
    )


def _report_pods(session: Session, job: JobInfo, pending: list[TaskInfo], message: str) -> None:
    """FailedScheduling on each pending pod: its own fit error, else the gang's reason."""
    errors = session.fit_errors_of(job)
    if not errors and not job.has_pod_group:
        message = session.waiting_reason(job) or ""
        if not message:
            return
    nodes = len(session.nodes)
    for task in pending:
        reasons = errors.get(task.uid)
        detail = f"{nodes_unavailable(nodes, reasons)}." if reasons else message
        session.record_event(
            ObjectRef("Pod", task.namespace, task.name), "Warning", "FailedScheduling", detail
        )


def nodes_unavailable(nodes: int, reasons: dict[str, int]) -> str:
    """kube-scheduler's words: '0/4 nodes are available: 4 Insufficient cpu' (the
    counts are of nodes, which the bare histogram left the reader to guess)."""
    return f"0/{nodes} nodes are available: {histogram(reasons)}"


def on_session_open(session: Session, option: PluginOption) -> None:
    del option
    session.add_job_valid_fn(valid)
    session.add_job_ready_fn(ready)
    session.add_job_pipelined_fn(pipelined)
    session.add_job_order_fn(order_key)
    session.add_preemptable_fn(
        lambda _preemptor, candidates: victims(session, candidates), preemptor_key=no_preemptor
    )
    session.add_reclaimable_fn(
        lambda _reclaimer, candidates: victims(session, candidates), preemptor_key=no_preemptor
    )
    session.add_close_fn(close)
