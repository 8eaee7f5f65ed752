"""The simulation loop: the real scheduler, one session per tick, against the in-memory cluster.

Each tick at time t = k × period:

1. objects whose ``kbatch.io/sim-submit-at`` ≤ t are created, those due at the
   same time in dependency order (``manifests.CREATE_ORDER``: Namespaces,
   PriorityClasses, Queues, ... Jobs, PodGroups, Pods; by input order within a
   kind), through the API server's priority check and the admission webhooks'
   functions (``kbatch.sim.admission``); a refused object is not created, and
   ``warn`` says why, as ``kubectl apply`` would;
2. running pods whose ``kbatch.io/sim-duration`` has elapsed succeed;
3. pods deleted earlier whose grace period is over are removed;
4. the job controller brings Jobs' pods to what their specs ask;
5. the PV controller binds and provisions the claims that may be, and makes those
   of new pods' ephemeral volumes (``kbatch.sim.volume_controller``);
6. one scheduler session runs (``Scheduler.run_once``);
7. the PodGroup controller updates counts and phases, the PV controller binds the
   claims the session's binds chose volumes for, and Jobs held for their PodGroup
   (delayed pod creation) resume once it is admitted;
8. a timeline sample is taken for the report (from the session's snapshot, as
   the session left it).

The run ends at ``until``, or when nothing can change any more: no future
submission, no running pod with a pending finish, nothing being deleted, and
the last tick changed nothing (no object created or removed, no bind, no
eviction, no status written). ``Outcome.time`` is then the time of the last
session; at ``until`` it is the last tick at or before ``until`` (whether or
not a session had to run there). Without ``until``, a run that never settles
stops after ``max_sessions`` sessions and says so (``settled`` False).

When a tick changes nothing but a future event exists, the clock **jumps** to
the first tick of the period grid at or after that event: the ticks in between
would see what that tick saw and do what it did — nothing — so they are not run
(and not counted in ``summary.sessions``); everything else comes out as if
every tick had run (``Options.skip_quiet_ticks`` False runs them all, and
``tests/scenarios/test_sim_skip.py`` compares). The events are a submission, a
pod's finish or removal, the end of a running job's lifetime while work waits
(from then on it may be reclaimed), and the time an event the tick recorded or
held back may be recorded again (the event filter's repeat interval): a quiet
session repeats its events, and one that comes late would record them late. Between two
ticks that run, the Jobs held for their PodGroups are looked at again only when a
PodGroup or a Job of theirs was written (nothing else can release one).

The cyclic collector is paused for the whole run, and what outlives a tick (the
cluster, its records, the last snapshot) is frozen out of its sight after each
(``gc.freeze``; ``Options.pause_collector``): a tick leaves no cycles behind
(``tests/unit/sim/test_session_garbage.py``), so each collection walked the last
session's snapshot, and each full one the whole cluster, to free nothing — a tenth of
a long run. When the run ends, all is handed back to the collector.
"""

import math
import operator
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbatch.api import DEFAULT_SCHEDULER_NAMES
from kbatch.cluster.assumed import ASSUMED_TTL
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.config import ConfigError, SchedulerConf
from kbatch.operators.scheduler.core.framework.collector import collector_paused_for_run
from kbatch.operators.scheduler.core.framework.info import SHARE_STATUSES, TaskStatus
from kbatch.operators.scheduler.core.framework.interface import Backend
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.operators.scheduler.core.runner import (
    Scheduler,
    default_conf,
    load_conf,
    load_conf_file,
)
from kbatch.sim import arrivals, clock, defaults, jobs, manifests, podgroups, volume_controller
from kbatch.sim.admission import SimAdmission
from kbatch.sim.backend import SimBackend
from kbatch.sim.jobsets import JobSetController
from kbatch.sim.timeline import Timeline
from kbatch.sim.vcjob_spec import is_vcjob
from kbatch.sim.vcjobs import VcJobController, served_names

if TYPE_CHECKING:  # (the flight recorder is loaded only for a run that records)
    from kbatch.record.store.recorder import Recorder

ProgressFn = Callable[[float, int], None]
# Session ids share nothing with object uids (those count up from 1).
_SESSION_ID_BASE = 0x5E55 << 112


