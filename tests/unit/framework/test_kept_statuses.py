"""A status the last session kept for a group's job it did not touch (``JobInfo.kept_status``)
is used again only while the rules would give it again: over sessions on a state that
hands such jobs from snapshot to snapshot, with the statuses each session writes
applied, what is written and told is the same with the shortcut switched off
(``Shortcuts.statuses_of_untouched_jobs``) as on, while the words a waiting
group is told change (the free room it is refused for, its queue closed), its status is
written by someone else, and it is admitted; and while a running gang runs on, gains a
pod that sessions place (touching it), is told it was unschedulable by someone else
(and so is told it no longer is, quiet before or not: ``Shortcuts.pass_quiet_gangs``),
and loses one. And a kept status is given only for the inputs it was kept for: each
changed in turn, it is not."""

from collections.abc import Callable
from typing import Any

import pytest

from kbatch.api.podgroup import ConditionType, PodGroupCondition, PodGroupPhase, PodGroupStatus
from kbatch.bench.scheduling import FULL_ACTIONS
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework import job_status
from kbatch.operators.scheduler.core.framework.info import JobInfo
from kbatch.operators.scheduler.core.framework.interface import Outcome, Snapshot
from kbatch.operators.scheduler.core.framework.podgroup_status import condition
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts


def node(name: str, cpu: str) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "16Gi", "pods": "110"}
    return {"kind": "Node", "metadata": {"name": name}, "status": {"allocatable": allocatable}}


def group(name: str, cpu: str, **status: Any) -> dict[str, Any]:
    return {
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"minMember": 1, "queue": "default", "minResources": {"cpu": cpu}},
        **({"status": status} if status else {}),
    }


def queue(state: str = "Open") -> dict[str, Any]:
    return {"kind": "Queue", "metadata": {"name": "default"}, "spec": {"state": state}}


def running_pod(name: str, cpu: str, of: str | None = None, **status: Any) -> dict[str, Any]:
    annotations = {"scheduling.k8s.io/group-name": of} if of else {}
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                     "annotations": annotations},
        "spec": {"schedulerName": "kbatch", "nodeName": "a",
                 "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
        "status": {"phase": "Running", "startTime": "2024-01-01T00:01:00Z", **status},
    }  # fmt: skip


def pending_pod(name: str, cpu: str, of: str) -> dict[str, Any]:
    pod = running_pod(name, cpu, of, phase="Pending", startTime=None)
    del pod["spec"]["nodeName"]
    return pod


