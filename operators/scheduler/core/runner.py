"""The scheduling cycle: open a session on a snapshot, run the actions, close it, and
have the cluster apply the outcome in one step.

The clock and the session id source are passed in, so a simulation is
reproducible and a test can drive time.
"""

import time
from collections.abc import Callable, Iterable, Mapping
from itertools import filterfalse
from pathlib import Path

from kbatch.api import selector
from kbatch.api.selector import LabelSelector
from kbatch.config import DEFAULT_CONF, ConfigError, Known, SchedulerConf, parse_conf
from kbatch.operators.scheduler.core.actions import REGISTRY as ACTIONS
from kbatch.operators.scheduler.core.framework import job_status
from kbatch.operators.scheduler.core.framework.collector import collector_paused
from kbatch.operators.scheduler.core.framework.info import JobInfo, KeptStatus
from kbatch.operators.scheduler.core.framework.interface import (
    Backend,
    ObjectRef,
    Outcome,
    Snapshot,
)
from kbatch.operators.scheduler.core.framework.kept import KeptAcrossSessions
from kbatch.operators.scheduler.core.framework.outcome import Bind
from kbatch.operators.scheduler.core.framework.queue_tree import TreeQueue, refusals
from kbatch.operators.scheduler.core.framework.resting import RestingGangs, rests
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts
from kbatch.operators.scheduler.core.framework.signatures import Invalid
from kbatch.operators.scheduler.core.plugins import REGISTRY as PLUGINS

KNOWN = Known(actions=frozenset(ACTIONS), plugins=frozenset(PLUGINS))


def load_conf(text: str, source: str = "<scheduler conf>") -> SchedulerConf:
    """Parse a scheduler configuration; plugin arguments are checked by their plugins."""
    conf = parse_conf(text, KNOWN, source)
    for tier_index, tier in enumerate(conf.tiers):
        for option in tier.plugins:
            parse_arguments = getattr(PLUGINS[option.name], "parse_arguments", None)
            if parse_arguments is None:
                continue
            try:
                parse_arguments(option.arguments)
            except ValueError as exc:
                raise ConfigError(
                    f"{source}: tiers[{tier_index}] plugin {option.name}: arguments: {exc}"
                ) from exc
    return conf


def load_conf_file(path: Path) -> SchedulerConf:
    return load_conf(path.read_text(encoding="utf-8"), str(path))


def default_conf() -> SchedulerConf:
    return load_conf(DEFAULT_CONF, "<default scheduler conf>")


def open_session(
    snapshot: Snapshot,
    conf: SchedulerConf,
    now: float,
    uid: str,
    resting: RestingGangs | None = None,
    shortcuts: Shortcuts = ALL,
    kept: KeptAcrossSessions | None = None,
) -> Session:
    """A session on ``snapshot``, its plugins open and its jobs' verdicts given.
    ``resting``: the jobs that rested at the last close of the caller's sessions (its
    sessions in turn on one line of snapshots), to go on with (``framework.resting``).
    ``shortcuts``: which the session takes; ``kept``: what the caller's sessions keep
    for the next (``Session.kept``; None: nothing beyond this one)."""
    parents = leave_out_refused_queues(snapshot)
    session = Session(snapshot, conf, now, uid, shortcuts, kept)
    for tier_index, tier in enumerate(conf.tiers):
        for option in tier.plugins:
            started = time.perf_counter()
            session.opening(option, tier_index)
            PLUGINS[option.name].on_session_open(session, option)
            session.stats.plugin_open_seconds[option.name] = time.perf_counter() - started
    session.compile()
    resting = resting if resting is not None else RestingGangs(shortcuts.rest_quiet_gangs)
    carried = resting.carried(snapshot, conf)
    jobs = session.jobs
    others: Iterable[JobInfo] = jobs.values()
    if carried:  # (the keys not carried, in order, found at C speed: most are carried)
        others = [jobs[uid] for uid in filterfalse(carried.__contains__, jobs)]
    quiet = session.quiet
    # The leaf queues, where jobs may run (all of them when queues are flat).
    leaves = {q: i for q, i in session.queues.items() if q not in parents} if parents else None
    queues = session.queues if leaves is None else leaves
    # (``Shortcuts.pass_quiet_gangs`` off: every running gang asked whether it is valid
    # and ready; ``rest_quiet_gangs`` off: none rests)
    quiet_gang = job_status.quiet_gang if shortcuts.pass_quiet_gangs else _never_quiet
    may_rest = rests if shortcuts.rest_quiet_gangs else _never_rests
    active: list[JobInfo] = []
    barred = _namespace_rule(session, snapshot)
    for job in others:
        if job.queue in queues:  # a leaf queue the session has: nothing to say of it
            kept_status = quiet_gang(job, conf)
            if kept_status is not None:  # valid, as the last session found it
                if may_rest(job, kept_status):
                    resting.add(job)
                else:
                    quiet[job.uid] = kept_status
                    active.append(job)
                continue
            verdict = None
        else:
            verdict = _framework_verdict(session, job.queue, snapshot.refused_queues, parents)
        active.append(job)
        if verdict is None and barred is not None and (verdict := barred(job)) is not None:
            session.invalidate(job, verdict, barred=True)  # nor admitted while it has no pods
            if job.has_pod_group:  # (told every session: the events are filtered for repeats)
                ref = ObjectRef("PodGroup", job.namespace, job.name)
                session.record_event(ref, "Warning", "Unschedulable", verdict.message)
            continue
        verdict = verdict or session.job_valid(job)
        if verdict is not None:
            session.invalidate(job, verdict)
    session.rest(resting, active)
    return session


