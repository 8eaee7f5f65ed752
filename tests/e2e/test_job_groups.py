"""Jobs without a hand-written PodGroup, live (DESIGN §15): a batch/v1 Job labelled
kbatch.io/queue gets a PodGroup made and owned by it, is held until the group is
admitted, and is released whole; deleting the Job deletes the group.

The ``kbatch run`` with webhooks of tests/e2e/test_webhooks.py (its module fixture,
one process for this module). Pods are made by kube-controller-manager's Job
controller, so the tests need it; its garbage collector deletes the group of a
deleted Job. A Node of this module's own, selected by the Jobs' pods, takes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from e2e.controlplane import Cluster
from e2e.test_webhooks import SCHEDULER, Webhooks, eventually, pod_groups, refusal
from e2e.test_webhooks import webhooks as webhooks  # the module's kbatch run (a fixture)
from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.kubeapi import ApiError, request

pytestmark = pytest.mark.e2e

QUEUE_LABEL = "kbatch.io/queue"
NODE_LABEL = "kbatch.io/e2e-job-groups"


@pytest.fixture(scope="module")
def node(control_plane: Cluster, webhooks: Webhooks) -> Iterator[str]:
    """A ready Node of 8 cpu for this module's pods; the control plane's Job controller."""
    if not control_plane.controllers:
        pytest.skip(
            "e2e: this control plane runs no kube-controller-manager: no Job controller "
            "makes the pods, no garbage collector deletes a Job's group"
        )
    name = f"e2e-job-groups-{webhooks.suffix}"
    resources = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    body = {"metadata": {"name": name, "labels": {NODE_LABEL: name}}}
    request(webhooks.api, "POST", "/api/v1/nodes", body)
    status = {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "E2E"}],
        }
    }
    request(
        webhooks.api, "PATCH", f"/api/v1/nodes/{name}/status", status,
        "application/merge-patch+json",
    )  # fmt: skip
    try:
        yield name
    finally:
        with contextlib.suppress(ApiError):
            request(webhooks.api, "DELETE", f"/api/v1/nodes/{name}")


def labelled_job(name: str, queue: str, node: str, parallelism: int = 3) -> dict[str, Any]:
    """A Job as a user writes it: a queue label, no PodGroup, no schedulerName."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {
            "parallelism": parallelism,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "nodeSelector": {NODE_LABEL: node},
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": "1", "memory": "256Mi"}},
                        }
                    ],
                }
            },
        },
    }


def jobs_path(namespace: str) -> str:
    return f"/apis/batch/v1/namespaces/{namespace}/jobs"


def get_or_none(api: Any, path: str) -> dict[str, Any] | None:
    try:
        return dict(request(api, "GET", path))
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


def job_events(api: Any, namespace: str, name: str) -> list[dict[str, Any]]:
    items = request(api, "GET", f"/api/v1/namespaces/{namespace}/events")["items"]
    return [e for e in items if e["involvedObject"].get("name") == name]


