"""Victims functions combined across tiers: which of the candidates a preemptor (or a
reclaiming queue's task) may evict, what a victims function reads of the preemptor,
and the per-task test every victim passes (``tiers.TieredFunctions`` asks these)."""

from collections.abc import Sequence

from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.signatures import (
    PreemptorKeyFn,
    TaskFilterFn,
    VictimsFn,
)


def no_preemptor(_: TaskInfo) -> tuple[()]:
    """The PreemptorKeyFn of a victims function that does not look at who asks."""
    return ()


def victims(
    tiers: Sequence[list[VictimsFn]], preemptor: TaskInfo, candidates: list[TaskInfo]
) -> list[TaskInfo]:
    """The first tier that has the function decides: each of its plugins chooses among
    what the ones before it in the tier chose, so the victims satisfy every plugin.

    (kube-batch intersected lists each plugin chose from all the candidates: when two
    plugins each pick a different subset of equally good candidates — gang the job's
    spare tasks by task order, proportion the queue's by node order — nothing is
    left, although any one would do.) A later tier is asked only when no earlier tier
    has the function at all (kube-batch fell through, on purpose we don't).
    """
    for fns in tiers:
        if not fns:
            continue
        chosen = candidates
        for fn in fns:
            kept = {id(t) for t in fn(preemptor, chosen)}
            chosen = [t for t in chosen if id(t) in kept]
        return chosen
    return []


def victims_filter(
    tiers: Sequence[list[VictimsFn]], filters: dict[int, TaskFilterFn]
) -> TaskFilterFn | None:
    """What the deciding tier's per-task functions all keep (``filters``: by the id of
    the victims function it is the per-task form of): as each of its functions chooses
    among what the ones before it chose, whatever the tier offers passes every one of
    these tests, in whatever place of the tier the function is."""
    deciding = next((fns for fns in tiers if fns), None)
    if deciding is None:
        return _offers_nothing
    tests = [filters[id(fn)] for fn in deciding if id(fn) in filters]
    if not tests:
        return None
    if len(tests) == 1:
        return tests[0]
    if len(tests) == 2:  # priority's and conformance's: asked of every candidate
        first, second = tests
        return lambda preemptor, task: bool(first(preemptor, task) and second(preemptor, task))
    return lambda preemptor, task: all(test(preemptor, task) for test in tests)


def preemptor_keys(
    tiers: Sequence[list[VictimsFn]], keys: dict[int, PreemptorKeyFn | None]
) -> list[PreemptorKeyFn] | None:
    """What the deciding tier's functions read of a preemptor (``keys``: by the id of
    the victims function), in tier order; None when one of them did not say."""
    deciding = next((fns for fns in tiers if fns), [])
    found = [keys.get(id(fn)) for fn in deciding]
    if any(key is None for key in found):
        return None
    return [key for key in found if key is not None]


def _offers_nothing(_preemptor: TaskInfo, _task: TaskInfo) -> bool:
    """No tier has the victims function: nothing is ever offered (see ``victims``)."""
    return False
