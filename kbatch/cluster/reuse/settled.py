"""Which pods and PodGroups a snapshot shows, finished work left out: a finished unit is
kept out of every snapshot from the second after it finished, and shown again
(dropped from the settled) as soon as it, or the set of Queues, is written.

A long simulation keeps every pod it ever ran (the output lists them), so a snapshot
built from all of them grows with the run's history, and so does every session over
it, although a job that is over changes nothing: its pods hold no room and ask for
none, a PodGroup that is Completed counts in no queue's status, and its own status
stays what the last session wrote. ``Shown`` leaves such jobs out.

The unit is a job as the snapshot makes them: the pods naming a PodGroup (and the
group, if it exists), or one pod without a group. A unit is *done* when none of its
pods is unfinished (Succeeded or Failed) and its PodGroup, if any, is Completed. A
done unit is shown to one more snapshot; if nothing about it changed by the next
one (its group and pods unwritten — so the session that saw it wrote nothing for
it), it is *settled* and left out from then on. Any write to it shows it again, as
does a Queue appearing, going or being refused (a group's verdict names its queue).

Order matters (sessions walk jobs and tasks in snapshot order, and the run must not
depend on what was left out), so the shown keys keep the order of the state's own
dicts: the order keys were first applied in (``OrderedSubset``).
"""

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from kbatch.api.podgroup import PodGroup, PodGroupPhase
from kbatch.api.queue import Queue
from kbatch.api.selector import LabelSelector
from kbatch.cluster.records import PodRecord

FINISHED_PHASES = ("Succeeded", "Failed")


V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class OrderChanges:
    """How a subset's order changed since the last ``take_order_changes``: keys put back
    between others (``moved``), and the keys added at its end, in order (some may have
    left since)."""

    moved: bool
    appended: list[str]


@dataclass(slots=True)
class OrderedSubset(Generic[V]):
    """Some of a dict's keys, iterated in the dict's order (the order they were first
    added in, a key dropped and added again coming last), each with the value it was
    last added with, if any (the PodGroups' records: a snapshot takes its shown groups
    as one copy of ``members``, not a look-up of each in the state's dict of every group
    ever applied)."""

    _rank: dict[str, int] = field(default_factory=dict)
    _members: dict[str, V | None] = field(default_factory=dict)
    _values: dict[str, V] = field(default_factory=dict)
    _next: int = 0
    _sorted: bool = True
    _moved: bool = False  # (since the last ``take_order_changes``)
    _appended: dict[str, None] = field(default_factory=dict)  # (an ordered set: idem)

    def added(self, key: str, value: V | None = None) -> None:
        """``key`` was applied (with ``value``); new keys rank last. It is a member from
        now on."""
        if value is not None:
            self._values[key] = value
        if key not in self._rank:
            self._rank[key] = self._next
            self._next += 1
            self._members[key] = value
            self._appended[key] = None
        elif key in self._members:
            self._members[key] = value
        else:
            self.show(key)

    def dropped(self, key: str) -> None:
        self._rank.pop(key, None)
        self._members.pop(key, None)
        self._values.pop(key, None)
        self._appended.pop(key, None)

    def hide(self, key: str) -> None:
        self._members.pop(key, None)

    def show(self, key: str) -> None:
        if key in self._rank and key not in self._members:
            self._members[key] = self._values.get(key)
            self._sorted = False
            self._moved = True

    def take_order_changes(self) -> OrderChanges:
        """How the members' order changed since the last call (or since the start)."""
        changes = OrderChanges(self._moved, list(self._appended))
        self._moved, self._appended = False, {}
        return changes

    def keys(self) -> list[str]:
        return list(self.members())

    def members(self) -> dict[str, V | None]:
        """The members in order, each with its value (the subset's own dict: not to be
        changed)."""
        if not self._sorted:
            ordered = sorted(self._members, key=self._rank.__getitem__)
            self._members = {key: self._members[key] for key in ordered}
            self._sorted = True
        return self._members

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def __len__(self) -> int:
        return len(self._members)


