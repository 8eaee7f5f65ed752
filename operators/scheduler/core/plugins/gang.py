"""The gang plugin: a job runs all together or not at all.

- job_valid: a job needs at least minMember tasks that can still run, and as many of
  each role as its minTaskMember asks (DESIGN §12; a pod's role is its kbatch.io/task);
- job_ready / job_pipelined: minMember tasks placed (or waiting for released room), and
  every role's minimum among them;
- job_order: jobs that are not ready yet go first;
- task_order: within a job, tasks of a role still short of its minimum go first, so
  that the room goes to the roles the gang needs before the ones it has enough of;
- preemptable / reclaimable: a running gang is never left with 0 < running < minMember,
  nor a role below its minimum: only tasks beyond both go, or the whole gang at once;
- on close: the Unschedulable / Scheduled conditions and events, in words, naming the
  role that is short.
"""

import functools
from collections.abc import Mapping

from kbatch.api.podgroup import ConditionType, PodGroupCondition
from kbatch.config import PluginOption
from kbatch.operators.scheduler.core.framework import node_fit
from kbatch.operators.scheduler.core.framework.fit_errors import FitError, nodes_unavailable
from kbatch.operators.scheduler.core.framework.info import (
    READY_STATUSES,
    JobInfo,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.operators.scheduler.core.framework.outcome import Event, failed_scheduling
from kbatch.operators.scheduler.core.framework.podgroup_status import condition
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.signatures import Invalid
from kbatch.operators.scheduler.core.framework.victims import no_preemptor

NAME = "gang"


# Tasks that can still take part in the gang (as JobInfo.valid_count counts them).
VALID_STATUSES = frozenset(TaskStatus) - {
    TaskStatus.FAILED,
    TaskStatus.UNKNOWN,
    TaskStatus.RELEASING,
}
PIPELINED_STATUSES = READY_STATUSES | {TaskStatus.PIPELINED}


def short_roles(job: JobInfo, statuses: frozenset[TaskStatus]) -> list[tuple[str, int, int]]:
    """(role, tasks of it in ``statuses``, its minimum) for each role below its minimum."""
    if not job.min_task_member:  # most gangs: no roles (asked of every gang, every session)
        return []
    short = []
    for role, minimum in sorted(job.min_task_member.items()):
        have = job.role_count(role, statuses)
        if have < minimum:
            short.append((role, have, minimum))
    return short


def valid(job: JobInfo) -> Invalid | None:
    have = job.valid_count if job.tasks else 0  # none: most of a backlog, held until admitted
    if have < job.min_member:
        if job.gated is not None:  # (the pods that would make up the gang are gated)
            short = too_few(have, job.min_member)
            return Invalid("SchedulingGated", f"{short.message}; {job.gated.words()}")
        return too_few(have, job.min_member)
    for role, have, minimum in short_roles(job, VALID_STATUSES):
        return Invalid(
            "NotEnoughTasks",
            f"role {role}: {have}/{minimum} tasks in gang: minTaskMember asks {minimum} "
            f"but only {have} pod(s) of role {role} exist that can run",
        )
    return None


@functools.lru_cache(maxsize=1024)
def too_few(have: int, min_member: int) -> Invalid:
    """The verdict on a gang of ``have`` tasks that can run, below ``min_member``: made
    once per pair (verdicts are frozen), not once per waiting group and session."""
    return Invalid(
        "NotEnoughTasks",
        f"{have}/{min_member} tasks in gang: minMember is {min_member} "
        f"but only {have} pod(s) exist that can run",
    )


def ready(job: JobInfo) -> bool:
    if job.ready_count < job.min_member:
        return False
    return not job.min_task_member or not short_roles(job, READY_STATUSES)


def pipelined(job: JobInfo) -> bool:
    if job.ready_count + job.counts[TaskStatus.PIPELINED] < job.min_member:
        return False
    return not job.min_task_member or not short_roles(job, PIPELINED_STATUSES)


def order_key(job: JobInfo) -> int:
    return 1 if ready(job) else 0


def task_order_key(jobs: Mapping[str, JobInfo], task: TaskInfo) -> int:
    """0 for a pending task its role needs to reach minTaskMember: the first (by name)
    as many pending tasks of the role as it is short of; 1 for every other task. (Of the
    session's ``jobs``: bound once, as every task order key of a backlog asks it.)"""
    job = jobs.get(task.job)
    if job is None or task.role not in job.min_task_member or task.status != TaskStatus.PENDING:
        return 1
    short = job.min_task_member[task.role] - job.role_count(task.role, READY_STATUSES)
    if short <= 0:
        return 1
    ahead = sum(
        1
        for other in job.tasks.values()
        if other.role == task.role and other.status == TaskStatus.PENDING and other.name < task.name
    )
    return 0 if ahead < short else 1


def victims(session: Session, candidates: list[TaskInfo]) -> list[TaskInfo]:
    """Candidates whose eviction keeps every job at ≥ minMember ready tasks and every
    role at ≥ its minimum (its least important ones by task order), or else all of a
    running gang's candidates: the eviction then takes the whole gang, on every node,
    or nothing of it (``eviction._complete_broken_gangs``). Victims already chosen this
    session count (they are Releasing)."""
    by_job: dict[str, list[TaskInfo]] = {}
    for task in candidates:
        by_job.setdefault(task.job, []).append(task)
    chosen: list[TaskInfo] = []
    for job_uid, tasks in by_job.items():
        job = session.jobs[job_uid]
        occupying = job.ready_count - job.counts[TaskStatus.SUCCEEDED]
        spare = _spare(session, job, tasks)
        if spare:
            chosen.extend(spare)
        elif occupying > 0:
            chosen.extend(tasks)  # the whole running gang at once, or none of it
    keep = {id(t) for t in chosen}
    return [t for t in candidates if id(t) in keep]


def _spare(session: Session, job: JobInfo, tasks: list[TaskInfo]) -> list[TaskInfo]:
    """The least important of ``tasks`` the job can lose and keep its minimums."""
    left = job.ready_count - job.min_member
    if left <= 0:
        return []  # a gang at its minimum spares none (asked on every node it runs on)
    roles = {
        role: job.role_count(role, READY_STATUSES) - minimum
        for role, minimum in job.min_task_member.items()
    }
    spare = []
    for task in sorted(tasks, key=session.task_order_key, reverse=True):
        if left <= 0:
            break
        if roles.get(task.role, 1) <= 0:
            continue  # its role is at its minimum
        spare.append(task)
        left -= 1
        if task.role in roles:
            roles[task.role] -= 1
    return spare


class RoleAttempts:
    """The most tasks of each role a job had placed in this session, kept through a
    discarded attempt, so that the condition can say how far the attempt got."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.most: dict[str, dict[str, int]] = {}

    def allocated(self, task: TaskInfo) -> None:
        job = self.session.jobs.get(task.job)
        if job is None or task.role not in job.min_task_member:
            return
        placed = job.role_count(task.role, READY_STATUSES)
        roles = self.most.setdefault(job.uid, {})
        roles[task.role] = max(roles.get(task.role, 0), placed)


def close(session: Session, attempts: RoleAttempts | None = None) -> None:
    pending = TaskStatus.PENDING  # read once: an Enum member off its class is slow (3.11)
    events = session.outcome.events
    quiet = session.quiet
    verdicts: node_fit.Verdicts = {}  # (``node_fit``: alike gangs asked once)
    for job in session.active_jobs():  # a resting job is given its kept condition as it is
        if session.invalid_reason(job) is not None:
            if not job.tasks:
                waiting = session.waiting_reason(job)
                if waiting is not None:
                    # Not admitted: its pods may well be held until it is (delayed pod
                    # creation), so the reason is admission, not a gang with too few
                    # pods. Most of a long backlog, every session: inline, and the event
                    # added to the outcome as it is made (once: ``not_admitted_event``).
                    unschedulable, message = not_admitted_words(job.min_member, waiting)
                    session.set_condition(job, unschedulable)
                    events.append(not_admitted_event(job.namespace, job.name, message))
            continue
        kept = quiet.get(job.uid)  # found at open as the last close left it
        if kept is not None and not job.touched:
            session.set_condition(job, kept.condition)  # what _report_scheduled would set
            continue
        if ready(job):
            if job.has_pod_group:
                _report_scheduled(session, job)
            continue
        if not job.counts[pending]:
            continue
        tasks = job.tasks_with(pending)
        if not job.has_pod_group:
            _report_pods(session, job, tasks, "waiting")
        else:
            _report_unschedulable(session, job, tasks, attempts, verdicts)


def _report_scheduled(session: Session, job: JobInfo) -> None:
    if _was_unschedulable(job):
        session.set_condition(job, condition(ConditionType.UNSCHEDULABLE, False, "Scheduled", ""))
    # its tasks in READY_STATUSES, of all
    session.set_condition(job, scheduled_words(job.ready_count, len(job.tasks)))


@functools.lru_cache(maxsize=4096)
def scheduled_words(scheduled: int, tasks: int) -> PodGroupCondition:
    """The Scheduled condition of a gang with ``scheduled`` of its ``tasks`` placed:
    worded once per pair, not once for every running gang, every session."""
    message = f"{scheduled}/{tasks} tasks in gang scheduled"
    return condition(ConditionType.SCHEDULED, True, "Scheduled", message)


# Read of every running gang's conditions, every session: an Enum member read off its
# class costs a Python call (EnumType.__getattr__, Python 3.11), a module constant not.
_UNSCHEDULABLE = ConditionType.UNSCHEDULABLE


def _was_unschedulable(job: JobInfo) -> bool:
    # a loop, not any() (a generator per call): asked of every running gang each session
    for kept in job.conditions:  # noqa: SIM110
        if kept.type is _UNSCHEDULABLE and kept.status == "True":
            return True
    return False


def _report_unschedulable(
    session: Session,
    job: JobInfo,
    pending: list[TaskInfo],
    attempts: RoleAttempts | None,
    verdicts: node_fit.Verdicts,
) -> None:
    errors = session.fit_errors_of(job)
    waiting = session.waiting_reason(job)
    draining = session.draining_reason(job)
    if draining is not None:  # room is kept for it: say where, not why it did not fit
        why, reason = draining, "NotEnoughResources"
    elif errors:
        why = nodes_unavailable(len(session.nodes), next(iter(errors.values())))
        reason = "NotEnoughResources"
        # A gang none of whose pods run: where its last pod found no room, and, when no
        # packing of its pods exists at all, that too (of one pod, the nodes' reasons
        # say it as kube-scheduler does).
        if not job.ready_count and job.min_member > 1:
            never = node_fit.never_fits(session, job, verdicts)
            why = why if never is None else f"{why}; {never}"
    else:
        why = waiting or "waiting for other gang members to be placed"
        reason = "NotEnoughResources" if waiting is not None else "Unschedulable"
    if draining is None and errors and job.min_task_member:
        why = _role_short(job, errors, attempts) + why
    message = f"{len(pending)}/{len(job.tasks)} tasks in gang unschedulable: {why}"
    session.set_condition(job, condition(ConditionType.UNSCHEDULABLE, True, reason, message))
    session.record_event(
        ObjectRef("PodGroup", job.namespace, job.name), "Warning", "Unschedulable", message
    )
    _report_pods(session, job, pending, message)


def _role_short(job: JobInfo, errors: dict[str, FitError], attempts: RoleAttempts | None) -> str:
    """'role worker: 3/8 placed: ' for the role of the task that found no node (as far
    as the attempt got), else for the first role short of its minimum; '' when none is."""
    tried = attempts.most.get(job.uid, {}) if attempts is not None else {}
    failed = [job.tasks[uid].role for uid in errors if uid in job.tasks]
    for role in failed:
        minimum = job.min_task_member.get(role, 0)
        if tried.get(role, 0) < minimum:
            return f"role {role}: {tried.get(role, 0)}/{minimum} placed: "
    short = short_roles(job, READY_STATUSES)
    if not short:
        return ""
    role, have, minimum = short[0]
    return f"role {role}: {max(have, tried.get(role, 0))}/{minimum} placed: "


@functools.lru_cache(maxsize=1024)
def not_admitted_words(min_member: int, waiting: str) -> tuple[PodGroupCondition, str]:
    """The condition and the event's message for a group of ``min_member`` not admitted
    for ``waiting``: worded once, not once for each group of a long line alike (enqueue
    gives them all one ``waiting``), every session."""
    message = f"gang of {min_member} {waiting}"
    unschedulable = condition(ConditionType.UNSCHEDULABLE, True, "NotEnoughResources", message)
    return unschedulable, message


@functools.lru_cache(maxsize=65_536)
def not_admitted_event(namespace: str, name: str, message: str) -> Event:
    """The Warning on a group not admitted: one (frozen) event for the same group and
    words, made once, not every session while it waits."""
    return Event(ObjectRef("PodGroup", namespace, name), "Warning", "Unschedulable", message)


def _report_pods(session: Session, job: JobInfo, pending: list[TaskInfo], message: str) -> None:
    """FailedScheduling on each pending pod: its own fit error, else the gang's reason."""
    errors = session.fit_errors_of(job)
    if not errors and not job.has_pod_group:
        message = session.waiting_reason(job) or ""
        if not message:
            return
    if not errors:  # the gang's reason for each (most of a backlog, every session)
        session.record_events(failed_scheduling(t, message) for t in pending)
        return
    nodes = len(session.nodes)

    def why(task: TaskInfo) -> str:
        reasons = errors.get(task.uid)
        return f"{nodes_unavailable(nodes, reasons)}." if reasons else message

    session.record_events(failed_scheduling(task, why(task)) for task in pending)


def on_session_open(session: Session, option: PluginOption) -> None:
    del option
    session.add_job_valid_fn(valid)
    session.add_job_ready_fn(ready)
    session.add_job_pipelined_fn(pipelined)
    session.add_job_order_fn(order_key)
    session.add_task_order_fn(functools.partial(task_order_key, session.jobs))
    session.add_preemptable_fn(
        lambda _preemptor, candidates: victims(session, candidates), preemptor_key=no_preemptor
    )
    session.add_reclaimable_fn(
        lambda _reclaimer, candidates: victims(session, candidates), preemptor_key=no_preemptor
    )
    attempts = RoleAttempts(session)
    session.add_event_handler(allocate=attempts.allocated)
    session.add_close_fn(lambda closing: close(closing, attempts))
