"""When will a waiting job start: the simulator run forward from a snapshot of the live cluster.

The answer comes from the scheduler itself, not from a formula: the live objects become
the simulator's input at simulated time 0 = now (``eta_input``: nodes, the pods on
them, the waiting PodGroups, their pods and held Jobs, queues, priority classes), and
the real scheduler, with the cluster's own conf, runs forward — skipping the steps in
which nothing can change — until the jobs asked about have started (their PodGroup
Running, a pod of its own bound). Nothing in between is guessed: who goes first, what
backfills, what is reclaimed, is what the scheduler does.

What the simulator cannot know is how long the work runs: each pod's runtime comes from
``runtimes`` (activeDeadlineSeconds, kbatch.io/lifetime, else the median of
finished pods of its PodGroup or queue); a pod with no known runtime runs for ever, so
a job that waits only for it gets "unknown". The answer says which runtimes it rested
on, and how far to trust it: high when they are all deadlines or lifetimes, medium
when medians of at least ``CONFIDENT_SAMPLES`` finished pods that vary little
(``NARROW_SPREAD``), low otherwise.

Cost: every simulated step with a finish or a start in it runs a whole session, and a
session on 1,000 nodes and 10,000 pending pods takes a good part of a second; what the
jobs ahead do (their binds, their statuses) costs the same whatever the step. So the
step is the scheduling period while the work is short or the cluster small, and grows
with the work on a large cluster: a round number of periods that makes the median known
runtime at least ``STEPS_PER_RUNTIME`` steps (``POD_STEPS`` over the pods, when that is
more). An estimate is exact to one step (the answer says so when a step is more than a
period). A forecast also stops after ``MAX_SESSIONS`` sessions or ``budget`` seconds of
its own; what has not started by then is "later than" the time reached.
"""

import math
import statistics
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from kbatch.api import DEFAULT_SCHEDULER_NAMES, GROUP_NAME_ANNOTATION
from kbatch.api.podgroup import PodGroupPhase
from kbatch.cluster.state import ClusterState
from kbatch.config import ETA_BUDGET_SECONDS, SchedulerConf
from kbatch.operators.scheduler.core.framework.collector import collector_paused
from kbatch.operators.scheduler.core.framework.info import JobInfo
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.sim import manifests, runner
from kbatch.sim.timeline import Timeline
from kbatch.visibility import eta_input, runtimes, standing
from kbatch.visibility.eta_input import Plan
from kbatch.visibility.rows import Estimate as Estimate  # (where its users find it)
from kbatch.visibility.rows import human as human
from kbatch.visibility.runtimes import Runtime

HORIZON = 7 * 24 * 3600.0  # simulated seconds: later than this is "later than a week"
MAX_SESSIONS = 400  # sessions a forecast may run (each is a whole scheduling session)
BUDGET = ETA_BUDGET_SECONDS  # seconds of wall time after which a forecast stops
# At least this many steps per typical runtime, and more on a smaller cluster, where a
# session costs less: POD_STEPS / pods, so that a forecast costs about the same anywhere.
STEPS_PER_RUNTIME = 12
POD_STEPS = 120_000
ROUND_STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600)  # seconds
CONFIDENT_SAMPLES = 5  # a median of fewer finished pods is a weak guess
# A median of runtimes whose 90th percentile is more than this many times their 10th is
# a weak guess too: on the simulated day's runtimes (2 min plus an exponential of mean
# 25 min, a spread of about 13), estimates resting on such medians missed by about
# their whole wait (``kbatch bench --trace --eta-accuracy``).
NARROW_SPREAD = 2.0
STARTED_PHASES = (PodGroupPhase.RUNNING, PodGroupPhase.COMPLETED)


@dataclass(frozen=True)
class Forecast:
    """A forward simulation's answers, by job uid (a PodGroup's namespace/name, a pod
    of its own's ``pod:namespace/name``), and what it cost."""

    estimates: dict[str, Estimate]
    simulated: float  # seconds of simulated time it covered
    sessions: int
    wall_seconds: float
    stopped: str  # started (all asked about did) | settled | horizon | budget
    step: float  # the simulated step: an estimate is exact to one step
    # Of each job asked about: its phase after the first session and what that session
    # told it (its Unschedulable condition's message, '' when none), and the nodes its
    # pods were bound to when it started (``kbatch simulate --from-cluster``).
    first: dict[str, tuple[str, str]] = field(default_factory=dict)
    nodes: dict[str, list[str]] = field(default_factory=dict)