@dataclass(frozen=True, slots=True)
class Options:
    period: float = 1.0
    until: float | None = None
    scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES)
    max_sessions: int = 100_000
    # False: a session every period, quiet or not (to check that jumping changes nothing).
    skip_quiet_ticks: bool = True
    # False: snapshots show the jobs that are over, too (to check that leaving them out
    # changes nothing: ``kbatch.cluster.reuse.settled``).
    leave_out_settled: bool = True
    # False: the cyclic collector runs as usual (to check that pausing it changes nothing).
    pause_collector: bool = True
    # Which shortcuts the state, the scheduler and the simulator take (``Shortcuts.none()``:
    # the straightforward way, to check that they change nothing).
    shortcuts: Shortcuts = ALL
    # Record the run (``kbatch.record``): into this empty directory, bounded so in bytes.
    record: tuple[Path, int] | None = None
    # False: keep nothing of what is over, only what the run needs to go on (no event log
    # but the refusals, no rows of departed work, no timeline, no complete Job once its
    # pods are gone): for a run whose totals are all that is read (``kbatch bench
    # --trace``), so that its memory follows what is alive, not how long it ran.
    history: bool = True


@dataclass(slots=True)
class Totals:
    sessions: int = 0
    binds: int = 0
    evictions: int = 0


class SessionIds:
    """The simulator's session ids, counted: the same on every run. (An object of its
    own, not a method of the simulation, whose scheduler would then refer back to it:
    a cycle that only the cyclic collector frees.)"""

    def __init__(self) -> None:
        self.made = 0

    def __call__(self) -> str:
        self.made += 1
        return str(uuid.UUID(int=_SESSION_ID_BASE + self.made))


@dataclass(slots=True)
class Outcome:
    time: float
    cluster: SimBackend
    jobs: jobs.JobController
    totals: Totals
    timeline: Timeline
    settled: bool = True
    jobsets: JobSetController | None = None  # (None: a run that played none)
    vcjobs: VcJobController | None = None  # (None: a run that played none)


