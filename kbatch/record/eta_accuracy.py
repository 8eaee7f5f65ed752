"""``kbatch replay --eta-accuracy``: the ETA backtested on a recording.

The recording is replayed as ``kbatch replay`` does (the recorded changes, in order, at
their times). Every ``every`` seconds of recorded time, the cluster as the replay holds
it then is what ``kbatch explain --eta`` would have listed: the forecast
(``kbatch.visibility.eta``) runs on it, with the recorded conf, for the waiting jobs
(a seeded sample of at most ``sample`` of them: one forecast answers them all, and it
runs until the last of them starts), and each answer is kept with the time it was
asked. The replay notes when each job really started (its PodGroup Running or
Completed, a pod of its own bound), and ``eta_score`` scores every answer against it.
``kbatch.record.eta_day`` does the same on the simulated day as it runs (``Backtest``
is what both share).

The recorded sessions are not run again: their decisions are never applied in a replay
(the recording brings what followed from them), so the state the forecast reads is the
same without them; only their snapshots are taken, which the state's bookkeeping needs.

Finished pods: a forecast learns runtimes from the Succeeded pods the API server still
holds, with their containers' finishedAt. A recording holds what the cluster held; the
simulated day deletes finished Jobs within seconds, and its pods carry no finishedAt, so
its forecasts know no runtime. With ``keep_finished`` > 0 the backtest keeps that many
of the last finished PodGroups with their pods (each pod's finishedAt the time it was
seen to succeed), as a cluster keeping finished Jobs a while would: the forecast then
learns from them.
"""

import random
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbatch.config import SchedulerConf
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.record import eta_score
from kbatch.record.eta_score import Asked
from kbatch.record.replay import Replay
from kbatch.sim import clock
from kbatch.visibility import eta, eta_input, standing

EVERY = 300.0  # seconds of recorded time between two sample instants
SAMPLE = 50  # waiting jobs asked about at one instant, at most
SEED = 0
BUDGET = 120.0  # wall seconds a forecast may take (it stops first at eta.MAX_SESSIONS)
STARTED = ("Running", "Completed")
GROUP_NAME = "scheduling.k8s.io/group-name"
Object = dict[str, Any]


@dataclass(frozen=True)
class Settings:
    every: float = EVERY
    sample: int = SAMPLE
    seed: int = SEED
    keep_finished: int = 0

    def __post_init__(self) -> None:
        if self.every <= 0:
            raise ValueError(f"--eta-every: expected a positive duration, not {self.every}")
        if self.sample <= 0:
            raise ValueError(f"--eta-sample: expected a positive number, not {self.sample}")
        if self.keep_finished < 0:
            raise ValueError(f"--eta-keep-finished: expected 0 or more, not {self.keep_finished}")


