"""The scheduling loop of ``kbatch run``: a session a period while this replica leads,
its caches are synced and a session is due (``SchedulerLoop._due``: not when nothing
changed since a session that changed nothing, but every few periods); a scheduler
configuration file that is reloaded when it changes (a bad one is logged and the last
good one kept).

``wake`` ends the wait for the next period at once: the caches are synced (at start,
or after taking the lead), so the first session need not wait up to a period more.

A session that is due waits (bounded) until the last one's binds are answered
(``SchedulerLoop._binds_answered``). What outlives a session, and what comes in between
sessions, is frozen out of the cyclic collector's sight (``collector_schedule``).
"""

import contextlib
import hashlib
import logging
import math
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from kbatch.config import ConfigError, SchedulerConf
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.interface import Backend
from kbatch.operators.scheduler.core.framework.outcome import Bind
from kbatch.operators.scheduler.runtime.collector_schedule import CollectorSchedule
from kbatch.record.store import hooks
from kbatch.record.store.recorder import Recorder

log = logging.getLogger("kbatch.loop")
# A session that is due waits at most this long for the binds in flight to be answered
# (``SchedulerLoop._binds_answered``), and checks this often whether they are.
BINDS_WAIT = 10.0
BINDS_POLL = 0.01


class ConfSource:
    """The scheduler conf from a file (or the default), re-read when its bytes change."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._digest = ""
        self._conf = runner.default_conf() if path is None else runner.load_conf_file(path)
        if path is not None:
            self._digest = hashlib.sha256(path.read_bytes()).hexdigest()

    @classmethod
    def fixed(cls, conf: SchedulerConf) -> "ConfSource":
        """Always ``conf`` (no file)."""
        source = cls(None)
        source._conf = conf
        return source

    def current(self) -> SchedulerConf:
        if self.path is None:
            return self._conf
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            log.error(
                "cannot read scheduler conf %s (%s); keeping the last good one", self.path, exc
            )
            return self._conf
        digest = hashlib.sha256(data).hexdigest()
        if digest != self._digest:
            self._digest = digest
            try:
                self._conf = runner.load_conf(data.decode("utf-8"), str(self.path))
                log.info(
                    "scheduler conf %s reloaded: actions %s",
                    self.path,
                    ", ".join(self._conf.actions),
                )
            except (ConfigError, UnicodeDecodeError) as exc:
                log.error("bad scheduler conf, keeping the last good one: %s", exc)
        return self._conf


class SchedulerLoop:
    def __init__(
        self,
        cluster: Backend,
        conf: ConfSource,
        period: float,
        metrics: SchedulerMetrics,
        may_schedule: Callable[[], bool],
        has_work: Callable[[], bool] = lambda: True,
        generation: Callable[[], int] = lambda: 0,
        busy: Callable[[], bool] = lambda: False,
        idle_every: int = 5,
        busy_idle_every: int = 30,
        clock: Callable[[], float] = time.time,
        recorder: Recorder | None = None,
        committed_binds: Callable[[list[Bind]], None] | None = None,
        binds_wait: float = BINDS_WAIT,
        collector: CollectorSchedule | None = None,
    ) -> None:
        self.cluster = cluster
        self.conf = conf
        self.period = period
        self.metrics = metrics
        self.may_schedule = may_schedule
        self.has_work = has_work
        self.generation = generation
        self.busy = busy
        self.idle_every = idle_every
        self.busy_idle_every = busy_idle_every
        self.clock = clock  # the sessions' (Session.now)
        self.recorder = recorder  # the flight recorder (``kbatch run --record``), if any
        # told each statement's binds as a session commits them (``Session.committed_binds``)
        self.committed_binds = committed_binds
        self.binds_wait = binds_wait  # at most, for the binds in flight (``_binds_answered``)
        # What freezes what outlives a session out of the cyclic collector's sight, and
        # when it walks it all (``collector_schedule``); None: the collector as it is.
        self.collector = collector
        self.sessions = 0
        self._idle_periods = 0
        self._seen_generation = -1
        # One scheduler for every session, so that the gangs resting at a session's close
        # rest at the next open without being asked again (``framework.resting``).
        self._scheduler: runner.Scheduler | None = None
        # The last session changed nothing (``Outcome.changes_nothing``), under the conf
        # it ran with: the work waiting gets no session of its own until something changes,
        # or the clock reaches what that session's plugins decide by it (``wakes_at``).
        self._settled_under: SchedulerConf | None = None
        self._settled_until = math.inf
        self._stop = threading.Event()
        self._woken = threading.Event()
        # Set once a session has ended (however it ended): ``kbatch run`` starts kopf
        # after it, so that kopf's own start does not slow the first session.
        self.first_session = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kbatch-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Check for a session now, not at the end of the period (``_due`` still decides)."""
        self._woken.set()

    def stop(self) -> None:
        self._stop.set()
        self._woken.set()
        if self._thread.ident is not None:  # a loop never started has nothing to join
            self._thread.join(timeout=10)

    def alive(self) -> bool:
        """True until the loop has died or been stopped — also before its thread starts
        (the health server answers from the first moment of ``kbatch run``)."""
        if self._stop.is_set():
            return False
        return self._thread.ident is None or self._thread.is_alive()

    def run_once(self) -> None:
        conf = self.conf.current()
        scheduler = self._scheduler
        if scheduler is None:
            backend, clock = self.cluster, self.clock
            if self.recorder is not None:
                backend, clock = hooks.recorded(backend, clock, self.recorder)
            scheduler = self._scheduler = runner.Scheduler(
                backend,
                conf,
                clock=clock,
                session_ids=lambda: uuid.uuid4().hex,
                committed_binds=self.committed_binds,
            )
        if self.recorder is not None:
            self.recorder.conf(conf)
        scheduler.conf = conf
        self._settled_under = None  # until this session has closed, changing nothing
        session = scheduler.run_once()
        if session.outcome.changes_nothing():
            self._settled_under, self._settled_until = conf, session.wakes_at
        self.sessions += 1
        self.metrics.record(session)
        session.forget_functions()  # its objects go with it, not at a collection

    def settled(self) -> bool:
        """Did the last session change nothing, with the conf it ran with still the one,
        and the clock not yet where its plugins decide otherwise?"""
        return (
            self._settled_under is not None
            and self._settled_under is self.conf.current()
            and self.clock() < self._settled_until
        )

    def _due(self) -> bool:
        """Is a session worth its cost now? Yes when there is something to place or admit,
        unless the last session changed nothing and nothing changed since (below); when
        anything changed since the last one and no binds are in flight (statuses then
        catch up at once); and at least every ``idle_every`` periods, or every
        ``busy_idle_every`` while binds are in flight. A quiet cluster thus costs a
        session every few seconds, not every period; a bind burst with nothing else
        waiting none until it ends (or half a minute): such a session would decide
        nothing but statuses that wait for the binds anyway, and would take its CPU
        from the binds.

        A backlog that cannot move is such a quiet cluster too: once a session
        has changed nothing, the next one, on the same cluster under the same conf, would
        decide the same, until the clock reaches what its plugins decide by it (a
        lifetime's end: ``Session.wakes_at``). What else time changes (a queue's flow,
        an event recorded again) waits for the beat, ``idle_every`` periods at most:
        otherwise the waiting work alone would run a whole session every period, to
        decide nothing."""
        self._idle_periods += 1
        busy = self.busy()
        changed = self.generation() != self._seen_generation and not busy
        beat = self.busy_idle_every if busy else self.idle_every
        if (self.has_work() and not self.settled()) or changed or self._idle_periods >= beat:
            self._idle_periods = 0
            self._seen_generation = self.generation()
            return True
        return False

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.period_once()
            self._woken.wait(max(self.period - (time.monotonic() - started), 0.0))
            self._woken.clear()

    def _binds_answered(self) -> None:
        """Until no bind is in flight (``busy``), ``binds_wait`` seconds at most, or the
        loop stops. A session's CPU, taken while the last one's binds are sent, slows
        them several times over, in kbatch (the interpreter) and on the machine (the
        API server's CPU): a gang's binds, sent one after another, then spread over
        seconds, its first pods bound long before its last. Waiting costs no binds:
        they are what the cluster waits for, and the session after the wait places
        all that came meanwhile, with the binds' answers seen."""
        deadline = time.monotonic() + self.binds_wait
        while self.busy() and time.monotonic() < deadline and not self._stop.is_set():
            self._stop.wait(BINDS_POLL)
            self._between_sessions()

    def _between_sessions(self) -> None:
        if self.collector is not None:
            self.collector.between_sessions()

    def period_once(self) -> None:
        """One period: a session if this replica may schedule and one is due."""
        self._between_sessions()
        if not self.may_schedule():
            # What it settled on, and what rested, may be stale when it leads again.
            self._settled_under = self._scheduler = None
        elif self._due():
            self._binds_answered()
            if self._stop.is_set():
                return
            collector = self.collector
            around = (
                collector.around_session(self.busy())
                if collector is not None
                else contextlib.nullcontext()
            )
            with around:  # (the session is gone when it ends: ``run_once`` returned)
                try:
                    self.run_once()
                except Exception:
                    log.exception("scheduling session failed")
                finally:
                    self.first_session.set()
