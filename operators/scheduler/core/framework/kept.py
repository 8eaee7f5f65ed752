"""What a scheduler keeps from one of its sessions to the next for its plugins (the
queue sums proportion adds up at open, the node index): one ``KeptAcrossSessions``
per ``Scheduler``, handed to each of its sessions (``Session.kept``). Two schedulers
in one process keep apart; a session opened on its own (a one-off look, a test) gets
a new one and keeps nothing beyond itself."""

from typing import TypeVar

T = TypeVar("T")


class KeptAcrossSessions:
    """One kept object per kind (its class): what the last session left of it."""

    __slots__ = ("_by_kind",)

    def __init__(self) -> None:
        self._by_kind: dict[type, object] = {}

    def get(self, kind: type[T]) -> T | None:
        """The ``kind`` kept, if any."""
        value = self._by_kind.get(kind)
        return value if isinstance(value, kind) else None

    def put(self, value: object) -> None:
        """Keep ``value`` as the one of its kind (replacing the last)."""
        self._by_kind[type(value)] = value

    def drop(self, kind: type) -> None:
        """Keep none of ``kind``."""
        self._by_kind.pop(kind, None)
