"""What changed since the last snapshot: the one answer every cache that reuses work
across sessions asks.

kube-scheduler's cache hands each scheduling cycle a snapshot and brings it up to date
by generation: a node whose generation has not moved since the last snapshot is not
copied again. kbatch's cluster state does the same for jobs. A snapshot keeps the last
snapshot's ``JobInfo`` objects for the jobs that nothing changed since (no write to
their PodGroup or pods, no session touched them), and its ``Delta`` says which:

- ``generation``: the snapshot's maker and its number in the maker's line of
  snapshots. A cache that kept something from the snapshot of generation ``g`` may
  take this delta as what changed since then only if ``delta.follows(g)``.
- ``unchanged_jobs`` / ``unchanged(uid)``: the jobs that are the last snapshot's very
  objects, exactly as they were (with tasks: nothing of theirs written and no session
  touched them; without tasks: their PodGroup the same object and no pod of theirs
  came).
- ``changed_jobs(of)`` and ``gone_jobs(...)``: the others, that changed, appeared or
  went, found among ``changed`` (the uids the maker knows changed, appeared or went)
  when the maker knows them without a pass over every job.
- ``changed_by_sessions``: the uids of this snapshot's jobs that sessions touched or
  moved the phase of since it was made (``JobInfo.change_log``), when the maker keeps
  that log; it grows until the maker's next snapshot.
- ``nodes_unchanged``: no Node changed, appeared or went (the same Node records; False
  also when the maker does not know).
- ``changed_queues``: the names of the Queues written, added or gone.

A snapshot has no delta (``Snapshot.delta`` is None) when there is no snapshot before
it to compare with: the first one of its maker, or a maker of its own. A cache then
starts again from the whole snapshot.
"""

from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from kbatch.operators.scheduler.core.framework.info import JobInfo

__all__ = ["Delta", "Generation", "generation_of", "gone_jobs"]

# A snapshot's generation: its maker (compared by identity) and its number in the
# maker's line of snapshots.
Generation = tuple[object, int]


@dataclass(frozen=True, slots=True)
class Delta:
    """What changed between the snapshot of ``generation`` and the one before it in
    its maker's line (see the module)."""

    generation: Generation
    # The jobs (by uid) that are the last snapshot's objects, unchanged since.
    unchanged_jobs: Mapping[str, JobInfo] = field(default_factory=dict)
    # The uids of the last snapshot's jobs and this one's that are not unchanged, when
    # the maker knows them without a pass over every job (None: it does not).
    changed: frozenset[str] | None = None
    # The uids of this snapshot's jobs sessions changed since it was made (None: the
    # maker keeps no such log).
    changed_by_sessions: list[str] | None = None
    # No Node written, added or dropped since (False: some may have been).
    nodes_unchanged: bool = False
    # The names of the Queues written, added or dropped since (None: not known).
    changed_queues: frozenset[str] | None = None

    def follows(self, earlier: Generation | None) -> bool:
        """Is this the change since the snapshot of generation ``earlier`` (the one just
        before it in the same maker's line)?"""
        return (
            earlier is not None
            and earlier[0] is self.generation[0]
            and earlier[1] == self.generation[1] - 1
        )

    def unchanged(self, uid: str) -> bool:
        """Is job ``uid`` the last snapshot's object, unchanged since?"""
        return uid in self.unchanged_jobs

    def changed_jobs(self, of: Mapping[str, JobInfo]) -> AbstractSet[str]:
        """The uids of ``of`` (this snapshot's jobs, or the last one's) that are not
        unchanged: changed or new (or, of the last one's, gone)."""
        if self.changed is None:
            return of.keys() - self.unchanged_jobs.keys()
        return {uid for uid in self.changed if uid in of}

    def gone_jobs(
        self, last: Mapping[str, object], now: Mapping[str, object], changed: Iterable[str]
    ) -> Iterable[str]:
        """The keys of ``last`` (what a cache kept of the last snapshot's jobs) that
        ``now`` (this snapshot's) has not (``gone_jobs``, among ``self.changed``)."""
        return gone_jobs(last, now, changed, self.changed)


def gone_jobs(
    last: Mapping[str, object],
    now: Mapping[str, object],
    changed: Iterable[str],
    among: frozenset[str] | None = None,
) -> Iterable[str]:
    """The keys of ``last`` that ``now`` has not. Among ``among`` (a delta's
    ``changed``), when given: a set difference of every key costs more than the rest.
    Else none when as many are still there (``changed``: the keys of ``now`` not the
    same as in ``last``), else that difference."""
    if among is not None:
        return [uid for uid in among if uid in last and uid not in now]
    still_there = len(now) - sum(1 for uid in changed if uid not in last)
    return last.keys() - now.keys() if still_there < len(last) else ()


def generation_of(delta: Delta | None) -> Generation | None:
    """The generation a cache notes after using a snapshot with ``delta`` (None: the
    snapshot had no delta, so the next one's cannot be taken as what changed since)."""
    return None if delta is None else delta.generation
