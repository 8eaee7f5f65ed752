"""The PodGroup controller: a new PodGroup shows ``phase: Pending`` at once.

kube-batch's groups had an empty status until the scheduler first saw them. From
then on, running, succeeded and failed counts, the phase and the conditions are
kept by the scheduler's session close, which sees every pod of every group each
period and writes only what changed, by the rules of ``status`` (their one home).
"""

import logging
from typing import TYPE_CHECKING, Any

import kopf

from kbatch import kubeapi
from kbatch.api import GROUP, VERSION
from kbatch.operators.podgroup import status

if TYPE_CHECKING:
    from kbatch.operators.scheduler.runtime.operator import Runtime

log = logging.getLogger("kbatch.podgroup")


def register(registry: kopf.OperatorRegistry, runtime: "Runtime") -> None:
    @kopf.on.event(GROUP, VERSION, "podgroups", registry=registry)
    def pod_group_event(
        type: str, body: kopf.Body, name: str, namespace: str | None, **_: Any
    ) -> None:
        if type != "DELETED" and runtime.leads() and status.needs_initial_status(body):
            initialise_status(runtime.api, namespace or "default", name)


def initialise_status(api: kubeapi.ApiClient, namespace: str, name: str) -> None:
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups/{name}/status"
    try:
        kubeapi.request(api, "PATCH", path, {"status": status.INITIAL_STATUS}, kubeapi.MERGE_PATCH)
    except kubeapi.ApiError as exc:
        if exc.status != 404:
            raise