def test_a_labelled_job_gets_its_group_is_held_and_released_whole(
    webhooks: Webhooks, node: str
) -> None:
    api, ns = webhooks.api, webhooks.namespace("jobgroup")
    queue = webhooks.queue("jobgroup")
    created = request(api, "POST", jobs_path(ns), labelled_job("train", queue, node))
    template = created["spec"]["template"]
    assert template["metadata"]["annotations"][GROUP_NAME_ANNOTATION] == "train"
    assert template["spec"]["schedulerName"] == SCHEDULER
    holds = webhooks.job_suspend  # the server serves Job spec.suspend
    if holds:
        assert created["spec"]["suspend"] is True
        assert "kbatch.io/held" in created["metadata"]["annotations"]

    group = eventually(
        "the Job's PodGroup is made", lambda: get_or_none(api, f"{pod_groups(ns)}/train")
    )
    (owner,) = group["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Job", "train", created["metadata"]["uid"], True,
    )  # fmt: skip
    assert group["spec"]["minMember"] == 3 and group["spec"]["queue"] == queue
    assert group["spec"]["minResources"] == {"cpu": "3", "memory": "768Mi", "pods": "3"}

    def released() -> dict[str, Any] | None:
        current = request(api, "GET", f"{jobs_path(ns)}/train")
        return current if not current["spec"].get("suspend") else None

    current = eventually("the Job is released", released, timeout=60)
    assert "kbatch.io/held" not in (current["metadata"].get("annotations") or {})

    def all_bound() -> list[dict[str, Any]] | None:
        pods = request(api, "GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        bound = [p for p in pods if p["spec"].get("nodeName") == node]
        return pods if len(pods) == 3 and len(bound) == 3 else None

    pods = eventually("the Job's three pods are bound", all_bound, timeout=60)
    assert {p["metadata"]["annotations"][GROUP_NAME_ANNOTATION] for p in pods} == {"train"}
    made = [e for e in job_events(api, ns, "train") if e["reason"] == "PodGroupCreated"]
    assert made, "the Job is told its group was made"

    request(api, "DELETE", f"{jobs_path(ns)}/train", {"propagationPolicy": "Background"})
    eventually(
        "the garbage collector deletes the Job's group with it",
        lambda: True if get_or_none(api, f"{pod_groups(ns)}/train") is None else None,
        timeout=60,
    )


def test_a_job_naming_no_queue_waits_held_naming_the_label_until_it_comes(
    webhooks: Webhooks, node: str
) -> None:
    if not webhooks.job_suspend:
        pytest.skip("this API server has no Job spec.suspend: a Job is not held")
    api, ns = webhooks.api, webhooks.namespace("jobgroup-noqueue")
    queue = f"e2e-later-{webhooks.suffix}"
    created = request(api, "POST", jobs_path(ns), labelled_job("late", queue, node, 1))
    assert created["spec"]["suspend"] is True

    def refused() -> dict[str, Any] | None:
        told = [e for e in job_events(api, ns, "late") if e["reason"] == "PodGroupRefused"]
        return told[0] if told else None

    told = eventually("the Job is told its group was refused", refused)
    assert told["type"] == "Warning"
    assert told["message"].startswith(f"metadata.labels[{QUEUE_LABEL}]: ")
    assert f"queue '{queue}' does not exist" in told["message"]
    job = request(api, "GET", f"{jobs_path(ns)}/late")
    assert job["spec"]["suspend"] is True, "nothing is released while the queue is missing"
    assert request(api, "GET", f"/api/v1/namespaces/{ns}/pods")["items"] == []

    assert webhooks.queue("later") == queue  # the queue comes
    eventually(
        "the sweep makes the group once the queue exists",
        lambda: get_or_none(api, f"{pod_groups(ns)}/late"),
        timeout=90,
    )
    eventually(
        "the Job is released",
        lambda: (
            True
            if not request(api, "GET", f"{jobs_path(ns)}/late")["spec"].get("suspend")
            else None
        ),
        timeout=60,
    )


def test_parallelism_zero_is_refused_naming_the_field(webhooks: Webhooks, node: str) -> None:
    ns = webhooks.namespace("jobgroup-zero")
    body = labelled_job("empty", "default", node, parallelism=0)
    error = refusal(webhooks.api, "POST", jobs_path(ns), body)
    assert "spec.parallelism: 0 pods make no gang" in str(error)


def test_a_pod_of_kbatch_without_a_group_runs_alone(webhooks: Webhooks, node: str) -> None:
    ns = webhooks.namespace("jobgroup-single")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "single"},
        "spec": {
            "schedulerName": SCHEDULER,
            "nodeSelector": {NODE_LABEL: node},
            "containers": [{"name": "main", "image": "busybox"}],
        },
    }
    request(webhooks.api, "POST", f"/api/v1/namespaces/{ns}/pods", pod)
    eventually(
        "the pod is bound as a group of one",
        lambda: request(webhooks.api, "GET", f"/api/v1/namespaces/{ns}/pods/single")["spec"].get(
            "nodeName"
        ),
    )
