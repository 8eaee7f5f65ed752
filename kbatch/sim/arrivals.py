"""Objects that arrive during a run, made as they come due rather than all up front.

A simulated day submits a hundred thousand jobs; held all at once from the start, the
input alone would weigh as much as everything the day runs. A stream of manifests in
time order (each ``submit_at`` at or after the one before) is read only as far as the
clock has come: ``Arrivals`` keeps the next object, and those due at the same time as
it, which it puts in the order a full sort by ``Manifest.due`` would (kind by kind
in ``manifests.CREATE_ORDER``, then input order). So a run fed the stream creates the
same objects in the same order as one fed the whole list.
"""

from collections import deque
from collections.abc import Iterable, Iterator

from kbatch.sim.manifests import Manifest, ManifestError


class Arrivals:
    def __init__(self, items: Iterable[Manifest] = ()) -> None:
        self._items: Iterator[Manifest] = iter(items)
        self._due: deque[Manifest] = deque()  # those due at the next time, sorted
        self._after: Manifest | None = next(self._items, None)  # the first of the next time

    def peek(self) -> Manifest | None:
        """The next object to create (None: no more)."""
        if not self._due:
            self._read_next_time()
        return self._due[0] if self._due else None

    def pop(self) -> Manifest:
        """Take the next object (``peek`` is not None)."""
        if not self._due:
            self._read_next_time()
        return self._due.popleft()

    def _read_next_time(self) -> None:
        first = self._after
        if first is None:
            return
        batch, self._after = [first], None
        for item in self._items:
            if item.submit_at != first.submit_at:
                if item.submit_at < first.submit_at:
                    raise ManifestError(
                        f"{item.source}: {item.ref}: due at {item.submit_at} s, before "
                        f"{first.ref} at {first.submit_at} s: arrivals must come in time order"
                    )
                self._after = item
                break
            batch.append(item)
        batch.sort(key=_due)
        self._due.extend(batch)


def _due(item: Manifest) -> tuple[float, int, int]:
    return item.due