class Shown:
    """The state's pods and PodGroups less the settled units; updated at every change."""

    def __init__(self) -> None:
        self.pods: OrderedSubset[PodRecord] = OrderedSubset()  # (keys only)
        self.groups: OrderedSubset[PodGroup] = OrderedSubset()
        self._pod_units: dict[str, tuple[str, bool]] = {}  # pod key -> (unit, unfinished)
        self._pods_of_unit: dict[str, set[str]] = {}
        self._unfinished: Counter[str] = Counter()
        self._completed: set[str] = set()  # PodGroups (keys) whose status says Completed
        self._groups: set[str] = set()  # PodGroups that exist
        self._dirty: set[str] = set()  # units written since the last snapshot
        self._done_shown: set[str] = set()  # done units the last snapshot showed
        self._settled: set[str] = set()
        self._newly_settled: list[str] = []  # (since the last ``take_settled``)

    # ------------------------------------------------------------------ changes
    def pod_applied(self, key: str, pod: PodRecord) -> None:
        self._forget_pod(key)
        unit, unfinished = pod.unit, pod.phase not in FINISHED_PHASES
        self._pod_units[key] = (unit, unfinished)
        self._pods_of_unit.setdefault(unit, set()).add(key)
        self._unfinished[unit] += unfinished
        self.pods.added(key)
        self._dirty.add(unit)

    def pod_dropped(self, key: str) -> None:
        self._forget_pod(key)
        self.pods.dropped(key)

    def _forget_pod(self, key: str) -> None:
        """Take the pod's last version out of its unit (which is then written)."""
        known = self._pod_units.pop(key, None)
        if known is None:
            return
        unit, unfinished = known
        self._pods_of_unit[unit].discard(key)
        self._unfinished[unit] -= unfinished
        self._dirty.add(unit)

    def group_applied(self, key: str, group: PodGroup) -> None:
        self._groups.add(key)
        if group.status.phase is PodGroupPhase.COMPLETED:
            self._completed.add(key)
        else:
            self._completed.discard(key)
        self.groups.added(key, group)
        self._dirty.add(key)

    def group_dropped(self, key: str) -> None:
        self._groups.discard(key)
        self._completed.discard(key)
        self.groups.dropped(key)
        self._dirty.add(key)

    def object_written(
        self, kind: str, key: str, parsed: Any, held: Mapping[str, Mapping[str, Any]]
    ) -> None:
        """Take in a write of the object of ``kind`` at ``key`` (``parsed`` None: it is
        gone); ``held``: the state's records by kind, as they were before it."""
        if kind == "Pod":
            if parsed is None:
                self.pod_dropped(key)
            else:
                self.pod_applied(key, parsed)
        elif kind == "PodGroup":
            if parsed is None:
                self.group_dropped(key)
            else:
                self.group_applied(key, parsed)
        elif kind == "Queue":
            old = held["Queue"].get(key)
            if parsed is None or old is None or _reach(old) != _reach(parsed):
                self.verdicts_changed()  # a Queue came, went, or moved in the tree
        elif (
            kind == "Namespace"
            and held["Namespace"].get(key) != parsed
            and any(_reach(q)[1] is not None for q in held["Queue"].values())
        ):
            self.verdicts_changed()  # a namespaceSelector may read it otherwise

    def verdicts_changed(self) -> None:
        """Something every group's verdict reads changed (a Queue came, went or was
        refused): every settled unit is shown again, and none settles before a session
        has seen it since."""
        self._dirty |= self._settled | self._done_shown

    def not_seen(self) -> None:
        """The last ``settle``'s snapshot was not made: the done units it was to show
        for the last time are still to be shown to one."""
        self._dirty |= self._done_shown

    # ------------------------------------------------------------------ a snapshot
    def settle(self) -> Mapping[str, PodGroup]:
        """The PodGroups the next snapshot shows, by key, in order (its pods are ``pods``):
        done units the last one showed and nothing wrote since are left out from now on.
        The subset's own dict, not a copy (2,800 groups at a busy hour: 150 µs a
        snapshot), to be read before anything is applied again."""
        dirty, self._dirty = self._dirty, set()
        for unit in self._done_shown - dirty:
            self._settled.add(unit)
            self._newly_settled.append(unit)
            self._show(unit, False)
        for unit in dirty & self._settled:
            self._settled.discard(unit)
            self._show(unit, True)
        self._done_shown = {unit for unit in dirty if self._done(unit)}
        for unit in dirty:
            self._forget_if_empty(unit)
        # (every group member was added with its record)
        return cast(Mapping[str, PodGroup], self.groups.members())

    def take_settled(self) -> list[tuple[str, list[str], bool]]:
        """The units settled since the last call that are still settled: each as (unit,
        its pods' keys, whether it has a PodGroup), in the order they settled. A simulator
        may then let them go (delete them), as nothing it shows depends on them."""
        units, self._newly_settled = self._newly_settled, []
        return [
            (unit, sorted(self._pods_of_unit.get(unit, ())), unit in self._groups)
            for unit in units
            if unit in self._settled
        ]

    def _done(self, unit: str) -> bool:
        if self._unfinished[unit]:
            return False
        return unit not in self._groups or unit in self._completed

    def _show(self, unit: str, shown: bool) -> None:
        for key in self._pods_of_unit.get(unit, ()):
            _shown_or_hidden(self.pods, key, shown)
        if unit in self._groups:
            _shown_or_hidden(self.groups, unit, shown)

    def _forget_if_empty(self, unit: str) -> None:
        """A unit with no pods and no group left: nothing to remember of it."""
        if not self._pods_of_unit.get(unit) and unit not in self._groups:
            self._pods_of_unit.pop(unit, None)
            self._unfinished.pop(unit, None)
            self._settled.discard(unit)
            self._done_shown.discard(unit)


def _reach(queue: Queue) -> tuple[str | None, LabelSelector | None]:
    """What of a Queue its groups' verdicts read beyond its coming and going: its place
    in the tree and which namespaces may use it."""
    return queue.spec.parent, queue.spec.namespace_selector


def _shown_or_hidden(subset: OrderedSubset[V], key: str, shown: bool) -> None:
    if shown:
        subset.show(key)
    else:
        subset.hide(key)
