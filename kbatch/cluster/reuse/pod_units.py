"""The state's pods by unit, and each pod's place in the order snapshots list them, kept
as pods are applied and dropped with the pod's key (a key applied again comes last).

A snapshot lists pods in the order their keys were first applied (the state's dict
order; ``kbatch.cluster.reuse.settled`` keeps that order for the pods it shows), a key dropped
and applied again coming last. ``PodUnits`` numbers keys in that order as they come,
so that the pods of a few units can be listed in snapshot order without walking every
pod (``kbatch.cluster.snapshot``: a snapshot that hands most jobs on walks the pods of
the others only), and two pods compared by place across snapshots.
"""

from collections.abc import Callable, Iterable, Mapping

from kbatch.cluster.records import PodRecord


class PodUnits:
    def __init__(self) -> None:
        self._keys_of_unit: dict[str, set[str]] = {}
        self._place: dict[str, int] = {}
        self._next = 0

    def applied(self, key: str, old: PodRecord | None, new: PodRecord | None) -> None:
        """The pod at ``key`` was ``old`` and is ``new`` now (None: none)."""
        if old is not None and (new is None or new.unit != old.unit):
            keys = self._keys_of_unit[old.unit]
            keys.discard(key)
            if not keys:
                del self._keys_of_unit[old.unit]
        if new is None:
            self._place.pop(key, None)
            return
        self._keys_of_unit.setdefault(new.unit, set()).add(key)
        if key not in self._place:
            self._place[key] = self._next
            self._next += 1

    def place(self, key: str) -> int:
        """The pod's place in snapshot order (a pod the state holds)."""
        return self._place[key]

    def keys_of(self, units: Iterable[str]) -> list[str]:
        """The keys of the pods of ``units``, in snapshot order."""
        keys_of_unit = self._keys_of_unit
        keys = [key for unit in units for key in keys_of_unit.get(unit, ())]
        keys.sort(key=self._place.__getitem__)
        return keys


class ShownPods:
    """The pods a snapshot shows, listed in snapshot order only as far as its builder
    asks: all of them, or those of some units. ``shown``: whether a held pod is shown
    (None: all are); ``keys``: the shown keys in order, when asked (None: the held pods'
    own order); ``assumed``: the record a snapshot shows for a held one (the state's
    assumptions: ``ClusterState``), None when none is assumed."""

    def __init__(
        self,
        held: Mapping[str, PodRecord],
        units: PodUnits | None,
        count: int,
        shown: Callable[[str], bool] | None = None,
        keys: Callable[[], list[str]] | None = None,
        assumed: Callable[[PodRecord], PodRecord] | None = None,
    ) -> None:
        self._held, self._units, self.count = held, units, count
        self._shown, self._keys, self._assumed = shown, keys, assumed
        self._every: list[PodRecord] | None = None

    @classmethod
    def of_list(cls, pods: list[PodRecord]) -> "ShownPods":
        """``pods``, in snapshot order, listed whole only (``lists_units`` False)."""
        listed = cls({}, None, len(pods))
        listed._every = pods
        return listed

    @property
    def lists_units(self) -> bool:
        return self._units is not None

    def every(self) -> list[PodRecord]:
        if self._every is None:
            held = self._held
            pods = list(held.values()) if self._keys is None else [held[k] for k in self._keys()]
            self._every = self._as_shown(pods)
        return self._every

    def of_units(self, units: Iterable[str]) -> list[PodRecord]:
        """The shown pods of ``units``, in snapshot order."""
        assert self._units is not None, "of_units of pods listed whole only"
        keys = self._units.keys_of(units)
        if self._shown is not None:
            keys = [key for key in keys if self._shown(key)]
        held = self._held
        return self._as_shown([held[key] for key in keys])

    def place(self, key: str) -> int | None:
        """The place of the pod at ``key`` in snapshot order; None if it is not shown."""
        if key not in self._held or (self._shown is not None and not self._shown(key)):
            return None
        assert self._units is not None, "place of pods listed whole only"
        return self._units.place(key)

    def _as_shown(self, pods: list[PodRecord]) -> list[PodRecord]:
        return pods if self._assumed is None else [self._assumed(pod) for pod in pods]
