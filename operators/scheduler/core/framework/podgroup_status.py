"""A PodGroup's status, in one place: the phase rules of DESIGN §2, the counts, the
conditions, and reading a phase off a raw object.

The scheduler core owns these rules (its session close decides every group's status by
them, ``job_status``); the PodGroup controller, the Jobs controller, the cluster state
and the simulator call them too, so that none of them can count, move or read a phase
differently from the others. Pure: no API calls (whoever writes a status computes it
here).
"""

import functools
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kbatch.api.podgroup import (
    ConditionType,
    PodGroupCondition,
    PodGroupPhase,
    PodGroupStatus,
)
from kbatch.operators.scheduler.core.framework.info import SCHEDULED_STATUSES, TaskStatus
from kbatch.operators.scheduler.core.framework.model_copies import replaced

# What a new PodGroup shows at once (kube-batch's groups had an empty status until the
# scheduler first saw them).
INITIAL_STATUS = PodGroupStatus().model_dump(mode="json", by_alias=True, exclude_none=True)


def phase_of(obj: Mapping[str, Any]) -> PodGroupPhase:
    """The phase of a raw PodGroup: Pending when it has none yet, Unknown when it says
    something that is not a phase."""
    status = obj.get("status")
    raw = status.get("phase") if isinstance(status, Mapping) else None
    if not raw:
        return PodGroupPhase.PENDING
    try:
        return PodGroupPhase(str(raw))
    except ValueError:
        return PodGroupPhase.UNKNOWN


def needs_initial_status(obj: Mapping[str, Any]) -> bool:
    status = obj.get("status")
    return not (isinstance(status, Mapping) and status.get("phase"))


# The phases as the rules read them: module constants, since the rules run for every
# group every session and reading a member off its Enum class costs a few times more
# (EnumType's __getattr__ hook slows every class attribute read, Python 3.11).
_PENDING, _INQUEUE, _RUNNING, _UNKNOWN, _COMPLETED = (
    PodGroupPhase.PENDING,
    PodGroupPhase.INQUEUE,
    PodGroupPhase.RUNNING,
    PodGroupPhase.UNKNOWN,
    PodGroupPhase.COMPLETED,
)


def next_phase(
    current: PodGroupPhase,
    *,
    min_member: int,
    scheduled: int,
    succeeded: int,
    unfinished: int,
    admitted: bool,
) -> PodGroupPhase:
    """The phase rules of DESIGN §2.

    ``scheduled`` counts pods bound or running, ``succeeded`` pods that finished
    well, ``unfinished`` pods that are not Succeeded/Failed (pending included);
    ``admitted`` tells whether the enqueue step let the group in.
    """
    if unfinished == 0 and succeeded >= min_member:
        return _COMPLETED
    if scheduled + succeeded >= min_member:
        return _RUNNING
    if current in (_RUNNING, _UNKNOWN) and scheduled > 0:
        return _UNKNOWN
    if admitted or current is _INQUEUE:
        return _INQUEUE
    return _PENDING


def counted(
    old: PodGroupStatus, min_member: int, counts: Mapping[TaskStatus, int]
) -> PodGroupStatus:
    """``old`` with the phase and the running, succeeded and failed counts its pods'
    statuses make (conditions kept as they are)."""
    succeeded = counts.get(TaskStatus.SUCCEEDED, 0)
    failed = counts.get(TaskStatus.FAILED, 0)
    phase = next_phase(
        old.phase,
        min_member=min_member,
        scheduled=sum(counts.get(s, 0) for s in SCHEDULED_STATUSES),
        succeeded=succeeded,
        unfinished=sum(counts.values()) - succeeded - failed,
        admitted=old.phase is PodGroupPhase.INQUEUE,
    )
    running = counts.get(TaskStatus.RUNNING, 0)
    return replaced(
        old, {"phase": phase, "running": running, "succeeded": succeeded, "failed": failed}
    )


@functools.lru_cache(maxsize=4096)
def condition(kind: ConditionType, status: bool, reason: str, message: str) -> PodGroupCondition:
    """The condition, one shared (frozen) object for the same words: every session gives
    every waiting group the same condition again, and building each anew is a pydantic
    validation, thousands of them a session in a long backlog."""
    return PodGroupCondition(
        type=kind, status="True" if status else "False", reason=reason, message=message
    )


@functools.lru_cache(maxsize=64)
def iso_time(seconds: float) -> str:
    """RFC 3339 (whole seconds). Kept for the last times asked: a session's close asks it
    of its one ``now`` for every group whose status it builds."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def with_conditions(
    status: PodGroupStatus, new: list[PodGroupCondition], now: float, transition_id: str
) -> PodGroupStatus:
    """``status`` with ``new`` applied over its conditions by type; a condition keeps its
    transition time while its status stays the same."""
    merged = {c.type: c for c in status.conditions}
    stamp = iso_time(now)
    for cond in new:
        before = merged.get(cond.type)
        if before is not None and before.status == cond.status:
            kept = {
                "last_transition_time": before.last_transition_time,
                "transition_id": before.transition_id,
            }
        else:
            kept = {"last_transition_time": stamp, "transition_id": transition_id}
        merged[cond.type] = replaced(cond, kept)
    conditions = tuple(sorted(merged.values(), key=lambda c: c.type.value))
    return replaced(status, {"conditions": conditions})
