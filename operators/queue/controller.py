"""The Queue controller: the ``default`` queue always exists.

The leader makes it when it takes the lead and again when it is deleted. With the
admission webhooks on, kbatch's own Queue webhook may not answer yet when the lead is
taken (it fails closed); the leader keeps trying, backing off, until the queue is made
or it no longer leads.

Deserved, allocated and request shares are published in Queue status by the
scheduler's own session close (the proportion plugin's numbers), so the two can
never disagree.
"""

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kbatch import kubeapi
from kbatch.api import DEFAULT_QUEUE, GROUP, VERSION

if TYPE_CHECKING:
    import kopf

    from kbatch.operators.process import Runtime

log = logging.getLogger("kbatch.queue")

DEFAULT_QUEUE_OBJECT: dict[str, Any] = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "Queue",
    "metadata": {"name": DEFAULT_QUEUE},
    "spec": {"weight": 1, "reclaimable": True, "state": "Open"},
}
DEFAULT_QUEUE_SECONDS = 120.0


def register(registry: "kopf.OperatorRegistry", runtime: "Runtime") -> None:
    # kopf is loaded here, not at the top: the runtime keeps the default queue before
    # kopf starts (``kbatch.operators.process``), and need not load it for that.
    import kopf

    @kopf.on.event(GROUP, VERSION, "queues", registry=registry)
    def queue_event(type: str, name: str, **_: Any) -> None:
        if type == "DELETED" and name == DEFAULT_QUEUE and runtime.leads():
            keep_default_queue(runtime.api, runtime.leads)


def ensure_default_queue(api: kubeapi.ApiClient) -> bool:
    """Create the default queue if it is missing; True if this call created it."""
    try:
        kubeapi.request(api, "POST", f"/apis/{GROUP}/{VERSION}/queues", DEFAULT_QUEUE_OBJECT)
    except kubeapi.ApiError as exc:
        if exc.status == 409:
            return False
        raise
    log.info("created the default queue")
    return True


def keep_default_queue(api: kubeapi.ApiClient, leads: Callable[[], bool]) -> threading.Thread:
    """Make the default queue on a thread of its own, trying again while this replica
    leads until it exists (or DEFAULT_QUEUE_SECONDS have passed)."""
    thread = threading.Thread(
        target=_until_made, args=(api, leads), name="kbatch-default-queue", daemon=True
    )
    thread.start()
    return thread


def _until_made(
    api: kubeapi.ApiClient, leads: Callable[[], bool], sleep: Callable[[float], None] = time.sleep
) -> None:
    """Try at once (called as this replica takes the lead, which the elector says only
    once its hooks have run), then again while it leads."""
    delay, deadline = 0.5, time.monotonic() + DEFAULT_QUEUE_SECONDS
    while True:
        try:
            ensure_default_queue(api)
            return
        except Exception as exc:
            if time.monotonic() > deadline:
                log.error("could not create the default queue: %s", exc)
                return
            log.info("the default queue is not made yet (%s); trying again", exc)
        sleep(delay)
        delay = min(delay * 2, 5.0)
        if not leads():
            return
