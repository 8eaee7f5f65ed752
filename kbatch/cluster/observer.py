"""What a cluster state tells whoever watches it change (the flight recorder,
``kbatch.record``): each change, in the order the state makes them, under its lock."""

from typing import Any, Protocol


class StateObserver(Protocol):
    def applied(self, kind: str, key: str, obj: dict[str, Any]) -> None:
        """``obj`` is held at ``key`` now (the state's own, never changed in place). Not
        told of a write that changes nothing kbatch reads (a Node's heartbeat, a Job's
        counts: ``kbatch.cluster.kept_fields.reads_the_same``)."""

    def refused(self, obj: dict[str, Any]) -> None:
        """``obj`` was refused (a copy)."""

    def dropped_object(self, kind: str, key: str) -> None: ...

    def assumed(self, op: str, key: str, value: str | float | None = None) -> None:
        """The pod at ``key``: ``as`` assumed bound to ``value``, ``ar`` assumed
        releasing, ``c`` confirmed, ``f`` forgotten, ``k`` kept ``value`` seconds more."""

    def snapshotted(self) -> None: ...