UNSCHEDULABLE_TRUE = {"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                      "message": "0/2 tasks in gang unschedulable"}  # fmt: skip
Step = Callable[[ClusterState], None]


def applying(*objects: dict[str, Any]) -> Step:
    return lambda state: [state.apply(obj) for obj in objects] and None


def nothing(state: ClusterState) -> None:
    del state


STEPS: list[Step] = [
    applying(queue(), node("a", "8"), group("big", "12"), group("huge", "40")),
    nothing,  # its status as written: kept from here
    nothing,
    applying(node("a", "10")),  # refused for another room: other words
    nothing,
    applying(running_pod("other", "3")),  # less room free
    nothing,
    applying(queue("Closed")),  # refused by its queue
    nothing,
    applying(queue()),
    nothing,
    applying(group("huge", "40", phase="Pending")),  # written by someone else
    nothing,
    applying(node("a", "16")),  # big is admitted
    nothing,
    applying(group("run", "1"), running_pod("run-0", "1", "run")),  # a gang running
    nothing,
    nothing,
    nothing,
    applying(pending_pod("run-1", "1", "run")),  # placed by each session (not bound here)
    nothing,
    applying(running_pod("run-1", "1", "run")),  # bound and running
    nothing,
    nothing,
    # told it was unschedulable by someone else, running on: told it no longer is
    applying(group("run", "1", phase="Running", running=2, conditions=[UNSCHEDULABLE_TRUE])),
    nothing,
    nothing,
    applying(running_pod("run-0", "1", "run", phase="Succeeded")),
    nothing,
    nothing,
]


class Applying:
    """Hands a session its snapshot and writes the PodGroup statuses it decides back
    into the state (as the simulator and the cluster do), keeping what was written
    and told."""

    def __init__(self, state: ClusterState, snap: Snapshot) -> None:
        self.state, self.snap = state, snap
        self.written: list[object] = []

    def snapshot(self) -> Snapshot:
        return self.snap

    def apply(self, outcome: Outcome) -> None:
        for update in outcome.pod_groups:
            stored = self.state.get("PodGroup", update.namespace, update.name)
            assert stored is not None
            dumped = update.status.model_dump(mode="json", by_alias=True, exclude_none=True)
            self.state.apply({**stored, "status": dumped})
            self.written.append((update.name, dumped))
        self.written.append(sorted((e.ref.name, e.reason, e.message) for e in outcome.events))


def _sessions(shortcuts: Shortcuts = ALL) -> tuple[list[object], int, int]:
    """What every step's session wrote and told (its statuses and events, and the
    conditions it told each job); and how many jobs were handed a kept
    status (those with ``kept_status`` that a session found unchanged again), and how
    many of them had tasks. ``shortcuts``: the sessions'."""
    conf = runner.default_conf().model_copy(update={"actions": FULL_ACTIONS})
    state = ClusterState()
    told: list[object] = []
    kept = with_tasks = 0
    for turn, step in enumerate(STEPS):
        step(state)
        snap = state.snapshot()
        before = {key: job.kept_status for key, job in snap.jobs.items()}
        cluster = Applying(state, snap)
        scheduler = runner.Scheduler(
            cluster, conf, lambda t=turn: 1000.0 * t, lambda: "s", shortcuts
        )
        session = scheduler.run_once()
        cluster.written.append(
            sorted((key, str(session.conditions_of(job))) for key, job in snap.jobs.items())
        )
        handed = [
            job
            for key, job in snap.jobs.items()
            if before[key] is not None and job.kept_status is before[key]
        ]
        kept += len(handed)
        with_tasks += sum(1 for job in handed if job.tasks)
        told.append(cluster.written)
    return told, kept, with_tasks


def test_statuses_kept_are_those_the_rules_make() -> None:
    quick, kept, with_tasks = _sessions()
    slow, none_kept, _ = _sessions(
        Shortcuts().without("statuses_of_untouched_jobs", "pass_quiet_gangs")
    )
    assert quick == slow
    assert any(
        name == "run"
        and ("Unschedulable", "False") in [(c["type"], c["status"]) for c in status["conditions"]]
        for session in quick
        for name, status, *_ in (w for w in session if isinstance(w, tuple))
    )
    assert kept > 0 and with_tasks > 0 and none_kept == 0
    written = [name for session in quick for name, *_ in session if isinstance(name, str)]
    assert written.count("big") >= 4  # told other words three times, then admitted


WAITING = condition(ConditionType.UNSCHEDULABLE, True, "NotEnoughResources", "gang of 1 waits")
OTHER = condition(ConditionType.UNSCHEDULABLE, True, "NotEnoughResources", "gang of 1 waits on")
SCHEDULED = condition(ConditionType.SCHEDULED, True, "Scheduled", "")


CONF = runner.default_conf()


def _waiting_job() -> JobInfo:
    old = PodGroupStatus(phase=PodGroupPhase.PENDING, conditions=(WAITING,))
    return JobInfo("ns/g", "ns", "g", "default", 1, 0.0, 2, conditions=old.conditions,
                   old_status=old)  # fmt: skip


Change = Callable[[JobInfo, list[PodGroupCondition]], None]
CHANGES: dict[str, Change] = {
    "other words": lambda job, told: told.__setitem__(0, OTHER),
    "more words": lambda job, told: told.append(SCHEDULED),
    "admitted": lambda job, told: setattr(job, "phase", PodGroupPhase.INQUEUE),
    "another old status": lambda job, told: setattr(
        job, "old_status", job.old_status.model_copy() if job.old_status else None
    ),
    "touched": lambda job, told: setattr(job, "touched", True),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_a_status_is_kept_only_for_what_it_was_kept_for(change: str) -> None:
    job, told = _waiting_job(), [WAITING]
    job_status._keep_if_unchanged(job, told, job.old_status, CONF)  # type: ignore[arg-type]
    assert job_status._kept_status(job, told) is job.old_status
    CHANGES[change](job, told)
    assert job_status._kept_status(job, told) is None


def test_a_changed_status_is_not_kept() -> None:
    job, told = _waiting_job(), [OTHER]
    changed = PodGroupStatus(phase=PodGroupPhase.PENDING, conditions=(OTHER,))
    job_status._keep_if_unchanged(job, told, changed, CONF)
    assert job.kept_status is None


def test_quiet_gangs_pass_as_the_long_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """A running gang the last close told only that it is scheduled, unchanged since, is
    not asked again whether it is valid and ready (``job_status.quiet_gang``): what
    every session writes and tells is the same as asking every gang."""
    found: list[JobInfo] = []
    asked = job_status.quiet_gang

    def counted(job: JobInfo, conf: object) -> object:
        kept = asked(job, conf)
        if kept is not None:
            found.append(job)
        return kept

    monkeypatch.setattr(job_status, "quiet_gang", counted)
    quick, _, _ = _sessions()
    assert found and all(job.name == "run" for job in found)
    found.clear()
    assert _sessions(Shortcuts().without("pass_quiet_gangs"))[0] == quick
    assert not found


def _running_gang() -> JobInfo:
    old = PodGroupStatus(phase=PodGroupPhase.RUNNING, conditions=(SCHEDULED,))
    job = JobInfo("ns/r", "ns", "r", "default", 1, 0.0, 2, phase=PodGroupPhase.RUNNING,
                  conditions=old.conditions, old_status=old)  # fmt: skip
    job.ready_count = 1
    job.tasks = {"t": object()}  # type: ignore[dict-item]
    return job


QUIET_CHANGES: dict[str, Callable[[JobInfo], None]] = {
    "touched": lambda job: setattr(job, "touched", True),
    "another old status": lambda job: setattr(
        job, "old_status", job.old_status.model_copy() if job.old_status else None
    ),
    "another phase": lambda job: setattr(job, "phase", PodGroupPhase.INQUEUE),
    "fewer ready": lambda job: setattr(job, "ready_count", 0),
    "more tasks": lambda job: job.tasks.__setitem__("u", object()),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("change", sorted(QUIET_CHANGES))
def test_a_quiet_gang_is_one_only_while_what_was_found_holds(change: str) -> None:
    job = _running_gang()
    job_status._keep_if_unchanged(job, [SCHEDULED], job.old_status, CONF)  # type: ignore[arg-type]
    assert job_status.quiet_gang(job, CONF) is job.kept_status is not None
    assert job_status.quiet_gang(job, runner.default_conf()) is None  # another conf
    QUIET_CHANGES[change](job)
    assert job_status.quiet_gang(job, CONF) is None


def test_a_gang_told_more_than_that_it_is_scheduled_is_not_quiet() -> None:
    job = _running_gang()
    job_status._keep_if_unchanged(job, [WAITING], job.old_status, CONF)  # type: ignore[arg-type]
    assert job.kept_status is not None and job_status.quiet_gang(job, CONF) is None


def _preempted_gang_sessions(shortcuts: Shortcuts = ALL) -> tuple[list[object], int]:
    """A quiet running gang (two pods of one, minMember 1, on a node with room for two),
    then a pod of a higher priority that can only run in its room: preempt evicts one
    of its pods (the session touches it) and the gang must be told its new count. What
    every session wrote and told, and how many evictions were sent."""
    conf = runner.default_conf().model_copy(update={"actions": FULL_ACTIONS})
    state = ClusterState()
    urgent = pending_pod("urgent", "1", "urgent")
    urgent["spec"]["priority"] = 1000
    steps = [
        applying(queue(), node("a", "2"), group("run", "1")),
        applying(running_pod("run-0", "1", "run"), running_pod("run-1", "1", "run")),
        nothing,
        nothing,
        applying(group("urgent", "1"), urgent),
        nothing,
    ]
    told: list[object] = []
    evictions = 0
    for turn, step in enumerate(steps):
        step(state)
        cluster = Applying(state, state.snapshot())
        scheduler = runner.Scheduler(
            cluster, conf, lambda t=turn: 1000.0 * t, lambda: "s", shortcuts
        )
        session = scheduler.run_once()
        evictions += session.stats.evictions
        told.append(
            (cluster.written, {k: str(session.conditions_of(j)) for k, j in session.jobs.items()})
        )
    return told, evictions


def test_a_quiet_gang_a_session_touches_is_told_anew() -> None:
    quick, evictions = _preempted_gang_sessions()
    assert evictions >= 1
    assert _preempted_gang_sessions(Shortcuts().without("pass_quiet_gangs")) == (
        quick,
        evictions,
    )
