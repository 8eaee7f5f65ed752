"""A victim told why before it goes: the pod's ``DisruptionTarget`` condition (reason
``PreemptionByScheduler``, a message naming who takes its room), patched into its
status just before kbatch deletes it, as kube-scheduler does. A Job's
``podFailurePolicy`` can then ignore the failure (``onPodConditions: [{type:
DisruptionTarget}]``, ``action: Ignore``) instead of counting it against its
``backoffLimit``.

Only where the API server's Jobs read the condition: where batch/v1 JobSpec has
``podFailurePolicy`` in the OpenAPI the server serves (Kubernetes 1.26 and later). The
server is asked once, at the first eviction; elsewhere (Kubernetes 1.20) an eviction
is the DELETE alone, as it always was.

The condition is the eviction's first step, never a reason to give it up: the pod gone
(404) or made again under its name (422: the patch's uid is not that pod's; 409) is for
the DELETE's own uid precondition to find; any other refusal (a role without
``pods/status``) is logged, once in a while, and the pod is deleted all the same. Only
no answer at all stops the eviction, as its DELETE would get none either
(``Unreachable``, which the caller holds the pod for).
"""

import logging
import threading
from datetime import UTC, datetime
from typing import Any

from kbatch import kubeapi
from kbatch.operators.scheduler.core.framework import outcome as decided
from kbatch.operators.scheduler.runtime.outage import FailureReport

log = logging.getLogger("kbatch.kube")
JOB_SPEC = "io.k8s.api.batch.v1.JobSpec"
FIELD_MANAGER = "kbatch"  # who wrote the condition, in the pod's managedFields
# Refusals that mean the pod is gone (404) or is another pod now (422: "metadata.uid:
# field is immutable"; 409): the DELETE finds out too.
GONE = (404, 409, 422)


def jobs_read_disruption(api: kubeapi.ApiClient) -> bool:
    """Does the server's batch/v1 JobSpec have ``podFailurePolicy`` (so its Job
    controller reads the DisruptionTarget condition)?"""
    schemas = kubeapi.openapi_schemas(api, "apis/batch/v1") or {}
    job_spec = schemas.get(JOB_SPEC) or {}
    return "podFailurePolicy" in (job_spec.get("properties") or {})


def condition_patch(uid: str, message: str, now: datetime) -> dict[str, Any]:
    """The strategic merge patch of a pod's status that adds (or replaces, by type) its
    DisruptionTarget condition; the uid makes it fail on another pod of the name."""
    condition = {
        **decided.disruption_condition(message),
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {"metadata": {"uid": uid}, "status": {"conditions": [condition]}}


class Disruptions:
    """Marks victims with the DisruptionTarget condition where the server's Jobs read it
    (asked once: ``marks``)."""

    def __init__(self, api: kubeapi.ApiClient, failures: FailureReport) -> None:
        self.api = api
        self._failures = failures
        self._served: bool | None = None  # None: not known yet
        self._lock = threading.Lock()

    def marks(self) -> bool:
        """Are victims marked? Asked of the server the first time (evictions wait for
        the answer); an answer refused is asked again at the next eviction, and this one
        goes unmarked. Unreachable when the server gives no answer."""
        with self._lock:
            if self._served is None:
                try:
                    self._served = jobs_read_disruption(self.api)
                except kubeapi.Unreachable:
                    raise
                except kubeapi.ApiError as exc:
                    self._failures.failed(
                        "disruption", "whether Jobs read DisruptionTarget is unknown: %s", exc
                    )
                    return False
                log.info(
                    "victims get the DisruptionTarget condition before deletion: %s",
                    "yes" if self._served else "no (the server's Jobs have no podFailurePolicy)",
                )
            return self._served

    def mark(self, namespace: str, name: str, uid: str, message: str) -> None:
        """Patch the pod's DisruptionTarget condition in, where ``marks``; Unreachable
        when the server gives no answer, any other failure logged."""
        if not message or not self.marks():
            return
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
        patch = condition_patch(uid, message, datetime.now(UTC))
        try:
            kubeapi.request(
                self.api,
                "PATCH",
                path,
                patch,
                kubeapi.STRATEGIC_MERGE_PATCH,
                query={"fieldManager": FIELD_MANAGER},
            )
        except kubeapi.Unreachable:
            raise
        except kubeapi.ApiError as exc:
            if exc.status not in GONE:
                self._failures.failed(
                    "disruption", "DisruptionTarget on %s/%s not written: %s", namespace, name, exc
                )