class Backtest:
    """The estimates asked at each instant, the real starts, and the finished work kept;
    told each change of the cluster (``applied``, ``dropping``) with its time ``at``
    (seconds from the start) and asked to forecast when ``due``."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.random = random.Random(settings.seed)
        self.next_at = settings.every
        self.asked: list[Asked] = []
        self.starts: dict[str, list[float]] = {}
        self.started_now: set[str] = set()  # jobs started as the cluster stands
        self.seen: dict[str, float] = {}  # PodGroup key -> when it was first seen
        self.asked_pods: set[str] = set()  # pods of their own asked about
        self.succeeded_at: dict[str, float] = {}  # pod key -> when it was seen Succeeded
        self.finished: OrderedDict[str, tuple[Object, list[Object]]] = OrderedDict()
        self.instants = 0  # sample instants reached
        self.forecasts = 0  # forecasts run (at the instants when a job waited)
        self.waiting_seen = 0
        self.no_pods = 0  # waiting groups not asked about: no pods yet, and no held Job
        self.forecast_seconds = 0.0
        self.last_at = 0.0  # the last time a change was seen

    def due(self, at: float) -> list[float]:
        """The instants to ask at that ``at`` has passed, the changes of time ``at`` not
        yet taken: the cluster stood still through them all, as it stands now."""
        instants = []
        while self.next_at < at:
            instants.append(self.next_at)
            self.next_at += self.settings.every
        self.instants += len(instants)
        return instants

    # ------------------------------------------------------------------ changes
    def applied(self, obj: Object, at: float) -> None:
        """Note a job's start (or its return to waiting) and a pod's success."""
        self.last_at = max(self.last_at, at)
        kind, meta = obj.get("kind"), obj.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name')}"
        status = obj.get("status") or {}
        if kind == "PodGroup":
            self.seen.setdefault(key, at)
            started = status.get("phase") in STARTED
        elif kind == "Pod":
            if status.get("phase") == "Succeeded":
                self.succeeded_at.setdefault(key, at)
            key = f"pod:{key}"
            if key not in self.asked_pods:
                return
            started = bool((obj.get("spec") or {}).get("nodeName"))
        else:
            return
        if started and key not in self.started_now:
            self.started_now.add(key)
            self.starts.setdefault(key, []).append(at)
        elif not started:
            self.started_now.discard(key)

    def dropping(self, obj: Object | None, at: float, epoch: float) -> None:
        """``obj`` is deleted at ``at``: keep it if it is finished work (the last
        ``keep_finished`` groups); ``epoch``: add to ``at`` for the cluster's clock."""
        keep = self.settings.keep_finished
        if not keep or obj is None:
            return
        meta, status = obj.get("metadata") or {}, obj.get("status") or {}
        namespace = meta.get("namespace") or "default"
        if obj.get("kind") == "PodGroup" and status.get("phase") == "Completed":
            key = f"{namespace}/{meta.get('name')}"
            pods = self.finished.pop(key, ({}, []))[1]
            self.finished[key] = (obj, pods)
            while len(self.finished) > keep:
                self.finished.popitem(last=False)
        elif obj.get("kind") == "Pod" and status.get("phase") == "Succeeded":
            finished = self.succeeded_at.pop(f"{namespace}/{meta.get('name')}", at)
            group = (meta.get("annotations") or {}).get(GROUP_NAME)
            if group is not None:
                held = self.finished.setdefault(f"{namespace}/{group}", ({}, []))
                held[1].append(_with_finished_at(obj, finished + epoch))

    # ------------------------------------------------------------------ asking
    def ask(
        self,
        objects: standing.ClusterObjects,
        conf: SchedulerConf,
        names: frozenset[str],
        at: float,
    ) -> None:
        """Forecast the waiting jobs of ``objects`` (a sample), as asked at ``at``."""
        kept = [(group, pods) for group, pods in self.finished.values() if group]
        objects = standing.ClusterObjects(
            objects.now,
            objects.nodes,
            [*objects.pods, *(pod for _, pods in kept for pod in pods)],
            [*objects.pod_groups, *(group for group, _ in kept)],
            objects.queues,
            objects.priority_classes,
            objects.quotas,
            objects.jobs,
            claims=objects.claims,
            volumes=objects.volumes,
            storage_classes=objects.storage_classes,
            csi_nodes=objects.csi_nodes,
        )
        session, _ = standing.open_session(objects, conf, names)
        held = eta_input.held_groups(objects.jobs)
        waiting = []
        for uid, job in session.jobs.items():
            if not standing.is_waiting(job):
                continue
            if job.has_pod_group and not job.tasks and uid not in held:
                self.no_pods += 1  # no pods, no held Job: nothing says what it will run
            else:
                waiting.append(uid)
        waiting.sort()
        self.waiting_seen += len(waiting)
        sample = self.settings.sample
        targets = self.random.sample(waiting, sample) if len(waiting) > sample else waiting
        if not targets:
            return
        began = time.perf_counter()
        answer = eta.forecast(session, objects, conf, targets, budget=BUDGET, scheduler_names=names)
        self.forecast_seconds += time.perf_counter() - began
        self.forecasts += 1
        for uid in targets:
            estimate = answer.estimates.get(uid)
            if estimate is None:
                continue
            if not session.jobs[uid].has_pod_group:
                self.asked_pods.add(uid)
            self.asked.append(
                Asked(uid, at, estimate.seconds, estimate.confidence, estimate.later_than)
            )

    def result(self) -> dict[str, Any]:
        settings = self.settings
        return {
            "every": settings.every,
            "sample": settings.sample,
            "seed": settings.seed,
            "keep_finished": settings.keep_finished,
            "instants": self.instants,
            "forecasts": self.forecasts,
            "waiting_seen": self.waiting_seen,
            "estimates": len(self.asked),
            "not_asked_without_pods": self.no_pods,
            **eta_score.score(self.asked, self.starts, self.last_at, self.seen),
            "forecast_seconds": round(self.forecast_seconds, 3),
        }


