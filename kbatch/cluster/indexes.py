"""What the cluster state keeps counted and indexed as objects come and go, so that no
snapshot or lookup walks every object: the resource names the objects mention (the
snapshot's dimensions) and the PodGroups by queue and by namespace."""

from collections import Counter
from typing import Any

from kbatch.api.podgroup import PodGroup
from kbatch.cluster.snapshot_inputs import resource_names_of


class ResourceNames:
    """Every resource name some object mentions, counted by how many do."""

    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._of: dict[tuple[str, str], tuple[str, ...]] = {}  # (kind, key) -> its names

    def names(self) -> list[str]:
        """The names some object mentions now, in the order they were first counted."""
        return [name for name, count in self._counts.items() if count > 0]

    def count(self, kind: str, key: str, parsed: Any) -> None:
        """Count the resource names of ``parsed`` (None: the object is gone) in place of
        those of the object's last version."""
        names = () if parsed is None else resource_names_of(parsed)
        old = self._of.get((kind, key), ())
        if names == old:
            return  # (most writes: a status, a bind)
        # Counted name by name, as Counter's subtract and update would (a count may fall
        # to 0 and stays; a new name comes last), without their generic code: every pod
        # created or dropped comes here.
        counts = self._counts
        if old:
            del self._of[(kind, key)]
            for name in old:
                counts[name] -= 1
        if names:
            self._of[(kind, key)] = names
            for name in names:
                counts[name] += 1


class GroupIndex:
    """PodGroup keys (namespace/name) by queue and by namespace, for admission's
    lookups."""

    def __init__(self) -> None:
        self._by_queue: dict[str, set[str]] = {}
        self._by_namespace: dict[str, set[str]] = {}

    def add(self, key: str, group: PodGroup) -> None:
        self._by_queue.setdefault(group.spec.queue, set()).add(key)
        self._by_namespace.setdefault(key.partition("/")[0], set()).add(key)

    def remove(self, key: str, group: PodGroup | None) -> None:
        """Take out ``key``, indexed as ``group`` (None: it was not)."""
        if group is not None:
            self._by_queue.get(group.spec.queue, set()).discard(key)
            self._by_namespace.get(key.partition("/")[0], set()).discard(key)

    def in_queue(self, queue: str) -> list[str]:
        """The keys of the PodGroups naming ``queue``, sorted."""
        return sorted(self._by_queue.get(queue, ()))

    def in_namespace(self, namespace: str) -> list[str]:
        """The keys of the PodGroups in ``namespace``, sorted."""
        return sorted(self._by_namespace.get(namespace, ()))
