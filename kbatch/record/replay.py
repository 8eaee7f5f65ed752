"""``kbatch replay``: the scheduler run again over a recording, decision by decision.

The recording holds every change the scheduler's cluster state was given, in the
order it was given them, and where each session's snapshot stood among them. The
replay gives a new cluster state the same changes in the same order, at the same
times (its clock reads each record's time, for the binds it assumes), and at each
session's place runs the same scheduler with the recorded conf and the session's
recorded time. What the kubelet, the controllers and the binds did comes back as
the recorded changes, just as the watches brought it: nothing is simulated that the
recording already says. The changes recorded while a session ran (its own binds,
assumed; what the watches brought meanwhile) are given after it, as they were.

Each session's decisions are compared with the recorded ones: binds (pod and node),
evictions, nominations, PodGroup and Queue statuses. Differences are counted and the
first ones listed; the replay goes on from the recorded state, so one difference
does not hide the next.
"""

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from kbatch import __version__
from kbatch.api import DEFAULT_SCHEDULER_NAMES
from kbatch.cluster.assumed import ASSUMED_TTL
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.config import ConfigError, SchedulerConf
from kbatch.operators.scheduler.core.framework.collector import collector_paused_for_run
from kbatch.operators.scheduler.core.framework.interface import Outcome, Snapshot
from kbatch.operators.scheduler.core.runner import Scheduler, default_conf, load_conf
from kbatch.record import replay_marks, replay_parts
from kbatch.record.replay_marks import WARM_UP_SESSIONS, Begin
from kbatch.record.store import hooks, recorder, segments

KINDS = ("binds", "evictions", "nominations", "groups", "queues")
SHOWN_DIFFERENCES = 20


@dataclass(slots=True)
class Counts:
    recorded: int = 0
    replayed: int = 0
    differing: int = 0


@dataclass(slots=True)
class Result:
    directory: str
    recorded_version: str = ""
    sessions: int = 0
    start: float | None = None  # seconds from the recording's first record
    end: float | None = None
    counts: dict[str, Counts] = field(default_factory=lambda: {k: Counts() for k in KINDS})
    differences: list[dict[str, Any]] = field(default_factory=list)
    stopped: segments.Stop | None = None
    warnings: list[str] = field(default_factory=list)
    wall_seconds: float = 0.0
    cpu_seconds: float = 0.0  # this process's
    first_segment: int = 0  # the segment it read from (its checkpoint, after the first)
    # Of a replay shared between processes (``replay_split``): each share's sessions,
    # first segment, wall and CPU seconds, in order.
    shares: list[dict[str, Any]] = field(default_factory=list)

    def total(self) -> Counts:
        return Counts(
            sum(c.recorded for c in self.counts.values()),
            sum(c.replayed for c in self.counts.values()),
            sum(c.differing for c in self.counts.values()),
        )

    def as_json(self) -> dict[str, Any]:
        total = self.total()
        return {
            "recording": self.directory,
            "version": {"recorded": self.recorded_version, "replaying": __version__},
            "sessions": self.sessions,
            "from": self.start,
            "to": self.end,
            "decisions": {
                "recorded": total.recorded,
                "replayed": total.replayed,
                "differing": total.differing,
            },
            "by_kind": {
                kind: {"recorded": c.recorded, "replayed": c.replayed, "differing": c.differing}
                for kind, c in self.counts.items()
            },
            "differences": self.differences,
            "stopped": None if self.stopped is None else _stop_json(self.stopped),
            "warnings": self.warnings,
            "wall_seconds": round(self.wall_seconds, 3),
            **({"shares": self.shares} if self.shares else {}),
        }


def _stop_json(stop: segments.Stop) -> dict[str, Any]:
    return {"file": stop.file, "offset": stop.offset, "object": stop.object, "why": stop.why}


