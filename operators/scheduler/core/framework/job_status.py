"""Session close: what a job's PodGroup status and its queue's status become.

Written back only where they changed (the status writer is given nothing else), and
a PodGroup's only if it may be ours: one with a pod of our scheduler names, or with no
pods yet (it still needs Pending/Inqueue, and which scheduler it is for cannot be
known). One whose pods are all another scheduler's (a second kbatch with another
--scheduler-name) is left to that scheduler. A Queue's status is written whatever
scheduler its groups are for; a change of its flow alone (the flow plugin's) only when
the plugin says it is worth a write, and without the plugin the stored flow is kept.
"""

import functools
import itertools
import operator
from collections.abc import Callable, Mapping

import numpy as np

from kbatch.api.podgroup import ConditionType, PodGroupCondition, PodGroupPhase, PodGroupStatus
from kbatch.api.quantity import format_quantity
from kbatch.api.queue import QueueStatus
from kbatch.api.times import rfc3339
from kbatch.operators.scheduler.core.framework import pod_conditions, podgroup_status
from kbatch.operators.scheduler.core.framework.info import (
    SCHEDULED_STATUSES,
    JobInfo,
    KeptStatus,
    QueueInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.model_copies import replaced
from kbatch.operators.scheduler.core.framework.outcome import (
    FAILED_SCHEDULING,
    Event,
    ObjectRef,
    Outcome,
    PodGroupUpdate,
    QueueUpdate,
    missing_group_message,
    phase_event,
)
from kbatch.operators.scheduler.core.framework.resources import Dims
from kbatch.operators.scheduler.core.framework.session import Session

# What a built status is made of (besides the session's time and id): the job's phase
# and conditions, minMember, its task counts and the conditions this session sets.
BuiltKey = tuple[object, ...]


def pod_group_status(
    job: JobInfo,
    session: Session,
    built: dict[BuiltKey, PodGroupStatus] | None = None,
    session_conditions: list[PodGroupCondition] | None = None,
) -> PodGroupStatus:
    """The job's PodGroup status as the rules make it. ``built``: the statuses built so
    far this session, by what they are made of (``BuiltKey``), so that alike groups —
    thousands in a backlog: same counts, same words — share one build (statuses are
    frozen); None: build each. ``session_conditions``: the conditions set on it this
    session, when
    the caller has them already (None: asked of the session)."""
    new = session.conditions_of(job) if session_conditions is None else session_conditions
    unchanged = _unchanged_status(job, new)
    if unchanged is not None:
        return unchanged
    key = None
    if built is not None:
        key = (job.phase, job.conditions, job.min_member, tuple(job.counts), tuple(new))
        known = built.get(key)
        if known is not None:
            return known
    counts = {status: job.counts[status] for status in TaskStatus}
    old = PodGroupStatus(phase=job.phase, conditions=job.conditions)
    status = podgroup_status.counted(old, job.min_member, counts)
    status = podgroup_status.with_conditions(status, new, session.now, session.uid)
    if key is not None and built is not None:
        built[key] = status
    return status


# A job's counts of its tasks bound or running (``JobInfo.counts`` is by status).
_scheduled_counts = operator.itemgetter(*SCHEDULED_STATUSES)
# What ``_unchanged_status`` reads of every group, every session: enum members as module
# constants (reading one off its Enum class costs a few times more: EnumType's
# __getattr__ hook slows every class attribute read, Python 3.11).
_RUNNING, _SUCCEEDED, _FAILED = TaskStatus.RUNNING, TaskStatus.SUCCEEDED, TaskStatus.FAILED
_INQUEUE = PodGroupPhase.INQUEUE
_GROUP_PENDING, _GROUP_RUNNING = PodGroupPhase.PENDING, PodGroupPhase.RUNNING


def _unchanged_status(job: JobInfo, new: list[PodGroupCondition]) -> PodGroupStatus | None:
    """``job.old_status`` when the status the rules make would equal it, found without
    building one; None when it may differ. Most groups, session after session, wait or
    run on and are given the same conditions again: building their statuses (pydantic
    copies, a time stamp each) only to find them equal would be most of a session's
    close."""
    old = job.old_status
    if old is None or job.conditions is not old.conditions:
        return None
    counts = job.counts
    running, succeeded, failed = counts[_RUNNING], counts[_SUCCEEDED], counts[_FAILED]
    if running != old.running or succeeded != old.succeeded or failed != old.failed:
        return None
    phase = podgroup_status.next_phase(
        job.phase,
        min_member=job.min_member,
        scheduled=sum(_scheduled_counts(counts)),
        succeeded=succeeded,
        unfinished=sum(counts) - succeeded - failed,
        admitted=job.phase is _INQUEUE,
    )
    if phase is not old.phase or not _conditions_kept(old.conditions, new):
        return None
    return old


def _kept_status(
    job: JobInfo, session_conditions: list[PodGroupCondition]
) -> PodGroupStatus | None:
    """The status the last session's close kept for ``job``, when nothing it is worked
    out from has changed since; else None. A job whose PodGroup and pods were not
    written since the last snapshot keeps its JobInfo from that snapshot
    (``kbatch.cluster.reuse.group_parts`` for jobs without pods, most of a long backlog;
    ``kbatch.cluster.reuse.kept_jobs`` for the rest, most of a busy cluster's running gangs),
    and is given the same condition session after session (the same object: gang and
    ``podgroup_status.condition`` make each once). With the same old status (so the
    same conditions), phase and minMember, counts no session changed since (not
    touched: the last close kept it only for a job not touched either) and the same one
    condition given, the rules give what they gave."""
    kept = job.kept_status
    if (
        kept is None
        or len(session_conditions) != 1
        or session_conditions[0] is not kept.condition
        or job.phase is not kept.phase
        or job.old_status is not kept.status
        or job.touched
    ):
        return None
    return kept.status


def _keep_if_unchanged(
    job: JobInfo,
    session_conditions: list[PodGroupCondition],
    status: PodGroupStatus,
    conf: object,
) -> None:
    """Remember on ``job`` (``_kept_status``) that its status stays ``status``, if it
    does and the job may meet it again (one no session touched, given one condition),
    with what a later session needs to know it is a quiet gang (``quiet_gang``)."""
    if status is job.old_status and len(session_conditions) == 1 and not job.touched:
        condition = session_conditions[0]
        scheduled = condition.type is _SCHEDULED
        job.kept_status = KeptStatus(
            condition, job.phase, status, scheduled, conf, job.ready_count, len(job.tasks)
        )


_SCHEDULED = ConditionType.SCHEDULED


def quiet_gang(job: JobInfo, conf: object) -> KeptStatus | None:
    """The status kept for ``job`` by the last close, if that close set only its
    Scheduled condition and nothing that finding came from has changed; else None.

    Such a close found the job valid (the verdicts of the conf's job_valid functions:
    on its tasks' counts, minMember and roles) and ready, and set the condition its
    counts make. A session under the same conf that finds it the same JobInfo (kept
    from the last snapshot: the same group and tasks), untouched since, with the same
    status, phase and counts, finds the same again: most of a busy cluster's running
    gangs, every session, need not be asked (the open's verdicts, gang's close; its
    queue must still exist)."""
    kept = job.kept_status
    if (
        kept is not None
        and kept.scheduled
        and not job.touched
        and kept.status is job.old_status
        and kept.phase is job.phase
        and kept.ready == job.ready_count
        and kept.size == len(job.tasks)
        and kept.conf is conf
    ):
        return kept
    return None


def _conditions_kept(old: tuple[PodGroupCondition, ...], new: list[PodGroupCondition]) -> bool:
    """Would ``with_conditions`` give back ``old`` as it is? Yes when ``old`` is in its
    order (by type, one of each) and each new condition says what the one of its type
    says: that one then keeps its transition time and id, and nothing else changes."""
    if len(old) == 1 and len(new) == 1:  # most groups: one condition, set again the same
        last, given = old[0], new[0]
        return (
            last.type is given.type
            and last.status == given.status
            and last.reason == given.reason
            and last.message == given.message
        )
    if any(a.type.value >= b.type.value for a, b in itertools.pairwise(old)):
        return False
    by_type = {c.type: c for c in old}
    for cond in new:
        before = by_type.get(cond.type)
        if (
            before is None
            or before.status != cond.status
            or before.reason != cond.reason
            or before.message != cond.message
        ):
            return False
    return True


def queue_status(
    queue: QueueInfo,
    dims: Dims,
    phases: list[PodGroupPhase],
    also_running: int = 0,
    kept: bool = True,
) -> QueueStatus:
    """The status of ``queue`` whose PodGroups are in ``phases`` (one each), with
    ``also_running`` Running PodGroups besides (resting: not among them). ``kept``: built
    once for the same sums and counts (``Shortcuts.queue_statuses``; False: rendered
    and built anew)."""
    old = queue.old_status
    flow, flow_updated = (old.flow, old.flow_updated) if old is not None else (None, None)
    if queue.flow is not None and queue.flow_updated is not None:
        flow, flow_updated = queue.flow, rfc3339(queue.flow_updated)
    made = _built_queue_status if kept else _built_each
    return made(
        (
            dims,
            _bits(queue.deserved),
            _bits(queue.allocated),
            _bits(queue.request),
            phases.count(_GROUP_PENDING),
            phases.count(_INQUEUE),
            phases.count(_GROUP_RUNNING) + also_running,
            flow,
            flow_updated,
        )
    )


def _bits(vector: np.ndarray | None) -> bytes | None:
    """A vector as its floats' bytes (hashable; ``np.frombuffer`` gives it back exactly)."""
    return None if vector is None else np.asarray(vector, dtype=float).tobytes()


# A queue status's inputs after the renderer: dims, deserved, allocated and request (as
# ``_bits``), pending, inqueue and running groups, flow and its time.
StatusInputs = tuple[
    Dims, bytes | None, bytes | None, bytes | None, int, int, int, float | None, str | None
]
Renderer = Callable[[Dims, bytes | None], tuple[tuple[str, str], ...]]


@functools.lru_cache(maxsize=256)
def _built_queue_status(inputs: StatusInputs) -> QueueStatus:
    """A queue's status, rendered and built once for the same amounts and counts: most
    sessions change few queues' sums, and rendering every queue's three vectors as
    quantities and validating the model was a seventh of a busy trace tick's close.
    Statuses are frozen, so one may be shared; the same object as the last one written
    is also recognised as unchanged without comparing fields (``_worth_writing``)."""
    return _status_of(_rendered, *inputs)


def _built_each(inputs: StatusInputs) -> QueueStatus:
    """The long way: every status built, and every vector rendered, anew."""
    return _status_of(_rendered.__wrapped__, *inputs)


def _status_of(
    render: Renderer,
    dims: Dims,
    deserved: bytes | None,
    allocated: bytes | None,
    request: bytes | None,
    pending: int,
    inqueue: int,
    running: int,
    flow: float | None,
    flow_updated: str | None,
) -> QueueStatus:
    return QueueStatus(
        deserved=dict(render(dims, deserved)),
        allocated=dict(render(dims, allocated)),
        request=dict(render(dims, request)),
        pending=pending,
        inqueue=inqueue,
        running=running,
        flow=flow,
        flow_updated=flow_updated,
    )


@functools.lru_cache(maxsize=256)
def _rendered(dims: Dims, vector: bytes | None) -> tuple[tuple[str, str], ...]:
    """A vector's amounts as quantities, by resource name (rendered once for the same
    floats: a queue's deserved share often stays while its allocation moves)."""
    if vector is None:
        return ()
    amounts = dims.mapping(np.frombuffer(vector))
    return tuple((name, format_quantity(name, value)) for name, value in amounts.items())


def _worth_writing(published: QueueStatus, queue: QueueInfo) -> bool:
    """Has the status changed, beyond a flow that moved too little to be written on its
    own (the flow plugin says when it did not: ``flow_due``)?"""
    old = queue.old_status
    if published is old or published == old:
        return False
    if old is None or queue.flow_due:
        return True
    return replaced(published, {"flow": old.flow, "flow_updated": old.flow_updated}) != old


def _add_up_subtrees(
    queues: Mapping[str, QueueInfo],
    phases_in: dict[str, list[PodGroupPhase]],
    resting_in: dict[str, int],
) -> None:
    """Each queue's groups counted with its subtree's (DESIGN §14: a queue's status is its
    subtree's): a queue's own phases and resting count added to each ancestor's."""
    own = {name: list(phases_in.get(name, [])) for name in queues}
    own_resting = dict(resting_in)
    for name in queues:
        seen = {name}
        parent = queues[name].parent
        while parent is not None and parent in queues and parent not in seen:
            seen.add(parent)
            phases_in.setdefault(parent, []).extend(own[name])
            resting_in[parent] += own_resting[name]
            parent = queues[parent].parent


def publish(session: Session) -> Outcome:
    """Add every PodGroup and Queue status that changed to the session's outcome, an
    event for each PodGroup phase change, and one on each pod that waits for a PodGroup
    that does not exist (nothing else would say so); the outcome."""
    outcome = session.outcome
    # Each queue's PodGroups' phases as published, gathered in this one pass over the
    # jobs (``queue_status`` counts them; it walked each queue's jobs a second time)
    phases_in: dict[str, list[PodGroupPhase]] = {name: [] for name in session.queues}
    built: dict[BuiltKey, PodGroupStatus] = {}
    # Statuses kept for untouched jobs (``Shortcuts.statuses_of_untouched_jobs``; off:
    # every group's worked out by the rules, every session).
    keep_statuses = session.shortcuts.statuses_of_untouched_jobs
    # A resting job's status is its old one: nothing to write, its phase Running.
    for job in session.active_jobs():
        if not job.has_pod_group:
            continue
        conditions = session.conditions_of(job)
        if not conditions:
            invalid = session.invalid_reason(job)
            if invalid is not None:
                session.set_condition(
                    job,
                    podgroup_status.condition(
                        ConditionType.UNSCHEDULABLE, True, invalid.reason, invalid.message
                    ),
                )
                conditions = session.conditions_of(job)
        status = _kept_status(job, conditions)
        if status is None:
            status = pod_group_status(job, session, built, conditions)
            if keep_statuses:
                _keep_if_unchanged(job, conditions, status, session.conf)
        old = job.old_status
        # ``is``: most statuses are the old one itself (pydantic's == walks every field)
        if status is not old and status != old and job.uid not in session.foreign_groups:
            outcome.pod_groups.append(PodGroupUpdate(job.namespace, job.name, status))
            was = old.phase if old is not None else PodGroupPhase.PENDING
            if status.phase is not was:  # as the object showed it (enqueue moves job.phase)
                outcome.events.append(phase_event(job.namespace, job.name, was, status.phase))
        if job.phase is not status.phase:
            job.phase = status.phase
            job.changed()
        phases = phases_in.get(job.queue)  # not setdefault: a new list for every job
        if phases is None:
            phases = phases_in[job.queue] = []
        phases.append(job.phase)
    _publish_queues(session, phases_in)
    _tell_orphans(session)
    pod_conditions.add(session)
    return outcome


def _publish_queues(session: Session, phases_in: dict[str, list[PodGroupPhase]]) -> None:
    """Each queue's status, if it changed enough to write (``phases_in``: its PodGroups'
    phases as published this session; in a queue tree a queue's are its subtree's)."""
    kept_queue_statuses = session.shortcuts.queue_statuses
    resting_in = {name: session.resting_in(name) for name in session.queues}
    if any(queue.parent is not None for queue in session.queues.values()):
        _add_up_subtrees(session.queues, phases_in, resting_in)
    for name, queue in session.queues.items():
        resting = resting_in[name]
        phases = phases_in.get(name, [])
        published = queue_status(queue, session.dims, phases, resting, kept_queue_statuses)
        if _worth_writing(published, queue):
            session.outcome.queues.append(QueueUpdate(name, published))


def _tell_orphans(session: Session) -> None:
    """An event on each pod that waits for a PodGroup that does not exist (the events'
    de-duplication keeps this to once a while)."""
    for pod in session.orphans:
        ref = ObjectRef("Pod", pod.namespace, pod.name)
        refused = session.refused_groups.get(f"{pod.namespace}/{pod.group}")
        message = missing_group_message(pod.namespace, pod.group, refused)
        session.outcome.events.append(Event(ref, "Warning", FAILED_SCHEDULING, message))
