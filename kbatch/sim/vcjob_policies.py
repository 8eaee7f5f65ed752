"""A vcjob's lifecycle ``policies`` (the job's and each task's), as Volcano v1.15.1 reads
them: refused where its validating webhook refuses them (neither ``event``/``events``
nor ``exitCode``, or both; an event or action it does not allow; an event in two
policies; ``*`` beside another), and which the simulator plays.

Played: the events ``PodFailed`` (a pod of the job failed), ``PodEvicted`` (one was
removed before it ended, not by the controller) and ``TaskCompleted`` (every pod of a
task succeeded), with the actions ``AbortJob``, ``RestartJob``, ``TerminateJob`` and
``CompleteJob``. Not played, each named by ``not_played`` (the policy is left out, the
rest runs): ``*`` (it matches events the simulator does not raise: a pod running,
pending, out of sync), ``PodPending``, ``Unknown``, ``TaskFailed``, ``JobUpdated``;
``exitCode`` (a simulated pod has none); a ``timeout``; the actions ``RestartTask``,
``RestartPod``, ``RestartPartition`` (they delete the PodGroup while other pods of the
job run, and how kbatch admits the group made again beside them is not checked against
a live cluster), ``ResumeJob``.

``action_for``: the action of the first policy of the pod's task that names the event,
else of the job's (Volcano's ``applyPolicies``), or None: the controller only syncs.
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbatch.cluster import fields

EVENTS = ("*", "PodFailed", "PodEvicted", "PodPending", "Unknown", "TaskCompleted",
          "TaskFailed", "JobUpdated")  # fmt: skip
ACTIONS = ("AbortJob", "RestartJob", "RestartTask", "RestartPod", "RestartPartition",
           "TerminateJob", "CompleteJob", "ResumeJob")  # fmt: skip
PLAYED_EVENTS = frozenset({"PodFailed", "PodEvicted", "TaskCompleted"})
PLAYED_ACTIONS = frozenset({"AbortJob", "RestartJob", "TerminateJob", "CompleteJob"})


@dataclass(frozen=True, slots=True)
class Policy:
    events: tuple[str, ...]
    action: str
    played: bool  # the simulator plays it (else ``not_played`` names it)


def policies(obj: Mapping[str, Any], at: str) -> tuple[Policy, ...]:
    """The policies at ``at`` (``spec`` or ``spec.tasks[i]``); FieldError naming one the
    webhook refuses."""
    found: list[Policy] = []
    seen: set[str] = set()
    for i, policy in enumerate(fields.mappings(obj, "policies", at=at)):
        where = f"{at}.policies[{i}]"
        events = _events(policy, where)
        has_exit_code = fields.integer(policy, "exitCode", at=where) is not None
        if events and has_exit_code:
            raise fields.FieldError(where, "must not specify event and exitCode simultaneously")
        if not events and not has_exit_code:
            raise fields.FieldError(where, "either event or exitCode should be specified")
        action = fields.string(policy, "action", at=where) or ""
        if action not in ACTIONS:
            raise fields.FieldError(f"{where}.action", f"invalid policy action {action!r}")
        for event in events:
            if event in seen:
                raise fields.FieldError(where, f"duplicate event {event} across policies")
            seen.add(event)
        played = (
            bool(events)
            and set(events) <= PLAYED_EVENTS
            and action in PLAYED_ACTIONS
            and fields.value(policy, "timeout", at=where) is None
        )
        found.append(Policy(events, action, played))
    if "*" in seen and len(seen) > 1:
        raise fields.FieldError(f"{at}.policies", "with * no other event may be given")
    return tuple(found)


def _events(policy: Mapping[str, Any], where: str) -> tuple[str, ...]:
    given = [str(e) for e in fields.sequence(policy, "events", at=where)]
    one = fields.string(policy, "event", at=where)
    if one:
        given.append(one)
    for event in given:
        if event not in EVENTS:
            raise fields.FieldError(f"{where}.event", f"invalid policy event {event!r}")
    return tuple(given)


def not_played(given: Sequence[Policy], at: str) -> list[str]:
    """``field: why`` for each policy the simulator leaves out."""
    return [
        f"{at}.policies[{i}]: not simulated (it plays the events PodFailed, PodEvicted and "
        "TaskCompleted, with AbortJob, RestartJob, TerminateJob or CompleteJob, without "
        "exitCode or timeout): left out"
        for i, policy in enumerate(given)
        if not policy.played
    ]


def action_for(event: str, task: Sequence[Policy], job: Sequence[Policy]) -> tuple[str, str] | None:
    """(action, which policy) for ``event`` of a pod of a task with policies ``task``, or
    None."""
    for where, given in (("task", task), ("job", job)):
        for policy in given:
            if policy.played and event in policy.events:
                return policy.action, where
    return None
