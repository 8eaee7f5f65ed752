"""The live backend's evictor: a session's evictions, each on its own worker (not queued
behind a bind burst), the victim assumed Releasing meanwhile so that no later session
picks more victims for the same room. An eviction marks the pod with the
``DisruptionTarget`` condition first, where the server's Jobs read it (``disruption``),
then DELETEs it. Its outcome is kept (``Evictions``) until the session's ``Evict`` event
is recorded, which is sent only once the DELETE has succeeded; a failed one gets a
``FailedEviction`` warning instead."""

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.interface import ObjectRef
from kbatch.operators.scheduler.runtime import outage
from kbatch.operators.scheduler.runtime.binder import Record, still_leading
from kbatch.operators.scheduler.runtime.disruption import Disruptions

log = logging.getLogger("kbatch.kube")

# An upstream group one of whose pods is evicted is told so: (namespace, group, the
# evicted task, why).
TellDisruption = Callable[[str, str, TaskInfo, str], None]


class Evictions:
    """An eviction's outcome, until its Evict events are recorded: by pod, and by PodGroup
    in the order the session evicted its pods."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._evicted: dict[tuple[str, str, str], deque[Future[bool]]] = {}

    def add(self, keys: list[tuple[str, str, str]], outcome: "Future[bool]") -> None:
        with self._lock:
            for key in keys:
                self._evicted.setdefault(key, deque()).append(outcome)

    def of(self, ref: ObjectRef) -> "Future[bool] | None":
        """The eviction an Evict event on ``ref`` tells about (the oldest not yet told)."""
        key = (ref.kind, ref.namespace, ref.name)
        with self._lock:
            pending = self._evicted.get(key)
            if not pending:
                return None
            outcome = pending.popleft()
            if not pending:
                del self._evicted[key]
            return outcome

    def clear(self) -> None:
        """Forget the outcomes the session never told about (it failed)."""
        with self._lock:
            self._evicted.clear()


class Evictor:
    """A session's evictions, sent at once on the eviction workers."""

    def __init__(
        self,
        api: kubeapi.ApiClient,
        state: ClusterState,
        workers: int,
        may_write: Callable[[], bool],
        holds: outage.Holds,
        disruptions: Disruptions,
        record: Record,
        tell_disruption: TellDisruption,
    ) -> None:
        self.api = api
        self.state = state
        self.may_write = may_write
        self.evictions = Evictions()
        self._holds = holds
        self._disruptions = disruptions
        self._record = record
        self._tell_disruption = tell_disruption
        self._evictions = ThreadPoolExecutor(workers, thread_name_prefix="kbatch-evict")

    def shutdown(self) -> None:
        """Evictions not yet sent are dropped, those being sent finish."""
        self._evictions.shutdown(wait=True, cancel_futures=True)

    def evict(self, task: TaskInfo, reason: str, disruption: str) -> None:
        self._holds.resend(task.namespace, task.name, task.uid)
        self.state.assume_releasing(task.namespace, task.name)
        outcome = self._evictions.submit(self.send, task.namespace, task.name, task.uid, disruption)
        keys = [("Pod", task.namespace, task.name)]
        if task.job and not task.job.startswith("pod:"):  # a PodGroup's job: namespace/name
            namespace, _, group = task.job.partition("/")
            keys.append(("PodGroup", namespace, group))
        self.evictions.add(keys, outcome)
        if len(keys) > 1:
            self._tell_disruption(keys[1][1], keys[1][2], task, disruption or reason)

    def send(self, namespace: str, name: str, uid: str, disruption: str) -> bool:
        """Mark the pod with the DisruptionTarget condition saying ``disruption`` (where
        the server's Jobs read it), then DELETE it; did that evict it?"""
        if not still_leading(self.may_write, self.state, "eviction", namespace, name):
            return False
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}}
        try:
            self._disruptions.mark(namespace, name, uid, disruption)
            kubeapi.request(self.api, "DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}", body)
        except Exception as exc:
            if isinstance(exc, kubeapi.Unreachable):
                self._holds.no_answer("eviction", (namespace, name, uid), exc)
            else:
                self.state.forget(namespace, name)
                if isinstance(exc, kubeapi.ApiError) and exc.status in (404, 409):
                    return False  # gone already, or another pod of that name now
                log.warning("eviction of %s/%s failed: %s", namespace, name, exc)
            message = f"Eviction of {namespace}/{name} failed: {exc}"
            self._record(
                ObjectRef("Pod", namespace, name),
                "Warning",
                decided.FAILED_EVICTION,
                message,
                time.time(),
            )
            return False
        self.state.confirmed(namespace, name)
        self._holds.answered("eviction", (namespace, name, uid))
        return True