class _Collecting:
    """The replaying scheduler's backend: the replayed state's snapshots; the outcome
    kept to compare, never applied (the recording brings what followed from it)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.outcome: Outcome | None = None

    def snapshot(self) -> Snapshot:
        return self.state.snapshot()

    def apply(self, outcome: Outcome) -> None:
        self.outcome = outcome


class Replay:
    def __init__(
        self,
        directory: Path,
        start: float | None = None,
        end: float | None = None,
        warn: Callable[[str], None] = lambda _: None,
        share: range | None = None,
        begin: Begin | None = None,
    ) -> None:
        """``share``: of the recorded sessions (numbered from 0 in the recording's order,
        every ``out`` record one), those to replay, within ``start`` and ``end``: the
        changes before the first are applied with no session run but the last
        ``WARM_UP_SESSIONS`` (``replay_split``). ``begin``: read from a checkpoint
        before the first session to run instead of from the start (the state it holds
        is the one the changes before it build)."""
        first_segment = 0 if begin is None else begin.segment
        self.reading = segments.Reading(directory, first_segment=first_segment)
        self.result = Result(str(directory), start=start, end=end)
        self.warn = warn
        self.share = share
        # the ``out`` records taken so far (those before ``begin`` counted)
        self.recorded_sessions = 0 if begin is None else begin.sessions
        self.t = 0.0
        self.now = 0.0
        self.t0: float | None = None if begin is None else begin.first
        self.conf: SchedulerConf | None = None
        self.state: ClusterState | None = None
        self.backend: _Collecting | None = None
        self.scheduler: Scheduler | None = None
        # A session began on this thread (True: any): its snapshot is that thread's next.
        self.waiting_snapshot: int | bool = False
        self.held: list[dict[str, Any]] | None = None  # changes made while a session ran
        self.frozen: Callable[[], None] = lambda: None  # (after each session)
        # The last session's statuses, by kind and object: as dumped, and the model.
        self.published: dict[tuple[str, str], tuple[Any, BaseModel]] = {}
        self.session_uid = ""  # the recorded session's, when its decisions tell it

    def run(self) -> Result:
        started, cpu = time.perf_counter(), time.process_time()
        # As the simulator runs (``collector.collector_paused_for_run``): what outlives a
        # session is frozen out of the cyclic collector's sight, which would otherwise walk
        # the whole cluster state again and again to free nothing (a session leaves no
        # cycles: ``tests/unit/record/test_replay_lean.py``).
        with collector_paused_for_run(True) as frozen:
            self.frozen = frozen
            for record in self._records():
                self._take(record)
        self.result.stopped = self.reading.stopped
        if self.reading.stopped is not None:
            self.warn(f"the recording stops early: {self.reading.stopped}")
        self.result.wall_seconds = time.perf_counter() - started
        self.result.cpu_seconds = time.process_time() - cpu
        headers = self.reading.headers
        self.result.first_segment = int(headers[0].get("segment", 1)) if headers else 0
        return self.result

    def _records(self) -> Iterator[dict[str, Any]]:
        end = self.result.end
        last = None if self.share is None else self.share.stop
        for record in self.reading.records():
            if last is not None and self.recorded_sessions >= last:
                return  # (the rest is another share's)
            if self.state is None:
                self._begin(record)
            self.t = float(record.get("t", self.t))
            if end is not None and self.t - (self.t0 or 0.0) > end:
                return
            yield record

    def _begin(self, first: dict[str, Any]) -> None:
        header = self.reading.headers[0] if self.reading.headers else {}
        version = str(header.get("kbatch", "unknown"))
        self.result.recorded_version = version
        if version != __version__:
            self._warning(
                f"the recording was made by kbatch {version}; this is kbatch {__version__}: "
                "decisions may differ where the two differ"
            )
        if self.t0 is None:
            self.t0 = float(first.get("t", 0.0))
        self.state = ClusterState(
            frozenset(header.get("scheduler_names") or DEFAULT_SCHEDULER_NAMES),
            clock=lambda: self.t,
            assumed_ttl=replay_parts.assumed_ttl(header.get("assumed_ttl", ASSUMED_TTL)),
            leave_out_settled=bool(header.get("leave_out_settled", False)),
        )
        self.backend = _Collecting(self.state)

    def _warning(self, message: str) -> None:
        self.result.warnings.append(message)
        self.warn(message)

    def _take(self, record: dict[str, Any]) -> None:
        op = record.get("op")
        if self.held is not None and op not in ("now", "out", "sess", "sched", "conf"):
            self.held.append(record)
            return
        if op == "sess":
            self._end_session()
            self.waiting_snapshot = record.get("th", True)
        elif op == "snap":
            waiting = self.waiting_snapshot
            if waiting is not False and (waiting is True or record.get("th") == waiting):
                self.waiting_snapshot, self.held = False, []
            else:
                self._state().snapshot()
        elif op == "now":
            self.now = float(record["now"])
        elif op == "out":
            if self.held is not None:
                self._session(record)
            self._end_session()
            self.recorded_sessions += 1
        elif op == "conf":
            self.conf = self._load_conf(record)
        elif op == "sched":
            self.scheduler = None
        elif op == "gap":
            at = self.t - (self.t0 or 0.0)
            self._warning(f"{record.get('n')} records were dropped while recording, at {at:.3f} s")
        else:
            self._change(record)

    def _end_session(self) -> None:
        held, self.held, self.waiting_snapshot = self.held, None, False
        for change in held or ():
            self._take(change)

    def _load_conf(self, record: dict[str, Any]) -> SchedulerConf:
        where = f"{self.result.directory}: the recorded scheduler conf"
        try:
            return load_conf(yaml.safe_dump(record.get("conf")), where)
        except ConfigError as exc:
            raise ConfigError(f"refused: {exc}") from exc

    def _state(self) -> ClusterState:
        assert self.state is not None
        return self.state

    def _change(self, record: dict[str, Any]) -> None:
        state, op = self._state(), record.get("op")
        if op in ("a", "r"):
            obj = record["o"]
            status = None
            if type(obj) is dict:
                kind = obj.get("kind")
                if kind == "Pod":
                    held = state.get("Pod", *replay_parts.namespace_name(obj))
                    obj = replay_parts.sharing_held_parts(obj, held)
                elif kind in replay_parts.STATUS_KINDS and self.published:
                    status = self._published_status(kind, obj)
            with contextlib.suppress(ObjectError):  # refused now as then: the state notes why
                state.apply(obj, owned=True, status=status)
            return
        if op == "d":
            namespace, _, name = str(record["key"]).rpartition("/")
            state.delete(str(record["k"]), namespace, name)
            return
        namespace, _, name = str(record.get("key", "")).rpartition("/")
        if op == "as":
            state.assume_bound(namespace, name, str(record["node"]))
        elif op == "ar":
            state.assume_releasing(namespace, name)
        elif op == "c":
            state.confirmed(namespace, name)
        elif op == "f":
            state.forget(namespace, name)
        elif op == "k":
            state.keep_assumed(namespace, name, float(record["s"]))

    def _session(self, recorded: dict[str, Any]) -> None:
        start, share = self.result.start, self.share
        # a share's first sessions before its own are run, not compared: a new scheduler
        # asks the gangs resting in the old one again, which the whole replay does not
        first = 0 if share is None else share.start
        warming = self.recorded_sessions < first
        if (start is not None and self.t - (self.t0 or 0.0) < start) or (
            self.recorded_sessions < first - WARM_UP_SESSIONS
        ):
            self.scheduler = None  # the replay's first session begins afresh
            return
        backend = self.backend
        assert backend is not None
        conf = self.conf or default_conf()
        if self.scheduler is None:
            self.scheduler = Scheduler(
                backend, conf, clock=lambda: self.now, session_ids=self._session_id
            )
        self.scheduler.conf = conf
        backend.outcome = None
        self.session_uid = replay_parts.recorded_session_uid(recorded, self.now)
        session = self.scheduler.run_once()
        session.forget_functions()
        outcome = backend.outcome or Outcome()
        decisions = hooks.decisions(outcome)
        # (already JSON's types: lists, strings, numbers, None; compared as they are)
        replayed = recorder.decisions_json(decisions)
        self.published = replay_parts.published(decisions, replayed)
        if not warming:
            self.result.sessions += 1
            self._compare(recorded, replayed)
        self.frozen()

    def _session_id(self) -> str:
        return self.session_uid or f"replay-{self.recorded_sessions + 1}"

    def _published_status(self, kind: str, obj: dict[str, Any]) -> BaseModel | None:
        """The status model the last session published for ``obj`` (a PodGroup or
        Queue written), when ``obj``'s status is that model's dump: the write brings
        back what the session decided, as the simulator's writer hands the state the
        model itself (``sim.backend``). The state then takes it as parsed instead of
        validating the recorded status again, and the next session finds its old
        status to be the very one it publishes again (``job_status``: compared by
        identity before field by field). None: validated as recorded."""
        namespace, name = replay_parts.namespace_name(obj)
        found = self.published.get((kind, f"{namespace}/{name}" if namespace else name))
        written = obj.get("status")
        if found is None or type(written) is not dict:
            return None
        dumped, model = found
        # (a Queue's status is written with its unset fields as null)
        if written != dumped and {k: v for k, v in written.items() if v is not None} != dumped:
            return None
        return model

    def _compare(self, recorded: dict[str, Any], replayed: dict[str, Any]) -> None:
        at = round(self.t - (self.t0 or 0.0), 3)
        for kind in KINDS:
            was, now = recorded.get(kind) or [], replayed.get(kind) or []
            counts = self.result.counts[kind]
            counts.recorded += len(was)
            counts.replayed += len(now)
            if was == now:
                continue  # (most sessions: nothing to tell apart, nothing to key)
            if kind in ("groups", "queues"):
                was_by, now_by = replay_parts.statuses(was), replay_parts.statuses(now)
                keys = [k for k in {**was_by, **now_by} if was_by.get(k) != now_by.get(k)]
                pairs = [(k, was_by.get(k), now_by.get(k)) for k in keys]
            else:
                missing = Counter(map(json.dumps, was)) - Counter(map(json.dumps, now))
                extra = Counter(map(json.dumps, now)) - Counter(map(json.dumps, was))
                pairs = [(json.loads(k)[0], json.loads(k), None) for k in missing.elements()]
                pairs += [(json.loads(k)[0], None, json.loads(k)) for k in extra.elements()]
            counts.differing += len(pairs)
            for key, was_one, now_one in pairs:
                if len(self.result.differences) < SHOWN_DIFFERENCES:
                    self.result.differences.append(
                        {
                            "session": self.result.sessions,
                            "at": at,
                            "kind": kind,
                            "object": key,
                            "recorded": was_one,
                            "replayed": now_one,
                        }
                    )


def replay(
    directory: Path,
    start: float | None = None,
    end: float | None = None,
    warn: Callable[[str], None] = lambda _: None,
    marks: replay_marks.Marks | None = None,
) -> Result:
    """Replay the recording in ``directory``, from ``start`` to ``end`` seconds after its
    first record (read from the last checkpoint before ``start``: the sessions before it
    are not run, and the state there is the one the changes before it build; ``marks``:
    the recording's, when found already). RecordingError: nothing there to replay;
    ConfigError: its conf cannot be loaded (naming the field)."""
    begin = None
    if start is not None:
        if marks is None:
            marks = replay_marks.session_marks(directory)
        sessions = replay_marks.window(marks.first, marks.times, start, end)
        begin = replay_marks.begin_for(marks, sessions.start) if sessions else None
    return Replay(directory, start, end, warn, begin=begin).run()
