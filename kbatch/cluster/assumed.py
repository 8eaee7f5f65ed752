"""Assumed pods: binds and evictions the scheduler has sent but the watch has not shown
yet, as kube-scheduler's cache assumes a pod bound before the API server confirms it.

Snapshots see an assumed pod on its node (or Releasing) until an update shows it (a
nodeName, a deletionTimestamp), the pod is gone or finished, or the request failed
(``forget``). A request that got no answer is assumed for its back-off only (``keep``).
One that succeeded (``confirmed``) is assumed until the watch shows it, however late:
kube-scheduler stopped expiring its assumed pods for the same reason
(kubernetes#106361), since a watch that lags a busy API server by more than a fixed
time made the pod look pending again and bound a second time. An update that shows
neither (a relist, a status write) keeps the assumption. The cluster state owns one
``AssumedPods`` and calls it under its lock.
"""

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from kbatch.cluster.records import PodRecord

# How long a confirmed assumption lasts when the watch does not show it: None, until it
# does. A recording made when it was a number (30 s) replays with that number.
ASSUMED_TTL: float | None = None


@dataclass
class Assumption:
    """What the scheduler sent for a pod the watch has not shown yet: a bind to ``node``,
    or (``node`` None) an eviction. ``expires`` is set once the request has succeeded."""

    uid: str
    node: str | None
    expires: float = float("inf")


class AssumedPods:
    """The assumptions by pod key (namespace/name), with the clock they expire by.
    ``ttl``: how long a confirmed assumption lasts (None: until the watch shows it)."""

    def __init__(self, clock: Callable[[], float], ttl: float | None = ASSUMED_TTL) -> None:
        self._clock = clock
        self.ttl = ttl
        self._by_key: dict[str, Assumption] = {}

    def __bool__(self) -> bool:
        return bool(self._by_key)

    def __contains__(self, key: str) -> bool:
        return key in self._by_key

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_key)

    def assume(self, key: str, uid: str, node: str | None) -> None:
        """A bind to ``node`` (None: an eviction) of the pod ``uid`` at ``key`` was sent."""
        self._by_key[key] = Assumption(uid, node)

    def confirmed(self, key: str) -> None:
        """The request succeeded: the assumption lasts until the watch shows it (or
        ``ttl`` more at most, where one is set), ending any back-off it was kept for."""
        self.keep(key, float("inf") if self.ttl is None else self.ttl)

    def keep(self, key: str, seconds: float) -> None:
        """Keep assuming for ``seconds`` more from now."""
        assumed = self._by_key.get(key)
        if assumed is not None:
            assumed.expires = self._clock() + seconds

    def forget(self, key: str) -> None:
        """The request failed, or the pod is gone: the pod is as the watch shows it."""
        self._by_key.pop(key, None)

    def check(self, key: str, pod: PodRecord) -> None:
        """Drop the assumption about ``pod`` (an update just applied) once the update shows
        it came true or no longer matters (another pod of that name, a finished pod)."""
        assumed = self._by_key.get(key)
        if assumed is None:
            return
        shown = pod.deleting if assumed.node is None else bool(pod.node_name or pod.deleting)
        if shown or assumed.uid != pod.uid or pod.phase in ("Succeeded", "Failed"):
            del self._by_key[key]

    def expire(self) -> bool:
        """Drop the assumptions whose time is up; were there any?"""
        now = self._clock()
        expired = [k for k, a in self._by_key.items() if a.expires <= now]
        for key in expired:
            del self._by_key[key]
        return bool(expired)

    def applied_to(self, pod: PodRecord) -> PodRecord:
        """``pod`` as a snapshot sees it: on the node it is assumed bound to, or
        Releasing when assumed evicted (the record itself when nothing is assumed)."""
        assumed = self._by_key.get(f"{pod.namespace}/{pod.name}")
        if assumed is None or assumed.uid != pod.uid:
            return pod
        if assumed.node is None:
            return dataclasses.replace(pod, deleting=True)  # the snapshot's Releasing
        if pod.node_name:
            return pod
        return dataclasses.replace(pod, node_name=assumed.node)
