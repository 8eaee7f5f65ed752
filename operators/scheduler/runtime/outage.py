"""Riding out an API server that does not answer, without a storm of requests or of log
lines: a bind or an eviction that got no answer is not sent again before a bounded
exponential back-off per pod (``Backoff``, ``Holds``), and what keeps failing is told
once per interval, with how often, not once per request (``FailureReport``).
"""

import logging
import threading
import time
from collections.abc import Callable

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState

REPORT_EVERY = 10.0  # seconds between two reports of the same failure
FIRST_BACKOFF = 1.0
MOST_BACKOFF = 30.0
PodKey = tuple[str, str, str]  # a pod's namespace, name and uid


class Backoff:
    """By key, how long to wait after a failure: ``first`` seconds after the first one in a
    row, doubling with each further one up to ``most``; a success starts again."""

    def __init__(self, first: float = FIRST_BACKOFF, most: float = MOST_BACKOFF) -> None:
        self.first = first
        self.most = most
        self._failures: dict[PodKey, int] = {}
        self._lock = threading.Lock()

    def failed(self, key: PodKey) -> float:
        """One more failure for ``key``: how long to wait before trying again."""
        with self._lock:
            failures = self._failures.get(key, 0)
            self._failures[key] = failures + 1
        return min(self.first * 2.0 ** min(failures, 32), self.most)

    def succeeded(self, key: PodKey) -> None:
        with self._lock:
            self._failures.pop(key, None)

    def failing(self) -> list[PodKey]:
        with self._lock:
            return list(self._failures)


class FailureReport:
    """Failures of one kind (``what``), told at most once per ``every`` seconds: the first
    at once, then, once the interval is over, the next with how many came meanwhile; and
    once, at info level, when that kind succeeds again."""

    def __init__(
        self,
        log: logging.Logger,
        every: float = REPORT_EVERY,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.every = every
        self.clock = clock
        self._lock = threading.Lock()
        self._told_at: dict[str, float] = {}  # by what: when its failure was last told
        self._untold: dict[str, int] = {}  # by what: failures since, not told
        self._since: dict[str, float] = {}  # by what: when it began to fail

    def failed(self, what: str, message: str, *args: object) -> None:
        """A failure of ``what``; ``message % args`` says what failed and what waits."""
        now = self.clock()
        with self._lock:
            self._since.setdefault(what, now)
            told = self._told_at.get(what)
            if told is not None and now - told < self.every:
                self._untold[what] = self._untold.get(what, 0) + 1
                return
            untold = self._untold.pop(what, 0)
            self._told_at[what] = now
        more = f" ({untold} more since the last report)" if untold else ""
        self.log.warning(message + more, *args)

    def succeeded(self, what: str, message: str, *args: object) -> None:
        """``what`` works again: say so once, if its failures were told."""
        with self._lock:
            since = self._since.pop(what, None)
            if since is None:
                return
            self._told_at.pop(what, None)
            untold = self._untold.pop(what, 0)
            elapsed = self.clock() - since
        self.log.info(message + " (after %.0fs of failures, %d not told)", *args, elapsed, untold)


class Holds:
    """Pods whose bind or eviction got no answer (the API server is unreachable): each
    stays assumed so in the state for its back-off (so no session sends it again
    meanwhile), or until the server answers a request sent after the failure (it is
    back); then the pod is as the watch shows it and a session decides about it anew."""

    def __init__(
        self, state: ClusterState, failures: FailureReport, exchanges: kubeapi.Exchanges
    ) -> None:
        self.state = state
        self.failures = failures
        self.exchanges = exchanges  # the requests sent to the server, and those answered
        self.backoff = Backoff()
        # by pod: what got no answer, and how many requests had been sent by then
        self._held: dict[PodKey, tuple[str, int]] = {}
        self._lock = threading.Lock()

    def no_answer(self, what: str, pod: PodKey, exc: Exception, sending: int = 1) -> None:
        """The ``what`` (bind, eviction) of ``pod`` got no answer: hold the pod. Said once
        per interval, with how many wait: those held, and the ``sending`` (this one among
        them) sent or queued but not answered yet."""
        namespace, name, _ = pod
        self.state.keep_assumed(namespace, name, self.backoff.failed(pod))
        with self._lock:
            self._held.pop(pod, None)
            held = sum(1 for kind, _ in self._held.values() if kind == what)
            self._held[pod] = (what, self.exchanges.sent)
        self.failures.failed(
            what, "%s: %d %ss waiting, retrying with back-off", exc, held + sending, what
        )

    def answered(self, what: str, key: PodKey) -> None:
        """The server answered this pod's ``what``: its back-off starts again."""
        self.backoff.succeeded(key)
        self.failures.succeeded(what, "the API server answers %ss again", what)

    def resend(self, namespace: str, name: str, uid: str) -> None:
        """A session sends this pod's bind or eviction again: its hold is over."""
        with self._lock:
            self._held.pop((namespace, name, uid), None)

    def end(self) -> None:
        """Before a session: the held pods are as the watch shows them once the server has
        answered a later request; the back-off of a pod gone or bound is forgotten."""
        with self._lock:
            answered = [
                key for key, (_, sent) in self._held.items() if self.exchanges.answered_since(sent)
            ]
            for key in answered:
                del self._held[key]
        for namespace, name, _ in answered:
            self.state.forget(namespace, name)
        for key in self.backoff.failing():
            namespace, name, uid = key
            pod = self.state.pod_record(namespace, name)
            if pod is None or pod.uid != uid or pod.node_name:
                self.backoff.succeeded(key)
