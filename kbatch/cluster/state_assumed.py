"""What the scheduler tells the cluster state of the binds and evictions it sent: a
pod is *assumed* bound (or Releasing) from the request until the watch shows it, the
request fails, or a request without an answer ends its back-off
(``kbatch.cluster.assumed`` holds the times).
``ClusterState`` holds the objects; these are its calls about assumptions, each under
its lock and told to its observer (the flight recorder)."""

from kbatch.cluster.observer import StateObserver
from kbatch.cluster.state_reads import StateReads


class StateAssumptions(StateReads):
    """The assumption calls of a ``ClusterState`` (which sets every attribute declared
    here and in ``StateReads``)."""

    observer: StateObserver | None
    generation: int

    def assume_bound(self, namespace: str, name: str, node: str) -> None:
        """A bind to ``node`` was sent: snapshots see the pod there until the watch does."""
        self._assume(namespace, name, node)

    def assume_releasing(self, namespace: str, name: str) -> None:
        """An eviction was sent: snapshots see the pod Releasing until the watch shows its
        deletionTimestamp (no later session picks it as a victim again)."""
        self._assume(namespace, name, None)

    def _assume(self, namespace: str, name: str, node: str | None) -> None:
        key = self._key("Pod", namespace, name)
        with self._lock:
            record = self._parsed["Pod"].get(key)
            if record is not None:
                self._assumed.assume(key, record.uid, node)
                if self.observer is not None:
                    self.observer.assumed("as" if node is not None else "ar", key, node)

    def confirmed(self, namespace: str, name: str) -> None:
        """The bind or eviction succeeded: it is assumed until the watch shows it (or
        ``assumed_ttl`` more at most, where the state has one)."""
        with self._lock:
            self._assumed.confirmed(key := self._key("Pod", namespace, name))
            if self.observer is not None:
                self.observer.assumed("c", key)

    def keep_assumed(self, namespace: str, name: str, seconds: float) -> None:
        """The bind or eviction got no answer: snapshots keep assuming it ``seconds`` more
        (its back-off, so no session sends it again meanwhile), then see the pod as the
        watch does, and a session decides about it anew."""
        with self._lock:
            self._assumed.keep(key := self._key("Pod", namespace, name), seconds)
            if self.observer is not None:
                self.observer.assumed("k", key, seconds)

    def forget(self, namespace: str, name: str) -> None:
        """A bind or an eviction failed: the pod is as the watch last showed it."""
        with self._lock:
            self._assumed.forget(key := self._key("Pod", namespace, name))
            if self.observer is not None:
                self.observer.assumed("f", key)

    def _expire_assumptions(self) -> None:
        if self._assumed.expire():  # their pods are pending again: news for the backlog
            self.generation += 1
