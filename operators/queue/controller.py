"""The Queue operator: the ``default`` queue always exists.

Deserved, allocated and request shares are published in Queue status by the
scheduler's own session close (the proportion plugin's numbers), so the two
can never disagree.
"""

import logging
from typing import Any

from kubernetes import client

from kbatch.api import DEFAULT_QUEUE, GROUP, VERSION
from kbatch.operators.scheduler.kube import ApiError, request

log = logging.getLogger("kbatch.queue")

DEFAULT_QUEUE_OBJECT: dict[str, Any] = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "Queue",
    "metadata": {"name": DEFAULT_QUEUE},
    "spec": {"weight": 1, "reclaimable": True, "state": "Open"},
}


def ensure_default_queue(api: client.ApiClient) -> bool:
    """Create the default queue if it is missing; True if this call created it."""
    try:
        request(api, "POST", f"/apis/{GROUP}/{VERSION}/queues", DEFAULT_QUEUE_OBJECT)
    except ApiError as exc:
        if exc.status == 409:
            return False
        raise
    log.info("created the default queue")
    return True
