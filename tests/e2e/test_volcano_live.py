"""Volcano's own API live (DESIGN §14): with the chart's Volcano CRDs installed
(``volcano.installCRDs``: scheduling.volcano.sh/v1beta1 Queue and PodGroup), Volcano's
documented hierarchical-queue example runs on a real API server under ``kbatch run``
with the numbers its page gives, as it does in the simulator
(tests/scenarios/test_volcano.py): once every leaf asks for more than its share,
child-queue-a and child-queue-b hold 64 cpu each, subchild-queue-a1 and -a2 32 each,
in the Volcano Queues' own status (``status.allocated``; Volcano's QueueStatus has no
deserved, which kbatch exports as a metric: 64/64/32/32 cores there too). A Volcano
PodGroup's pods are bound as a gang: none while fewer than minMember exist, all once
they do.

The example's objects come from tests/scenarios/volcano/hierarchical-queue.yaml: its
Volcano Queues and PodGroups as they are; its vc-job (Volcano's Job controller's, which
does not run here: tests/e2e/test_volcano_controllers.py runs it) stands as the
PodGroup and pod that controller makes of it, and the pods the stand-in batch/v1 Jobs
make are created directly (what the Job controller would make), all with this test's
scheduler name. Its two Nodes of 64 cpu / 128Gi are the cluster: the root's deserved is what the
cluster has, so no other Node may be there.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.conftest import KbatchRuns
from e2e.test_webhooks import eventually
from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.kubeapi import ApiError, request

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[1] / "scenarios" / "volcano" / "hierarchical-queue.yaml"
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
SCHEDULER = "kbatch-e2e-volcano"
NAMESPACE = "default"  # the example's objects name none
DOCUMENTED = {
    "child-queue-a": 64,
    "child-queue-b": 64,
    "subchild-queue-a1": 32,
    "subchild-queue-a2": 32,
}
MERGE = "application/merge-patch+json"


def example() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(EXAMPLE.read_text(encoding="utf-8")) if doc]


def volcano_crds() -> list[dict[str, Any]]:
    """The chart's Volcano CRDs, as ``helm template --set volcano.installCRDs=true``
    renders them."""
    from chart.tools import by_kind, find_tool, template

    if find_tool("helm") is None:
        pytest.skip("e2e: no helm to render the chart's Volcano CRDs (scripts/install-tools.sh)")
    rendered = by_kind(template("--set", "volcano.installCRDs=true"), "CustomResourceDefinition")
    crds = [c for c in rendered if c["spec"]["group"] == "scheduling.volcano.sh"]
    assert sorted(c["metadata"]["name"] for c in crds) == [
        "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh",
    ]
    return crds


@pytest.fixture(scope="module")
def volcano_api(session_api: Any) -> Iterator[Any]:
    """Volcano's CRDs installed and Established; removed (with their objects) after."""
    crds = volcano_crds()
    for crd in crds:
        request(session_api, "POST", CRDS, crd)

    def established() -> bool | None:
        for crd in crds:
            status = request(session_api, "GET", f"{CRDS}/{crd['metadata']['name']}")
            conditions = (status.get("status") or {}).get("conditions") or []
            if not any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                return None
        return True

    try:
        eventually("Volcano's CRDs are established", established)
        yield session_api
    finally:
        for crd in crds:
            with contextlib.suppress(ApiError):
                request(session_api, "DELETE", f"{CRDS}/{crd['metadata']['name']}")


def volcano_path(obj: dict[str, Any]) -> str:
    plural = f"{obj['kind'].lower()}s"
    if obj["kind"] == "Queue":
        return f"{VOLCANO}/{plural}"
    return f"{VOLCANO}/namespaces/{NAMESPACE}/{plural}"


def pods_of(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods the Job controller makes of a stand-in Job, with this test's scheduler."""
    template = job["spec"]["template"]
    spec = {**template["spec"], "schedulerName": SCHEDULER}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{job['metadata']['name']}-{i}",
                "annotations": dict(template["metadata"]["annotations"]),
            },
            "spec": spec,
        }
        for i in range(job["spec"]["parallelism"])
    ]


def made_of_vcjob(vcjob: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """What Volcano's Job controller makes of a vcjob of one task: its PodGroup (of the
    vcjob's name here), and a stand-in Job whose pods are the task's."""
    name, spec = vcjob["metadata"]["name"], vcjob["spec"]
    (task,) = spec["tasks"]
    group = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": spec.get("minAvailable", task["replicas"]), "queue": spec["queue"]},
    }
    template = {**task["template"], "metadata": {"annotations": {GROUP_NAME_ANNOTATION: name}}}
    job = {
        "metadata": {"name": name},
        "spec": {"parallelism": task["replicas"], "template": template},
    }
    return group, job


def create_pods(api: Any, pods: list[dict[str, Any]]) -> None:
    for pod in pods:
        request(api, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)


def ready_node(api: Any, node: dict[str, Any]) -> None:
    request(api, "POST", "/api/v1/nodes", {"metadata": node["metadata"]})
    allocatable = node["status"]["allocatable"]
    status = {
        "status": {
            "capacity": allocatable,
            "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "E2E"}],
        }
    }
    request(api, "PATCH", f"/api/v1/nodes/{node['metadata']['name']}/status", status, MERGE)