def leave_out_refused_queues(snapshot: Snapshot) -> dict[str, list[str]]:
    """Take out of ``snapshot`` the queues the queue tree refuses (a missing parent, a
    cycle of parents, under one of those: DESIGN §14), each added to its refused queues
    with why, naming ``spec.parent``, so that their groups' conditions say so as for any queue
    kbatch ignores. The queues with children (name -> children's names, in order)."""
    queues = snapshot.queues
    if not any(queue.parent is not None for queue in queues.values()):
        return {}  # flat: nothing to refuse but a queue named root, as the tree has it
    given = {name: TreeQueue(name, queue.parent) for name, queue in queues.items()}
    for name, refusal in refusals(given).items():
        del queues[name]
        snapshot.refused_queues[name] = str(refusal)
    parents: dict[str, list[str]] = {}
    for name, queue in queues.items():
        if queue.parent is not None:
            parents.setdefault(queue.parent, []).append(name)
    return parents


def _never_quiet(job: JobInfo, conf: SchedulerConf) -> None:
    """``job_status.quiet_gang`` when ``Shortcuts.pass_quiet_gangs`` is off: never."""
    return None


def _never_rests(job: JobInfo, kept_status: KeptStatus) -> bool:
    """``rests`` when ``Shortcuts.rest_quiet_gangs`` is off: never."""
    return False


def _framework_verdict(
    session: Session,
    queue: str,
    refused_queues: Mapping[str, str],
    parents: Mapping[str, list[str]],
) -> Invalid | None:
    """Why no job of ``queue`` can be scheduled, if it cannot: its Queue is missing, or
    the cluster has it but kbatch refused it (``refused_queues``: name -> 'field: why') —
    then the PodGroup says why the Queue is ignored, not that it does not exist — or
    it has child queues (``parents``: PodGroups go in leaf queues only)."""
    children = parents.get(queue) if parents else None  # (flat: no look-up per job)
    if children:
        shown = ", ".join(children[:5]) + (", ..." if len(children) > 5 else "")
        return Invalid(
            "QueueNotLeaf",
            f"queue {queue!r} has child queues ({shown}): PodGroups go in leaf queues only",
        )
    if queue in session.queues:
        return None
    if queue in refused_queues:
        return Invalid("QueueInvalid", f"queue {queue!r} is ignored: {refused_queues[queue]}")
    return Invalid("QueueNotFound", f"queue {queue!r} does not exist")


def _namespace_rule(
    session: Session, snapshot: Snapshot
) -> Callable[[JobInfo], Invalid | None] | None:
    """Why a job's namespace may not use its queue (DESIGN §14: the queue's, or an
    ancestor's, spec.namespaceSelector does not select it), or None; None for the whole
    session when no queue sets a selector."""
    queues = session.queues
    if all(queue.namespace_selector is None for queue in queues.values()):
        return None
    labels = snapshot.namespace_labels

    def rule(name: str) -> tuple[LabelSelector | None, str | None] | None:
        queue = queues.get(name)
        return None if queue is None else (queue.namespace_selector, queue.parent)

    def barred(job: JobInfo) -> Invalid | None:
        found = selector.barring_queue(
            job.queue, selector.namespace_labels(job.namespace, labels.get(job.namespace)), rule
        )
        if found is None:
            return None
        return Invalid(
            "NamespaceNotAllowed", selector.barred_message(job.namespace, job.queue, found)
        )

    return barred


def close_session(session: Session) -> Outcome:
    """Close ``session``: its outcome, with the statuses that changed and the events."""
    session.close()
    return job_status.publish(session)


class Scheduler:
    def __init__(
        self,
        cluster: Backend,
        conf: SchedulerConf,
        clock: Callable[[], float],
        session_ids: Callable[[], str],
        shortcuts: Shortcuts = ALL,
        committed_binds: Callable[[list[Bind]], None] | None = None,
    ) -> None:
        """``committed_binds``: told each statement's binds as it commits, before its
        session ends (``Session.committed_binds``); ``apply`` still gets them all."""
        self.cluster = cluster
        self.conf = conf
        self.clock = clock
        self.session_ids = session_ids
        self.shortcuts = shortcuts  # which its sessions take
        self.resting = RestingGangs(shortcuts.rest_quiet_gangs)  # resting at the last close
        # What its sessions' plugins keep from one to the next (the queue sums, the node
        # index): this scheduler's own, never another's.
        self.kept = KeptAcrossSessions()
        self.committed_binds = committed_binds

    def run_once(self) -> Session:
        """One session, closed and its outcome applied; its ``stats`` say what it did (for
        metrics). A session that fails after committing still has what it committed
        (binds, evictions, nominations) applied, without statuses or events: the
        cluster must not be left unaware of what was already committed."""
        started = time.perf_counter()
        with collector_paused():
            snapshot = self.cluster.snapshot()
            session = open_session(
                snapshot,
                self.conf,
                self.clock(),
                self.session_ids(),
                self.resting,
                self.shortcuts,
                self.kept,
            )
            session.committed_binds = self.committed_binds
            try:
                for name in self.conf.actions:
                    action_started = time.perf_counter()
                    ACTIONS[name].execute(session)
                    session.stats.action_seconds[name] = time.perf_counter() - action_started
                outcome = close_session(session)  # (wakes the resting jobs it touched)
                self.resting.closed(snapshot, self.conf)
            except BaseException:
                committed = session.outcome
                self.cluster.apply(
                    Outcome(committed.binds, committed.evictions, committed.nominations)
                )
                raise
            self.cluster.apply(outcome)
        session.stats.e2e_seconds = time.perf_counter() - started
        return session
