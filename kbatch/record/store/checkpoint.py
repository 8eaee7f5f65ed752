"""What a new segment starts from: the state as the records written so far build it.

The recorder's writer tells a ``Checkpoint`` each record it writes; the checkpoint keeps,
for each kind, the objects held (in the order the state holds them), the conf, and the
binds and evictions still assumed: sent, and not yet shown by the watch, failed, or
expired (as ``kbatch.cluster.assumed`` decides it, read off the same records). A
segment's first records are ``records()``: a replay that starts there builds the state
the replay from the start has at that point, assumptions included, so that its first
session does not bind again a pod whose bind was in flight.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

FINISHED = ("Succeeded", "Failed")


@dataclass
class _Assumed:
    """A bind to ``node`` (None: an eviction) of the pod ``uid``; ``confirmed`` once the
    request succeeded, ``until`` the time it is kept to after a request with no answer
    (None: until the watch shows it)."""

    uid: str
    node: str | None
    confirmed: bool = False
    until: float | None = None


class Checkpoint:
    """The state the records written so far build, as records to start a segment with."""

    def __init__(self) -> None:
        self.held: dict[str, dict[str, Any]] = {}  # kind -> key -> object, as the state
        self.conf: dict[str, Any] | None = None
        self.last_t: float | None = None  # the time of the last record written
        self._assumed: dict[str, _Assumed] = {}  # pod key -> what is assumed of it

    def applied(self, kind: str, key: str, obj: dict[str, Any]) -> None:
        self.held.setdefault(kind, {})[key] = obj
        if kind == "Pod" and key in self._assumed:
            self._check(key, obj)

    def dropped(self, kind: str, key: str) -> None:
        self.held.get(kind, {}).pop(key, None)
        if kind == "Pod":
            self._assumed.pop(key, None)

    def assumed(self, op: str, t: float, key: str, value: str | float | None) -> None:
        """A record of an assumption (``Recorder.assumed``'s ``op``, at ``t``)."""
        if op in ("as", "ar"):
            pod = self.held.get("Pod", {}).get(key)
            if pod is not None:  # (the state assumes nothing of a pod it does not hold)
                node = str(value) if op == "as" else None
                self._assumed[key] = _Assumed(_uid(pod, key), node)
            return
        assumed = self._assumed.get(key)
        if op == "f" or assumed is None:
            self._assumed.pop(key, None)
        elif op == "c":
            assumed.confirmed, assumed.until = True, None
        elif op == "k":
            assumed.until = t + float(value or 0.0)

    def _check(self, key: str, pod: dict[str, Any]) -> None:
        """Drop the assumption the update ``pod`` shows came true or no longer matters
        (``AssumedPods.check``)."""
        assumed = self._assumed[key]
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        deleting = bool(meta.get("deletionTimestamp"))
        shown = deleting if assumed.node is None else bool(spec.get("nodeName") or deleting)
        phase = (pod.get("status") or {}).get("phase")
        if shown or assumed.uid != _uid(pod, key) or phase in FINISHED:
            del self._assumed[key]

    def records(self, t: float) -> Iterator[dict[str, Any]]:
        """The checkpoint at ``t``: the conf, every object held, then each assumption
        (sent, then confirmed, or kept for what is left of its back-off)."""
        if self.conf is not None:
            yield {"op": "conf", "t": t, "conf": self.conf}
        for held in self.held.values():
            for obj in held.values():
                yield {"op": "a", "t": t, "o": obj}
        for key, assumed in self._assumed.items():
            if assumed.until is not None and assumed.until <= t:
                continue  # expired: the state forgets it at its next look
            if assumed.node is None:
                yield {"op": "ar", "t": t, "key": key}
            else:
                yield {"op": "as", "t": t, "key": key, "node": assumed.node}
            if assumed.until is not None:
                yield {"op": "k", "t": t, "key": key, "s": assumed.until - t}
            elif assumed.confirmed:
                yield {"op": "c", "t": t, "key": key}


def _uid(pod: dict[str, Any], key: str) -> str:
    """The pod's uid as its record has it (its key when it has none)."""
    return str((pod.get("metadata") or {}).get("uid") or key)