def bound(api: Any, group: str) -> list[str]:
    listed = request(api, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
    return sorted(
        p["metadata"]["name"]
        for p in listed
        if (p["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION) == group
        and p["spec"].get("nodeName")
    )


def cores(quantity: object) -> float:
    text = str(quantity)
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


@pytest.fixture
def cluster(volcano_api: Any, kbatch_runs: KbatchRuns) -> Iterator[dict[str, Any]]:
    """The example's Nodes and Volcano Queues, and a ``kbatch run`` for its pods."""
    api = volcano_api
    docs = example()
    nodes = [d for d in docs if d["kind"] == "Node"]
    listed = {n["metadata"]["name"] for n in request(api, "GET", "/api/v1/nodes")["items"]}
    assert not listed, f"the example's cluster is its two Nodes; the cluster has {listed}"
    made: list[str] = []
    try:
        for node in nodes:
            ready_node(api, node)
            made.append(f"/api/v1/nodes/{node['metadata']['name']}")
        for doc in docs:
            if doc["apiVersion"] == "scheduling.volcano.sh/v1beta1" and doc["kind"] == "Queue":
                request(api, "POST", volcano_path(doc), doc)
                made.append(f"{volcano_path(doc)}/{doc['metadata']['name']}")
        run = kbatch_runs.start("volcano", scheduler_names=(SCHEDULER,), leader_elect=False)
        try:
            yield {"api": api, "docs": docs, "run": run}
        finally:
            run.stop()
    finally:
        with contextlib.suppress(ApiError):
            request(
                api, "DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods",
                {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
            )  # fmt: skip
        with contextlib.suppress(ApiError):
            request(api, "DELETE", f"{VOLCANO}/namespaces/{NAMESPACE}/podgroups")
        for path in reversed(made):
            with contextlib.suppress(ApiError):
                request(api, "DELETE", path)


def test_volcanos_hierarchical_example_gets_its_documented_shares_live(
    cluster: dict[str, Any],
) -> None:
    api, docs = cluster["api"], cluster["docs"]
    groups = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PodGroup"}
    jobs = {d["metadata"]["name"]: d for d in docs if d["apiVersion"] == "batch/v1"}
    for vcjob in (d for d in docs if d["apiVersion"].startswith("batch.volcano.sh/")):
        name = vcjob["metadata"]["name"]
        groups[name], jobs[name] = made_of_vcjob(vcjob)

    # A gang first: a Volcano PodGroup of 3 in subchild-queue-a2, its pods coming one by
    # one. None is bound while fewer than 3 exist; all are, once the third comes.
    gang = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "gang"},
        "spec": {"minMember": 3, "queue": "subchild-queue-a2"},
    }
    request(api, "POST", volcano_path(gang), gang)
    three = {**jobs["fill-a2"], "metadata": {"name": "gang"}}
    three = {**three, "spec": {**three["spec"], "parallelism": 3}}
    three["spec"]["template"] = {
        **three["spec"]["template"],
        "metadata": {"annotations": {GROUP_NAME_ANNOTATION: "gang"}},
    }
    pods = pods_of(three)
    create_pods(api, pods[:2])
    time.sleep(4)  # four sessions at the 1 s period
    assert bound(api, "gang") == [], "a gang short of minMember is not bound in part"
    create_pods(api, pods[2:])
    # The session binds the three one after another, so a read between two binds sees
    # some of them: wait for all three rather than for the first.
    whole = ["gang-0", "gang-1", "gang-2"]
    eventually("the gang is bound whole", lambda: bound(api, "gang") == whole or None)
    eventually(
        "the Volcano PodGroup says Running",
        lambda: (
            (request(api, "GET", f"{volcano_path(gang)}/gang").get("status") or {}).get("phase")
            == "Running"
            or None
        ),
    )
    request(
        api, "DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods",
        {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
    )  # fmt: skip
    request(api, "DELETE", f"{volcano_path(gang)}/gang")
    eventually("the gang is gone", lambda: not bound(api, "gang") or None)

    # The example: job-a, then every leaf asking for more than its share.
    for name in ("job-a", "fill-a1", "fill-a2", "fill-b"):
        request(api, "POST", volcano_path(groups[name]), groups[name])
        create_pods(api, pods_of(jobs[name]))

    def allocated() -> dict[str, float] | None:
        got = {}
        for name in DOCUMENTED:
            status = request(api, "GET", f"{VOLCANO}/queues/{name}").get("status") or {}
            got[name] = cores((status.get("allocated") or {}).get("cpu", 0))
        return got if got == DOCUMENTED else None

    try:
        eventually("the Volcano queues hold their documented shares", allocated, 90)
    except AssertionError:
        shown = {
            n: (request(api, "GET", f"{VOLCANO}/queues/{n}").get("status") or {})
            for n in DOCUMENTED
        }
        raise AssertionError(f"Volcano queues' status: {shown}") from None
    scraped = request_metrics(cluster["run"].metrics_url)
    deserved = {
        name: scraped.get(
            f'kbatch_queue_deserved_milli_cpu{{parent="{parent}",queue_name="{name}"}}'
        )
        for name, parent in (
            ("child-queue-a", ""),
            ("child-queue-b", ""),
            ("subchild-queue-a1", "child-queue-a"),
            ("subchild-queue-a2", "child-queue-a"),
        )
    }
    assert deserved == {name: cpu * 1000.0 for name, cpu in DOCUMENTED.items()}
    status = request(api, "GET", f"{VOLCANO}/queues/subchild-queue-a1")["status"]
    assert status["state"] == "Open" and status["running"] >= 1


def request_metrics(url: str) -> dict[str, float]:
    from e2e.cluster_backend import metrics

    return metrics(url)