class Simulation:
    def __init__(
        self,
        loaded: manifests.Manifests,
        conf: SchedulerConf,
        options: Options = Options(),
        progress: ProgressFn | None = None,
        warn: Callable[[str], None] | None = None,
        arriving: Iterable[manifests.Manifest] = (),
    ) -> None:
        """``loaded``: the objects of the run, held from the start; ``arriving``: more,
        in time order, read only as they come due (``kbatch.sim.arrivals``)."""
        if options.period <= 0:
            raise clock.DurationError("--period: must be more than 0")
        names = served_names(options.scheduler_names, (item.obj for item in loaded.objects))
        self.options = options = replace(options, scheduler_names=names)
        self.progress = progress
        self.warn = warn
        shortcuts = options.shortcuts
        self.clock = clock.SimClock(shortcuts.timestamps)
        state = ClusterState(
            options.scheduler_names,
            leave_out_settled=options.leave_out_settled,
            shortcuts=shortcuts,
        )
        self.cluster = SimBackend(state, self.clock, options.history)
        self.jobs = jobs.JobController(self.cluster)
        self.jobsets = JobSetController(self.cluster, self.jobs)
        self.vcjobs = VcJobController(self.cluster)
        self.admission = SimAdmission(self.cluster, self.jobs, self.jobsets, self.vcjobs)
        self.pending = deque(sorted(loaded.objects, key=lambda m: m.due))
        self.arriving = arrivals.Arrivals(arriving)
        self.totals = Totals()
        self.timeline = Timeline(shortcuts=shortcuts)
        self.flight = self._recorder(state, conf)  # the flight recorder, if one is asked for
        backend: Backend = self.cluster
        now: Callable[[], float] = self.clock
        if self.flight is not None:
            from kbatch.record.store import hooks

            backend, now = hooks.recorded(self.cluster, self.clock, self.flight)
        self.scheduler = Scheduler(backend, conf, now, SessionIds(), shortcuts)
        defaults.make_defaults(self.cluster)

    def _recorder(self, state: ClusterState, conf: SchedulerConf) -> "Recorder | None":
        """The recorder ``Options.record`` asks for, told every change of ``state``, on
        the simulated clock (it may hold the simulation back: nothing is dropped)."""
        if self.options.record is None:
            return None
        from kbatch.record.store import recorder

        directory, max_bytes = self.options.record
        header = recorder.state_header(
            self.options.scheduler_names, self.options.leave_out_settled, ASSUMED_TTL, "simulated"
        )
        made = recorder.Recorder(directory, max_bytes, self.clock, header, limit=None)
        state.observer = made
        made.conf(conf)
        return made

    def run(self) -> Outcome:
        try:
            with collector_paused_for_run(self.options.pause_collector) as frozen:
                return self._run(frozen)
        finally:
            if self.flight is not None:
                self.flight.close(timeout=None)

    def _run(self, frozen: Callable[[], None]) -> Outcome:
        period, until = self.options.period, self.options.until
        k, settled, end = 0, True, None
        while True:
            now = k * period
            changed = self.tick(now)
            frozen()
            if self.progress is not None:
                self.progress(now, self.totals.sessions)
            next_k = k + 1
            if not changed:
                upcoming = self._next_event()
                if upcoming is None:
                    break
                if self.options.skip_quiet_ticks:
                    next_k = max(next_k, clock.tick_at_or_after(upcoming, period))
            if until is not None and next_k * period > until + 1e-9:
                # Nothing changes between here and the last tick before ``until``.
                end = max(now, clock.tick_at_or_before(until, period) * period)
                break
            if until is None and self.totals.sessions >= self.options.max_sessions:
                settled = False
                break
            k = next_k
        self.timeline.end = end if end is not None else self.clock.now
        return Outcome(
            self.timeline.end, self.cluster, self.jobs, self.totals, self.timeline, settled,
            self.jobsets, self.vcjobs,
        )  # fmt: skip

    def tick(self, now: float) -> bool:
        """One tick at ``now``; True if anything changed."""
        self.clock.now = now
        before = self.cluster.changes
        self.cluster.events.retell_at = math.inf
        self._materialise(now)
        self.cluster.finish_due(now)
        self.cluster.remove_released(now)
        self.jobsets.reconcile(self.admission.view, self._create)
        self.vcjobs.reconcile(self._create)
        self.jobs.reconcile()
        gone = self.cluster.let_go_settled(self._done_with)
        forgotten = self.jobs.let_go(gone, forget=not self.options.history)
        if forgotten:
            self.admission.forget_jobs(forgotten)
        volume_controller.reconcile(self.cluster)  # (the claims of the pods just made)
        session = self.scheduler.run_once()
        session.forget_functions()  # its objects go with it, not at a collection
        stats = session.stats
        self.totals.sessions += 1
        self.totals.binds += stats.binds
        self.totals.evictions += stats.evictions
        podgroups.reconcile(self.cluster)
        volume_controller.reconcile(self.cluster)  # (the claims the binds chose volumes for)
        self._release_held()
        if self.cluster.last_snapshot is not None and self.options.history:
            self.timeline.record(now, self.cluster.last_snapshot, self.cluster.created_at)
        return self.cluster.changes != before or stats.binds > 0 or stats.evictions > 0

    def _done_with(self, pod: dict[str, Any]) -> bool:
        """May ``pod`` leave the state? Not while a Job or vcjob that owns it counts it."""
        return self.jobs.done_with(pod) and self.vcjobs.done_with(pod)

    def _create(self, obj: dict[str, Any]) -> str | None:
        return create(self.cluster, self.jobs, obj, self.admission)

    def _release_held(self) -> None:
        """Delayed pod creation: Jobs of admitted groups resume. Whether a held Job is
        released depends on its PodGroup and the specs of the group's Jobs only, so only
        the held Jobs of groups for which either changed are looked at again."""
        groups, self.cluster.touched.holding = self.cluster.touched.holding, set()
        if groups:
            self.admission.release(groups)

    def _next_due(self, now: float) -> manifests.Manifest | None:
        """Take the next object due by ``now``, of those held and those arriving (None:
        none is due yet)."""
        held, arriving = self.pending[0] if self.pending else None, self.arriving.peek()
        if arriving is not None and (held is None or arriving.due < held.due):
            return self.arriving.pop() if arriving.submit_at <= now + 1e-9 else None
        if held is not None and held.submit_at <= now + 1e-9:
            return self.pending.popleft()
        return None

    def _materialise(self, now: float) -> None:
        while (item := self._next_due(now)) is not None:
            with refused_as_input(item):
                refused = create(self.cluster, self.jobs, item.obj, self.admission)
            if self.warn is None:
                continue
            for untold in self.vcjobs.take_untold():
                self.warn(untold)
            if refused is not None:
                self.warn(f"{item.ref} refused: {refused}")
            elif item.kind == "Pod" and (node := self.cluster.missing_node(item.obj)):
                self.warn(
                    f"{item.ref}: spec.nodeName: no Node named {node!r}; "
                    "the pod is taken as bound to it, as the API server would"
                )

    def _next_event(self) -> float | None:
        times = [self.pending[0].submit_at] if self.pending else []
        arriving = self.arriving.peek()
        if arriving is not None:
            times.append(arriving.submit_at)
        upcoming = (self.cluster.next_event(), self.jobs.next_event())
        times += (t for t in upcoming if t is not None)
        lifetime_ends = self._next_lifetime_end()
        if lifetime_ends is not None:
            times.append(lifetime_ends)
        if times and self.cluster.events.retell_at < math.inf:
            # Only while the run goes on for another reason: with nothing left to happen
            # it ends here, every tick run or not.
            times.append(self.cluster.events.retell_at)
        return min(times, default=None)

    def _next_lifetime_end(self) -> float | None:
        """When the next running job's lifetime ends (it may then be reclaimed), while
        work waits: a time-based change no other event would wake the clock for. A job
        that holds no room (its pods are done) has nothing to lose when it ends."""
        snapshot = self.cluster.last_snapshot
        if snapshot is None:
            return None
        infos = snapshot.jobs.values()
        # (asked of every job of every quiet tick, at C speed: first whether any job
        # has a lifetime at all, which most workloads give none)
        if not any(map(operator.is_not, map(_LIFETIME, infos), repeat(None))):
            return None
        pending = operator.itemgetter(TaskStatus.PENDING)
        if not any(map(pending, map(_COUNTS, infos))):
            return None
        ends = (
            job.protected_until()
            for job in infos
            if job.lifetime is not None  # (else it has no end: most jobs, asked first)
            and any(job.counts[status] for status in SHARE_STATUSES)
        )
        return min((t for t in ends if t is not None and t > self.clock.now), default=None)


