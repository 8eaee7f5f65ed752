"""``kbatch run``'s ETA publisher: each waiting PodGroup's estimate, as a condition and a
metric, made off the scheduling session's path.

A thread of its own, beside the scheduling loop: while this replica leads and its caches
are synced, it takes what the informers hold (the objects, not a session's snapshot:
nothing the loop owns is touched), opens a session on them as ``kbatch explain`` does,
runs the forecast (``kbatch.visibility.eta``) for every waiting PodGroup of kbatch's own
API that has pods or whose Job kbatch holds (its pods come when it is released), and
publishes:

- the condition ``kbatch.io/EstimatedStart`` (``kbatch.visibility.published``), written
  when the estimate moved by more than its tolerance (a step of the forecast, a tenth of
  the wait, ``MIN_TOLERANCE``), its confidence changed, or it is half ``FRESH_SECONDS``
  old; removed once the group has started. Each write names the resourceVersion it read
  (a session's status written meanwhile wins; the next round writes again).
- to the visibility API, when it serves (``unpublished``): the estimates of the waiting
  jobs no PodGroup of kbatch's carries (a pod of its own, another API's group), forecast
  in the same run, kept in memory for ``kbatch jobs --eta`` and ``explain --eta``;
- the gauge ``kbatch_podgroup_estimated_start_seconds``: the estimated start (epoch
  seconds); for a group that had not started when the forecast stopped, the time it
  reached (confidence ``none``); +Inf when unknown.

Rate: a round at most every ``interval`` seconds, counted from the end of the last one,
and a forecast stops after ``budget`` seconds. While the scheduler's binds are in flight
a round does not start, and a forecast waits before its next simulated session (a
gang's binds, slowed by its CPU, would spread over seconds). The forecast shares the
interpreter with the sessions: at most ``budget / (budget + interval)`` of it. Each write moves the
PodGroup, so the next session sees a change (at most one extra session a round).
"""

import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kbatch.api import DEFAULT_SCHEDULER_NAMES
from kbatch.cluster import records, upstream_groups, volcano
from kbatch.cluster.state import ClusterState
from kbatch.config import SchedulerConf
from kbatch.metrics import SchedulerMetrics
from kbatch.operators.scheduler.core.framework.collector import collector_paused
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.visibility import eta, eta_input, published, standing

log = logging.getLogger("kbatch.eta")

INTERVAL = 30.0  # seconds between rounds, by default
BUDGET = 10.0  # seconds a round's forecast may simulate, by default
FIRST_ROUND = 5.0  # seconds after the start, at most, of the first round
MIN_TOLERANCE = 30.0  # seconds an estimate may move before it is written again

Write = Callable[[str, str, dict[str, Any]], None]  # namespace, name, a merge patch
Offer = Callable[[Session, float, int], None]  # a session, as of when, of which generation
# uid -> the condition a waiting job with no PodGroup of kbatch's would carry (a pod of
# its own, another API's group): kept where it is answered from, written nowhere
Unpublished = Callable[[Mapping[str, Mapping[str, str]]], None]


@dataclass(frozen=True)
class PublisherSettings:
    interval: float = INTERVAL
    budget: float = BUDGET
    period: float = 1.0  # the scheduler's
    scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES)


@dataclass(frozen=True)
class Round:
    """What one round did."""

    estimated: int  # jobs forecast
    written: int  # conditions written or removed
    seconds: float


