"""The PodGroup operator.

A new PodGroup shows ``phase: Pending`` at once (kube-batch's groups had an
empty status until the scheduler first saw them). From then on, running,
succeeded and failed counts and the phase rules of DESIGN §2 are kept by the
scheduler's session close (``framework.job_status``), which sees every pod of
every group each period and writes only what changed.
"""

from typing import Any

from kubernetes import client

from kbatch.api import GROUP, VERSION
from kbatch.api.podgroup import PodGroupStatus
from kbatch.operators.scheduler.kube import ApiError, request

INITIAL_STATUS = PodGroupStatus().model_dump(mode="json", by_alias=True, exclude_none=True)


def needs_initial_status(body: dict[str, Any]) -> bool:
    return not (body.get("status") or {}).get("phase")


def initialise_status(api: client.ApiClient, namespace: str, name: str) -> None:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups/{name}/status"
    try:
        request(api, "PATCH", path, {"status": INITIAL_STATUS}, "application/merge-patch+json")
    except ApiError as exc:
        if exc.status != 404:
            raise