_LIFETIME, _COUNTS = operator.attrgetter("lifetime"), operator.attrgetter("counts")


def create(
    cluster: SimBackend,
    controller: jobs.JobController,
    obj: dict[str, Any],
    admission: SimAdmission | None = None,
) -> str | None:
    """Create ``obj``, through the API server's checks and the admission webhooks when
    ``admission`` is given. A refused object is not created: a Warning event on it says
    why, and so does the returned message (None: created)."""
    if admission is not None:
        refused = admission.invalid(obj) or cluster.refusal(obj)
        if refused is not None:
            return refused
        if is_vcjob(obj):  # (Volcano's; no kbatch webhook serves it)
            admission.vcjobs.apply(obj)
            return None
        admitted = admission.admit(obj)
        if admitted is None:
            return cluster.last_refusal(obj)
        obj = admitted
    if obj["kind"] == "Job":
        controller.apply(obj)
    elif obj["kind"] == "JobSet" and admission is not None:
        admission.jobsets.apply(obj, admission.view)
    else:
        cluster.create(obj)
    if obj["kind"] == "PriorityClass":
        controller.touch_all()  # Jobs whose pods it refused may create them now
    return None


@contextmanager
def refused_as_input(item: manifests.Manifest) -> Iterator[None]:
    """Within it, an error about ``item`` becomes a ManifestError naming its source; an
    unexpected TypeError/AttributeError/ValueError (a field of a shape no check foresaw)
    also names the object, rather than ending in a traceback."""
    try:
        yield
    except manifests.ManifestError:
        raise
    except (ObjectError, clock.DurationError) as exc:
        raise manifests.ManifestError(f"{item.source}: {exc}") from exc
    except (TypeError, AttributeError, ValueError, KeyError) as exc:
        why = f"{type(exc).__name__}: {exc}"
        raise manifests.ManifestError(f"{item.source}: {item.ref}: cannot use it ({why})") from exc


def resolve_conf(config: Path | None, loaded: manifests.Manifests) -> SchedulerConf:
    """``--config`` if given, else the manifests' annotated ConfigMap, else the default."""
    if config is not None:
        try:
            return load_conf_file(config)
        except OSError as exc:
            raise ConfigError(f"{config}: cannot read: {exc.strerror or exc}") from exc
    if loaded.scheduler_conf is not None:
        return load_conf(*loaded.scheduler_conf)
    return default_conf()


def skipped_notes(loaded: manifests.Manifests) -> list[str]:
    """One line per kind the simulator left out, and per Volcano field it left out."""
    return [
        f"skipped {count} {kind} object{'s' if count > 1 else ''}: "
        "the simulator does not model this kind"
        for kind, count in loaded.skipped.items()
    ] + [
        f"left out {what} of {count} object{'s' if count > 1 else ''}: a Volcano field "
        "that changes nothing kbatch schedules by"
        for what, count in loaded.ignored.items()
    ]


def load(
    paths: Sequence[Path | str] = (), documents: Sequence[object] | None = None
) -> manifests.Manifests:
    loaded = manifests.load_files([Path(p) for p in paths])
    if documents is not None:
        loaded.extend(manifests.load_documents(documents))
    return loaded