class EtaPublisher:
    """Publishes the estimates of the groups in ``state``, a round every interval."""

    def __init__(
        self,
        state: ClusterState,
        conf: Callable[[], SchedulerConf],
        may_run: Callable[[], bool],
        write: Write,
        metrics: SchedulerMetrics,
        settings: PublisherSettings = PublisherSettings(),
        clock: Callable[[], float] = time.time,
        busy: Callable[[], bool] = lambda: False,
        offer: Offer | None = None,
        unpublished: Unpublished | None = None,
    ) -> None:
        """``offer``: handed each round's session before its forecast (the visibility
        API answers from it: ``kbatch.visibility.served``); ``unpublished``: handed the
        estimates of the waiting jobs that have no PodGroup of kbatch's to carry them
        (with none, those are not forecast)."""
        self.state = state
        self.offer = offer
        self.unpublished = unpublished
        # While the scheduler's binds are in flight (a burst, a cold start with a
        # backlog) a round waits: it would take the interpreter from the binds, and what
        # it foresaw would be out of date by the time it was written.
        self.busy = busy
        self.conf = conf
        self.may_run = may_run
        self.write = write
        self.metrics = metrics
        self.settings = settings
        self.clock = clock
        self.rounds = 0
        self._failures: list[str] = []  # this round's writes that failed
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kbatch-eta", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout=self.settings.budget + 5)

    def _run(self) -> None:
        wait = min(self.settings.interval, FIRST_ROUND)  # estimates soon after a start
        while not self._stop.wait(wait):
            wait = self.turn()

    def turn(self) -> float:
        """One turn of the thread: a round if this replica may publish and its binds are
        not in flight. The seconds to wait before the next turn."""
        if not self.may_run():
            self.metrics.record_estimates({})  # the leader's to tell
            return self.settings.interval
        if self.busy():
            return min(self.settings.interval, FIRST_ROUND)  # soon after the burst
        try:
            done = self.run_once()
            log.debug("ETA round: %s", done)
        except Exception:
            log.exception("ETA round failed")
        return self.settings.interval

    def run_once(self) -> Round:
        """Forecast every waiting PodGroup and publish what moved. The cyclic collector
        stays paused for the round: its session, snapshot and forecast outlive each
        step, so a pass in between would walk them all to free nothing; they are freed
        with the round (nothing in them refers back to them)."""
        with collector_paused():
            return self._round()

    def _round(self) -> Round:
        began = time.perf_counter()
        now = self.clock()
        generation = self.state.generation
        objects = eta_input.listed(self.state, now)
        conf = self.conf()
        names = self.settings.scheduler_names
        session, _ = standing.open_session(objects, conf, names)
        if self.offer is not None:
            self.offer(session, now, generation)
        groups = {_key(g): g for g in objects.pod_groups if _ours(g)}
        # A group with no pods yet is forecast when a Job kbatch holds for it says what
        # it will run (its pods are made when it is released), else left out.
        held = eta_input.held_groups(objects.jobs)
        # (a pod of its own, another API's group: told to ``unpublished``, if anyone)
        every_job = self.unpublished is not None
        targets = [
            uid
            for uid, job in session.jobs.items()
            if ((uid in groups and job.has_pod_group) or every_job)
            and (job.tasks or uid in held)
            and standing.is_waiting(job)
        ]
        forecast = eta.forecast(
            session,
            objects,
            conf,
            targets,
            period=self.settings.period,
            budget=self.settings.budget,
            scheduler_names=names,
            hold_while=self.busy,
        )
        written, self._failures = 0, []
        waiting = set(targets)
        series: dict[tuple[str, str, str, str], float] = {}
        for uid, group in groups.items():
            estimate = forecast.estimates.get(uid) if uid in waiting else None
            if estimate is not None:
                namespace, name = uid.split("/", 1)
                labels = (namespace, name, session.jobs[uid].queue, estimate.confidence)
                series[labels] = _value(estimate, now)
            written += self._publish(group, estimate, now, forecast.step)
        self.metrics.record_estimates(series)
        if self.unpublished is not None:
            self.unpublished({
                uid: published.condition_of(estimate, now)
                for uid, estimate in forecast.estimates.items()
                if uid in waiting and uid not in groups
            })  # fmt: skip
        # its plugins' functions refer back to it: dropped, the session and its snapshot
        # go with the round, not at a pass of the collector (``kbatch run`` freezes what
        # a pass has not reached: ``collector_schedule``)
        session.forget_functions()
        if self._failures:
            log.warning(
                "%d PodGroup ETA conditions not written (the next round writes again): %s",
                len(self._failures),
                self._failures[0],
            )
        self.rounds += 1
        return Round(len(targets), written, time.perf_counter() - began)

    def _publish(
        self, group: Mapping[str, Any], estimate: eta.Estimate | None, now: float, step: float
    ) -> int:
        """Write the group's condition when it moved (1), or remove it once the group has
        started (1); else nothing (0)."""
        status = group.get("status") or {}
        conditions = list(status.get("conditions") or [])
        old = published.find(conditions)
        others = [c for c in conditions if c.get("type") != published.CONDITION]
        if estimate is None:
            if old is None:
                return 0
            return self._write(group, others)
        new = published.condition_of(estimate, now)
        tolerance = max(step, MIN_TOLERANCE, 0.1 * (estimate.seconds or 0.0))
        if published.same_estimate(old, new, tolerance) and not self._stale(old, now):
            return 0
        return self._write(group, [*others, new])

    @staticmethod
    def _stale(old: Mapping[str, Any] | None, now: float) -> bool:
        try:
            made = records.timestamp((old or {}).get("lastTransitionTime"))
        except ValueError:
            return True
        return now - made > published.FRESH_SECONDS / 2

    def _write(self, group: Mapping[str, Any], conditions: list[Any]) -> int:
        meta = group["metadata"]
        patch: dict[str, Any] = {"status": {"conditions": conditions}}
        if meta.get("resourceVersion"):
            patch["metadata"] = {"resourceVersion": meta["resourceVersion"]}
        try:
            self.write(meta.get("namespace") or "default", meta["name"], patch)
        except Exception as exc:  # a conflict or a refusal: the next round writes again
            self._failures.append(f"{meta.get('namespace')}/{meta['name']}: {exc}")
            return 0
        return 1


def _value(estimate: eta.Estimate, now: float) -> float:
    """The gauge's value: the estimated start (epoch seconds); not before the time the
    forecast reached, for one that had not started by then; +Inf when unknown."""
    if estimate.seconds is not None:
        return now + estimate.seconds
    if estimate.later_than is not None:
        return now + estimate.later_than
    return math.inf


def _ours(group: Mapping[str, Any]) -> bool:
    """A PodGroup of kbatch's own API (upstream's and Volcano's have no such condition)."""
    return upstream_groups.origin_of(group) is None and volcano.origin_of(group) is None


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"
