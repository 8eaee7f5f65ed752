"""A Job whose podFailurePolicy ignores DisruptionTarget is not failed by kbatch's
evictions, on a server whose Jobs have podFailurePolicy (Kubernetes 1.26 and later):
the victim's pod carries the DisruptionTarget condition (reason PreemptionByScheduler,
naming the preemptor) before it is deleted, and the Job controller replaces it instead
of failing the Job (backoffLimit 0).

Needs the Job controller (kube-controller-manager). What a kubelet does to a deleted
pod, the test does too: it reports the pod Failed once its containers stop (a Job with
podFailurePolicy waits for that phase before it counts or ignores the pod), where the
session's test kubelet only deletes it. Skipped, saying why, on a server without podFailurePolicy (1.20), where
kbatch evicts as it always did.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster_backend import poll
from e2e.kubelet import Watch
from kbatch.kubeapi import MERGE_PATCH, ApiError, request

pytestmark = pytest.mark.e2e

Json = dict[str, Any]
PREEMPT = """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
IGNORE_DISRUPTION = {
    "rules": [
        {
            "action": "Ignore",
            "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}],
        }
    ]
}
FINISHED = ("Succeeded", "Failed")


def serves_pod_failure_policy(api: Any, namespace: str) -> bool:
    """Does the server keep a Job's podFailurePolicy (a dry-run create)? One that does
    not know the field drops it."""
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "dry-run", "namespace": namespace},
        "spec": {
            "podFailurePolicy": IGNORE_DISRUPTION,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "x"}],
                }
            },
        },
    }
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    made = request(api, "POST", path, job, query={"dryRun": "All"})
    return "podFailurePolicy" in made.get("spec", {})


class Pods:
    """The namespace's pods as a kubelet sees them: a deleted pod is reported Failed
    (its containers stopped), and every pod's conditions are kept as they were when its
    deletion was first seen."""

    def __init__(self, api: Any, namespace: str) -> None:
        self.api = api
        self.lock = threading.Lock()
        self.at_deletion: dict[str, Json] = {}  # uid -> the pod when first seen deleted
        self.watch = Watch(api, f"/api/v1/namespaces/{namespace}/pods", self._on_pod)

    def __enter__(self) -> Pods:
        self.watch.start().wait_synced()
        return self

    def __exit__(self, *_: object) -> None:
        self.watch.stop()

    def _on_pod(self, kind: str, pod: Json) -> None:
        meta, status = pod["metadata"], pod.get("status") or {}
        if kind == "DELETED" or not meta.get("deletionTimestamp"):
            return
        with self.lock:
            first = meta["uid"] not in self.at_deletion
            self.at_deletion.setdefault(meta["uid"], pod)
        if first and status.get("phase") not in FINISHED:
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
            patch = {"metadata": {"uid": meta["uid"]}, "status": {"phase": "Failed"}}
            try:
                request(self.api, "PATCH", path, patch, MERGE_PATCH)
            except ApiError as exc:
                if exc.status not in (404, 409, 422):  # gone already
                    raise

    def of_job(self, job: str) -> list[Json]:
        with self.watch.lock:
            pods = list(self.watch.objects.values())
        return [p for p in pods if job_of(p) == job]

    def deleted(self, uid: str) -> Json | None:
        with self.lock:
            return self.at_deletion.get(uid)


def job_of(pod: Json) -> str | None:
    """The name of the Job that made ``pod`` (its label, both spellings of it)."""
    labels = pod["metadata"].get("labels") or {}
    return labels.get("batch.kubernetes.io/job-name") or labels.get("job-name")


@pytest.fixture
def priority_classes(session_api: Any, corner: Any) -> Iterator[tuple[str, str]]:
    names = (f"e2e-low-{corner.suffix}", f"e2e-high-{corner.suffix}")
    for name, value in zip(names, (10, 1000), strict=True):
        body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": name}, "value": value}  # fmt: skip
        request(session_api, "POST", "/apis/scheduling.k8s.io/v1/priorityclasses", body)
    yield names
    for name in names:
        try:
            request(session_api, "DELETE", f"/apis/scheduling.k8s.io/v1/priorityclasses/{name}")
        except ApiError as exc:
            if exc.status != 404:
                raise


def test_a_job_ignoring_disruption_is_not_failed_by_a_preemption(
    control_plane: Any,
    session_api: Any,
    corner: Any,
    kbatch_runs: Any,
    priority_classes: tuple[str, str],
    tmp_path: Path,
) -> None:
    namespace, api = corner.namespace, session_api
    if not control_plane.controllers:
        pytest.skip("e2e: no kube-controller-manager: no Job controller to replace the pod")
    if not serves_pod_failure_policy(api, namespace):
        pytest.skip("e2e: the server's Jobs have no podFailurePolicy (before 1.26)")
    low, high = priority_classes
    node = f"disruption-{corner.suffix}"
    corner.add_node(node, "2")
    label = {"kbatch.io/e2e-node": node}
    request(api, "PATCH", f"/api/v1/nodes/{node}", {"metadata": {"labels": label}}, MERGE_PATCH)

    def pod_spec(priority_class: str) -> Json:
        return {
            "schedulerName": corner.scheduler_name,
            "priorityClassName": priority_class,
            "restartPolicy": "Never",
            "nodeSelector": label,
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "2"}}}],
        }

    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "victim", "namespace": namespace},
        "spec": {
            "backoffLimit": 0,
            "podFailurePolicy": IGNORE_DISRUPTION,
            "template": {"spec": pod_spec(low)},
        },
    }
    jobs = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    conf = tmp_path / "preempt.yaml"
    conf.write_text(PREEMPT, encoding="utf-8")
    with Pods(api, namespace) as pods:
        run = corner.start_kbatch(kbatch_runs, "disruption", conf)
        try:
            request(api, "POST", jobs, job)

            def running() -> Json | None:
                up = [p for p in pods.of_job("victim") if p["status"].get("phase") == "Running"]
                return up[0] if up else None

            first = poll("the Job's pod Running", running, 60)
            preemptor = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "preemptor", "namespace": namespace},
                "spec": pod_spec(high),
            }
            request(api, "POST", f"/api/v1/namespaces/{namespace}/pods", preemptor)
            uid = first["metadata"]["uid"]
            deleted = poll("the Job's pod deleted", lambda: pods.deleted(uid), 60)

            def replaced() -> list[Json]:
                return [p for p in pods.of_job("victim") if p["metadata"]["uid"] != uid]

            poll("the Job's pod replaced", replaced, 60)
            status = request(api, "GET", f"{jobs}/victim").get("status") or {}
        finally:
            run.stop()
            with contextlib.suppress(ApiError):  # (not made, if its POST failed)
                request(api, "DELETE", f"{jobs}/victim", {"propagationPolicy": "Background"})
    conditions = {c["type"]: c for c in deleted["status"].get("conditions") or []}
    assert "DisruptionTarget" in conditions, "the condition came before the deletion"
    disruption = conditions["DisruptionTarget"]
    assert (disruption["status"], disruption["reason"]) == ("True", "PreemptionByScheduler")
    assert disruption["message"] == f"kbatch: preempting to accommodate pod {namespace}/preemptor"
    failed = [c for c in status.get("conditions") or [] if c["type"] == "Failed"]
    assert failed == [], "the Job is not failed"
    assert status.get("failed", 0) == 0, "an ignored failure is not counted"