class _Stop(Exception):
    """Ends the forward run early: all asked about have started, or the budget is spent."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


def forecast(
    session: Session,
    objects: standing.ClusterObjects,
    conf: SchedulerConf,
    targets: Collection[str],
    *,
    period: float = 1.0,
    horizon: float = HORIZON,
    max_sessions: int = MAX_SESSIONS,
    budget: float = BUDGET,
    scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES),
    shortcuts: Shortcuts = ALL,
    hold_while: Callable[[], bool] = lambda: False,
) -> Forecast:
    """When the jobs ``targets`` (uids of ``session``'s jobs) start. ``session`` is
    opened on ``objects`` (``standing.open_session``, with the same
    ``scheduler_names``) and is only read; ``period`` is the scheduler's; ``shortcuts``:
    which the forward run takes (``Shortcuts.none()``: the straightforward way).
    ``hold_while``: before each simulated session, the run waits while it holds
    (``kbatch run``'s binds in flight, which it would slow); the wait is not counted
    in ``budget``."""
    began = time.perf_counter()
    waiting = {uid for uid, job in session.jobs.items() if standing.is_waiting(job)}
    asked = {uid for uid in targets if uid in waiting}
    # The cyclic collector stays paused until the run is over and gone: all the plan and
    # the import make outlives them, and a collection set off between the import and the
    # run, or before the run is freed (at once: nothing in it refers back to it), would
    # walk it all (on 1,000 nodes and 10,000 pods, some tenth of a second) to free nothing.
    with collector_paused():
        plan = eta_input.plan_of(session, objects)
        step = step_for(plan, period)
        limits = _Limits(max_sessions, began + budget, hold_while)
        # (no history, ``Shortcuts.forward_without_history``: a forecast reads the state,
        # the clock and the session count, and a run without history decides the same)
        # (the collector is paused already, here; the run's own pause would freeze and
        # at its end thaw every object of the process, ``kbatch run``'s frozen cache too)
        options = runner.Options(
            period=step,
            until=horizon,
            scheduler_names=scheduler_names,
            shortcuts=shortcuts,
            history=not shortcuts.forward_without_history,
            pause_collector=False,
        )
        forward = _Forward(plan, conf, options, limits, session.jobs, asked, objects.loaded.state)
        stopped = "started"
        if asked:
            try:
                forward.run()
                stopped = "horizon" if forward.clock.now + step > horizon else "settled"
            except _Stop as stop:
                stopped = stop.why
        estimates = {}
        for uid in targets:
            job = session.jobs.get(uid)
            if job is None:
                continue
            if uid not in waiting:
                started = f"started already ({job.phase.value})"
                estimates[uid] = Estimate(0.0, "started", started, "high")
                continue
            reason = standing.reason_of(session, job)
            estimates[uid] = _estimate(job, forward, plan, stopped, reason, period)
        made = Forecast(
            estimates,
            forward.clock.now,
            forward.totals.sessions,
            time.perf_counter() - began,
            stopped,
            step,
            forward.first,
            forward.nodes,
        )
        del forward, plan  # (freed here, by their references alone)
    return made


def step_for(plan: Plan, period: float) -> float:
    """The simulated step: the period, or a round number of periods (``ROUND_STEPS``)
    that makes the median known runtime at least ``STEPS_PER_RUNTIME`` steps (more
    on a smaller cluster: ``POD_STEPS`` over its pods)."""
    known = plan.known_runtimes()
    if not known:
        return period
    pods = sum(1 for obj in plan.objects if obj["kind"] == "Pod")
    steps = max(STEPS_PER_RUNTIME, POD_STEPS / max(pods, 1))
    most = statistics.median(known) / steps
    seconds = max((s for s in ROUND_STEPS if s <= most), default=period)
    return period * max(1, math.floor(seconds / period))


@dataclass(frozen=True)
class _Limits:
    sessions: int
    deadline: float  # time.perf_counter() by which to stop (less the time held)
    # before each simulated session, waits while this holds (``forecast``'s ``hold_while``)
    hold_while: Callable[[], bool] = lambda: False


HOLD_POLL = 0.01  # seconds between two looks at ``hold_while``
HOLD_MOST = 30.0  # seconds a forecast waits at most, each time, while it holds


def _hold(hold_while: Callable[[], bool]) -> float:
    """Wait while ``hold_while`` holds, ``HOLD_MOST`` seconds at most; the seconds waited."""
    began = time.perf_counter()
    while hold_while() and time.perf_counter() - began < HOLD_MOST:
        time.sleep(HOLD_POLL)
    return time.perf_counter() - began


# ----------------------------------------------------------------------------- the run
class _Forward(runner.Simulation):
    """The simulator, started from the plan's objects, noting when each waiting job
    starts; it stops once every job asked about has (``_Stop``)."""

    def __init__(
        self,
        plan: Plan,
        conf: SchedulerConf,
        options: runner.Options,
        limits: _Limits,
        jobs: Mapping[str, JobInfo],
        asked: set[str],
        listed: ClusterState | None = None,
    ) -> None:
        """``listed``: the state of the listed objects the plan was made of, whose pod
        records its pods take (``ClusterState.records_from``)."""
        super().__init__(manifests.Manifests(), conf, options)
        self.timeline = _Unsampled()
        self.limits = limits
        self.asked = asked
        self.watched = {uid: job for uid, job in jobs.items() if standing.is_waiting(job)}
        self.started: dict[str, float] = {}
        self.first: dict[str, tuple[str, str]] = {}
        self.nodes: dict[str, list[str]] = {}
        self._held = 0.0  # seconds spent waiting while ``hold_while`` held
        if asked:
            self._import(plan, listed)

    def _import(self, plan: Plan, listed: ClusterState | None) -> None:
        """The plan's objects, created in dependency order with their own creation
        times (``Plan.stamps``), handed over: the plan made them for this (their parts
        shared with the listed objects, which nothing changes in place)."""
        order = manifests.CREATE_ORDER
        state = self.cluster.state
        state.records_from(listed)
        try:
            for obj in sorted(plan.objects, key=lambda o: order.index(o["kind"])):
                if obj["kind"] == "Job":  # through admission, which holds it for its group
                    runner.create(self.cluster, self.jobs, obj, self.admission)
                    continue
                self.cluster.create(obj, owned=True, created=plan.stamp_of(obj))
        finally:
            state.records_from(None)

    def tick(self, now: float) -> bool:
        self._held += _hold(self.limits.hold_while)
        changed = super().tick(now)
        for uid, job in self.watched.items():
            if uid not in self.started and self._has_started(job):
                self.started[uid] = now
                if uid in self.asked:
                    self.nodes[uid] = self._nodes_of(job)
        if not self.first and self.totals.sessions:
            self.first = {uid: self._told(self.watched[uid]) for uid in self.asked}
        if self.asked <= self.started.keys():
            raise _Stop("started")
        if (
            self.totals.sessions >= self.limits.sessions
            or time.perf_counter() - self._held > self.limits.deadline
        ):
            raise _Stop("budget")
        return changed

    def _told(self, job: JobInfo) -> tuple[str, str]:
        """The job's phase, and its Unschedulable condition's message (a pod's
        PodScheduled one for a pod of its own), as the simulator holds them now."""
        state = self.cluster.state
        if not job.has_pod_group:
            pod = state.get("Pod", job.namespace, job.name) or {}
            bound = bool((pod.get("spec") or {}).get("nodeName"))
            return ("Running" if bound else "Pending"), _message(pod, "PodScheduled", "False")
        group = state.get("PodGroup", job.namespace, job.name) or {}
        phase = (group.get("status") or {}).get("phase") or "Pending"
        return phase, _message(group, "Unschedulable", "True")

    def _nodes_of(self, job: JobInfo) -> list[str]:
        """Where the job's pods are; a group's pods that a Job held for it made in this
        run (none when the session was opened) are found by their group."""
        state = self.cluster.state
        names = [job.name] if not job.has_pod_group else [t.name for t in job.tasks.values()]
        if job.has_pod_group and not names:
            names = [
                pod["metadata"]["name"]
                for pod in state.list("Pod")
                if pod["metadata"].get("namespace") == job.namespace
                and (pod["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
                == job.name
            ]
        records = (state.pod_record(job.namespace, name) for name in names)
        return sorted({r.node_name for r in records if r is not None and r.node_name})

    def _has_started(self, job: JobInfo) -> bool:
        state = self.cluster.state
        if job.has_pod_group:
            return state.pod_group_phase(job.namespace, job.name) in STARTED_PHASES
        pod = state.pod_record(job.namespace, job.name)
        return pod is not None and bool(pod.node_name)


class _Unsampled(Timeline):
    """A timeline that takes no samples: a forecast draws no report, and a sample of
    1,000 nodes at every tick is work it would throw away."""

    def record(self, now: float, snapshot: Snapshot, created_at: dict[str, float]) -> None:
        self.end = now


def _message(obj: Mapping[str, Any], kind: str, status: str) -> str:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == kind and condition.get("status") == status:
            return str(condition.get("message") or condition.get("reason") or "")
    return ""


# ----------------------------------------------------------------------------- answers
def _estimate(
    job: JobInfo, forward: _Forward, plan: Plan, stopped: str, reason: str, period: float
) -> Estimate:
    at = forward.started.get(job.uid)
    if at is None:
        return _not_started(forward, plan, stopped, reason)
    done = [
        uid
        for uid, pods in plan.running.items()
        if uid != job.uid and all(_ends_by(r, 0.0, at) for r in pods)
    ]
    ahead = [uid for uid, t in forward.started.items() if t < at and uid != job.uid]
    rested_on = [r for pods in plan.running.values() for r in pods if _ends_by(r, 0.0, at)]
    for uid in ahead:
        start = forward.started[uid]
        rested_on += [r for r in plan.pending.get(uid, []) if _ends_by(r, start, at)]
    confidence = _confidence(rested_on)
    parts = []
    if done:
        parts.append(f"{_count(len(done), 'running job')} {_verb(len(done), 'finish')} by then")
    if ahead:
        parts.append(f"{_count(len(ahead), 'waiting job')} {_verb(len(ahead), 'start')} first")
    sources = runtimes.summary(rested_on)
    if sources:
        parts.append(f"runtimes from {sources}")
    step = forward.options.period
    if step > period:
        parts.append(f"to within {human(step)}")
    parts.append(f"{confidence} confidence")
    when = "now" if at == 0 else f"~{human(at)}"
    text = f"{when} ({'; '.join(parts)})"
    return Estimate(at, when, text, confidence, len(done), len(ahead), sources)


def _ends_by(runtime: Runtime, start: float, at: float) -> bool:
    return runtime.seconds is not None and start + runtime.seconds <= at


def _confidence(rested_on: list[Runtime]) -> str:
    """high: every runtime it rests on is a deadline, a lifetime or a deletion (or none
    was needed); medium: medians of at least CONFIDENT_SAMPLES finished pods whose
    runtimes vary little (``NARROW_SPREAD``); low: fewer, or widely varying."""
    history = [r for r in rested_on if r.source in (runtimes.GROUP, runtimes.QUEUE)]
    if not history:
        return "high"
    enough = min(r.samples for r in history) >= CONFIDENT_SAMPLES
    return "medium" if enough and max(r.spread for r in history) <= NARROW_SPREAD else "low"


def _not_started(forward: _Forward, plan: Plan, stopped: str, reason: str) -> Estimate:
    reached = forward.clock.now
    if stopped in ("horizon", "budget"):
        why = "the simulation stopped there"
        if stopped == "budget":
            why += f" after {_count(forward.totals.sessions, 'session')}"
        text = f"later than {human(reached)} ({why})"
        return Estimate(None, f">{human(reached)}", text, "none", later_than=reached)
    blockers = []
    if plan.unknown_running:
        blockers.append(
            f"{_count(plan.unknown_running, 'running pod')} with no known runtime "
            "(no activeDeadlineSeconds, kbatch.io/lifetime, or finished pods of their "
            "PodGroup or queue)"
        )
    endless = [
        uid for uid in forward.started if any(r.seconds is None for r in plan.pending.get(uid, []))
    ]
    if endless:
        blockers.append(f"{_count(len(endless), 'job')} starting before it with no known runtime")
    if not blockers:
        blockers.append(f"it does not start once all else has finished: {reason}")
    return Estimate(None, "unknown", "unknown: " + "; ".join(blockers), "none")


def _count(n: int, thing: str) -> str:
    return f"{n} {thing}{'' if n == 1 else 's'}"


def _verb(n: int, verb: str) -> str:
    """The verb agreeing with ``n`` things: 'finishes', 'finish'."""
    if n != 1:
        return verb
    return verb + ("es" if verb.endswith(("sh", "ch", "s")) else "s")