def _with_finished_at(pod: Object, finished_at: float) -> Object:
    """The Succeeded pod with a container that terminated at ``finished_at``, as a
    kubelet reports it (the simulator's pods carry none)."""
    status = dict(pod.get("status") or {})
    if status.get("containerStatuses"):
        return pod
    stamp = clock.timestamp(finished_at, kept=False)
    status["containerStatuses"] = [{"name": "main", "state": {"terminated": {"finishedAt": stamp}}}]
    return {**pod, "status": status}


# ----------------------------------------------------------------------------- replay
class EtaReplay(Replay):
    """A replay that asks the forecast every ``settings.every`` seconds and notes when
    jobs really start."""

    def __init__(
        self,
        directory: Path,
        settings: Settings,
        start: float | None = None,
        end: float | None = None,
        warn: Callable[[str], None] = lambda _: None,
    ) -> None:
        super().__init__(directory, start, end, warn)
        self.backtest = Backtest(settings)
        if start is not None:
            self.backtest.next_at = start
        self.now_t = 0.0  # the record time of the last session's now

    def _take(self, record: dict[str, Any]) -> None:
        op = record.get("op")
        if self.held is not None and op not in ("now", "out", "sess", "sched", "conf"):
            super()._take(record)  # held until the session's end, then taken again
            return
        at = self.t - (self.t0 or 0.0)
        for instant in self.backtest.due(at) if self.held is None and self.state else ():
            self._ask(instant)
        if op == "d" and self.state is not None:
            namespace, _, name = str(record.get("key", "")).rpartition("/")
            obj = self.state.get(str(record.get("k")), namespace, name)
            self.backtest.dropping(obj, at, self.now - (self.now_t - (self.t0 or 0.0)))
        super()._take(record)
        if op == "now":
            self.now_t = self.t
        elif op in ("a", "r"):
            self.backtest.applied(record["o"], at)

    def _session(self, recorded: dict[str, Any]) -> None:
        self._state().snapshot()  # what the replayed session would have taken
        self.result.sessions += 1

    def _ask(self, at: float) -> None:
        state = self._state()
        # The state is as it stood from the last record until this one: the instant is
        # in between, and the recorded clock then is the last session's and the time since.
        now = self.now + (at + (self.t0 or 0.0) - self.now_t)
        objects = eta_input.listed(state, now)
        self.backtest.ask(objects, self.conf or default_conf(), state.scheduler_names, at)

    def backtested(self) -> dict[str, Any]:
        result = self.run()
        return {
            "recording": result.directory,
            **self.backtest.result(),
            "wall_seconds": round(result.wall_seconds, 3),
            "stopped": None if result.stopped is None else str(result.stopped),
            "warnings": result.warnings,
        }


def backtest(
    directory: Path,
    settings: Settings,
    start: float | None = None,
    end: float | None = None,
    warn: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    """The ETA's backtest on the recording in ``directory`` (JSON-ready)."""
    return EtaReplay(directory, settings, start, end, warn).backtested()


def text(shown: dict[str, Any]) -> str:
    """The backtest in words: what was asked, then the table (``eta_score.table``)."""
    where = shown.get("recording") or f"the simulated day {shown.get('trace')}"
    head = (
        f"ETA backtest on {where}: {shown['forecasts']} forecasts at "
        f"{shown['instants']} instants, one every {clock.format_duration(shown['every'])} "
        f"when a job waits, of at most {shown['sample']} waiting jobs each (seed "
        f"{shown['seed']}); {shown['estimates']} estimates, "
        f"{shown['scored']} scored; {shown['not_asked_without_pods']} waiting groups not "
        f"asked about (no pods and no held Job); finished groups kept: "
        f"{shown['keep_finished']}; {shown['forecast_seconds']} s forecasting"
    )
    return head + "\n" + eta_score.table(shown)
