"""``kbatch jobs`` and ``kbatch explain --eta`` against a real API server and a running
``kbatch run``, as a user runs them: the installed commands, with a kubeconfig.

A node of 2 cpu runs a gang of 2 whose pods end at their activeDeadlineSeconds (the test
kubelet ends them then); two more gangs of 2 wait behind it. ``kbatch jobs`` lists them
in kbatch's order with their positions; ``kbatch explain --eta`` says when the first of
them starts, and it does, within one scheduling period of that (plus the round trips of
a real cluster: kubelet, watch and session, at most ``LATENCY``).

Everything here is its own: a namespace, a queue, a node only its pods select, and a
``kbatch run`` serving a scheduler name of its own, so no other test's pods are touched.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster_backend import poll
from e2e.conftest import KbatchRuns
from e2e.controlplane import Cluster
from kbatch.kubeapi import ApiError, request

pytestmark = pytest.mark.e2e

NAMESPACE = "kbatch-visibility"
QUEUE = "visibility"
NODE = "visibility-node"
SCHEDULER = "kbatch-visibility"
LABEL = {"kbatch.io/e2e": "visibility"}
RUNTIME = 20  # seconds: each pod's activeDeadlineSeconds, and when the kubelet ends it
PERIOD = 1.0
LATENCY = 0.5  # kubelet, watch and API round trips on a real (and busy) control plane
JOB_SYNC = 1.0  # the job controller's batching of a Job's syncs (its syncJobBatchPeriod)
BIN = Path(sys.executable).parent
MERGE = "application/merge-patch+json"
PG_API = "/apis/scheduling.incubator.k8s.io/v1alpha1"
ESTIMATED_START = "kbatch.io/EstimatedStart"


def _pod_group(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"minMember": 2, "queue": QUEUE, "minResources": {"cpu": "2"}},
    }


def _pod(group: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-{index}",
            "namespace": NAMESPACE,
            "annotations": {
                "scheduling.k8s.io/group-name": group,
                "kbatch.io/sim-duration": f"{RUNTIME}s",  # the test kubelet's cue
            },
        },
        "spec": {
            "schedulerName": SCHEDULER,
            "nodeSelector": LABEL,
            "activeDeadlineSeconds": RUNTIME,  # what kbatch's ETA reads
            "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def _submit(api: Any, group: str) -> None:
    request(api, "POST", f"{PG_API}/namespaces/{NAMESPACE}/podgroups", _pod_group(group))
    for index in range(2):
        request(api, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", _pod(group, index))


def _phase(api: Any, group: str) -> str:
    obj = request(api, "GET", f"{PG_API}/namespaces/{NAMESPACE}/podgroups/{group}")
    return str((obj.get("status") or {}).get("phase") or "Pending")


def _conditions(api: Any, group: str) -> list[dict[str, Any]]:
    obj = request(api, "GET", f"{PG_API}/namespaces/{NAMESPACE}/podgroups/{group}")
    return list((obj.get("status") or {}).get("conditions") or [])


def _seconds(micro_time: str) -> float:
    return datetime.fromisoformat(micro_time.replace("Z", "+00:00")).timestamp()


def _kbatch(cluster: Cluster, *argv: str, command: str = "kbatch") -> Any:
    args = [str(BIN / command), *argv, "--kubeconfig", str(cluster.kubeconfig)]
    args += ["--scheduler-name", SCHEDULER, "-o", "json"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _made_namespace(api: Any) -> bool:
    try:
        request(api, "POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    except ApiError as exc:
        if exc.status == 409 and "being deleted" in str(exc):
            return False
        raise
    return True


@pytest.fixture
def own_corner(api_client: Any, crds: None) -> Iterator[Any]:
    """The namespace, queue and node of this test (removed after)."""
    api = api_client
    poll("the namespace made (the last test's deleted)", lambda: _made_namespace(api), 120, 0.5)
    queue = {"apiVersion": "scheduling.incubator.k8s.io/v1alpha1", "kind": "Queue"}
    request(api, "POST", f"{PG_API}/queues", {**queue, "metadata": {"name": QUEUE}})
    request(api, "POST", "/api/v1/nodes", {"metadata": {"name": NODE, "labels": LABEL}})
    resources = {"cpu": "2", "memory": "8Gi", "pods": "110"}
    status = {
        "capacity": resources,
        "allocatable": resources,
        "conditions": [{"type": "Ready", "status": "True", "reason": "E2E"}],
    }
    request(api, "PATCH", f"/api/v1/nodes/{NODE}/status", {"status": status}, MERGE)
    try:
        yield api
    finally:
        for path in (
            f"/api/v1/namespaces/{NAMESPACE}/pods",
            f"{PG_API}/namespaces/{NAMESPACE}/podgroups",
        ):
            request(api, "DELETE", path, {"gracePeriodSeconds": 0})
        for path in (
            f"/api/v1/nodes/{NODE}",
            f"{PG_API}/queues/{QUEUE}",
            f"/api/v1/namespaces/{NAMESPACE}",
        ):
            try:
                request(api, "DELETE", path)
            except ApiError as exc:
                if exc.status != 404:
                    raise


def test_jobs_in_line_and_an_eta_that_comes_true(
    control_plane: Cluster, own_corner: Any, kubelet: Any, kbatch_runs: KbatchRuns
) -> None:
    api = own_corner
    run = kbatch_runs.start("visibility", scheduler_names=(SCHEDULER,), lock_namespace=NAMESPACE)
    try:
        _submit(api, "first")
        poll("the first gang running", lambda: _phase(api, "first") == "Running", 30)
        for group in ("second", "third"):
            _submit(api, group)
            time.sleep(1.1)  # creation times a second apart: the line is first come first served
        for group in ("second", "third"):
            poll(f"{group} told why it waits", lambda g=group: _conditions(api, g), 30)

        listed = _kbatch(control_plane, "jobs", "-n", NAMESPACE, "-q", QUEUE)
        rows = [(j["name"], j["queuePosition"], j["phase"]) for j in listed["jobs"]]
        assert rows == [("second", 1, "Pending"), ("third", 2, "Pending")]
        first, second = listed["jobs"]
        assert first["position"] < second["position"]
        assert "not admitted" in first["reason"], first["reason"]

        # computed here, not read off what kbatch run publishes (the test below)
        story = _kbatch(
            control_plane, "explain", f"{NAMESPACE}/second", "--eta", "--eta-max-age", "0"
        )
        eta = story["eta"]
        assert eta["seconds"] is not None and eta["confidence"] == "high", eta
        assert "activeDeadlineSeconds of 2 pods" in eta["runtimes"]
        assert 0 < eta["seconds"] <= RUNTIME
        assert story["waitingAheadInCluster"] == first["position"] - 1
        assert [r["name"] for r in story["runningInQueue"]] == ["first"]

        started = poll(
            "second running", lambda: _phase(api, "second") == "Running" and time.time(), 60, 0.05
        )
        missed_by = started - _seconds(eta["startsAt"])  # as of when it read the cluster
        print(f"\nkbatch explain --eta: {eta['text']}; it started {missed_by:+.2f} s from that")
        assert abs(missed_by) <= PERIOD + LATENCY

        plugin = _kbatch(control_plane, "jobs", "-n", NAMESPACE, "--eta", command="kubectl-kbatch")
        (third,) = plugin["jobs"]
        assert third["name"] == "third" and third["eta"]["seconds"] is not None
    finally:
        run.stop()


def _job(group: str) -> dict[str, Any]:
    """A batch/v1 Job of 2 pods in the gang ``group`` whose pods would run a minute but
    have no deadline of their own: the Job has one (``RUNTIME``), which the job controller
    enforces by deleting them."""
    template = _pod(group, 0)
    del template["spec"]["activeDeadlineSeconds"]
    template["metadata"]["annotations"]["kbatch.io/sim-duration"] = "60s"
    spec = {"restartPolicy": "Never", **template["spec"]}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": group, "namespace": NAMESPACE},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "backoffLimit": 0,
            "activeDeadlineSeconds": RUNTIME,
            "template": {
                "metadata": {"annotations": template["metadata"]["annotations"]},
                "spec": spec,
            },
        },
    }


def test_an_eta_behind_a_job_reads_the_job_s_deadline(
    control_plane: Cluster, own_corner: Any, kubelet: Any, kbatch_runs: KbatchRuns
) -> None:
    """The running gang is a Job's, its deadline on the Job: ``kbatch explain --eta`` says
    the gang behind it starts when the job controller ends it, and it does. The
    scheduler, which watches Jobs, publishes the same basis on the waiting group."""
    if not control_plane.controllers:
        pytest.skip("e2e: this control plane runs no kube-controller-manager (no Job controller)")
    api = own_corner
    run = kbatch_runs.start(
        "eta-job",
        scheduler_names=(SCHEDULER,),
        lock_namespace=NAMESPACE,
        extra=("--eta-interval", "2s"),
    )
    jobs = f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs"
    try:
        request(api, "POST", f"{PG_API}/namespaces/{NAMESPACE}/podgroups", _pod_group("first"))
        request(api, "POST", jobs, _job("first"))
        poll("the Job's gang running", lambda: _phase(api, "first") == "Running", 30)
        _submit(api, "second")
        poll("second told why it waits", lambda: _conditions(api, "second"), 30)
        condition = poll("second's estimate published", lambda: _published(api, "second"), 30)
        assert "their Job's activeDeadlineSeconds of 2 pods" in condition["message"], condition
        assert condition["reason"] == "HighConfidence", condition
        story = _kbatch(
            control_plane, "explain", f"{NAMESPACE}/second", "--eta", "--eta-max-age", "0"
        )
        eta = story["eta"]
        assert eta["confidence"] == "high", eta
        assert "their Job's activeDeadlineSeconds of 2 pods" in eta["runtimes"], eta
        assert 0 < eta["seconds"] <= RUNTIME, eta
        started = poll(
            "second running", lambda: _phase(api, "second") == "Running" and time.time(), 60, 0.05
        )
        missed_by = started - _seconds(eta["startsAt"])
        print(f"\nkbatch explain --eta: {eta['text']}; it started {missed_by:+.2f} s from that")
        # (the job controller syncs a Job at most once a second: its deletes may wait that long)
        assert abs(missed_by) <= PERIOD + LATENCY + JOB_SYNC, missed_by
    finally:
        run.stop()
        request(api, "DELETE", f"{jobs}/first", {"propagationPolicy": "Background"})


def _published(api: Any, group: str) -> dict[str, Any] | None:
    found = [c for c in _conditions(api, group) if c["type"] == ESTIMATED_START]
    return found[0] if found else None


def _metric_lines(url: str, name: str) -> list[str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return [line for line in text.splitlines() if line.startswith(name + "{")]


def test_the_estimate_is_published_on_the_waiting_group_and_read_back(
    control_plane: Cluster, own_corner: Any, kubelet: Any, kbatch_runs: KbatchRuns
) -> None:
    """``kbatch run --eta-interval 2s`` puts the waiting gang's estimate on it (a condition
    and a metric), ``kbatch explain --eta`` reads it, and it goes once the gang runs."""
    api = own_corner
    run = kbatch_runs.start(
        "eta-published",
        scheduler_names=(SCHEDULER,),
        lock_namespace=NAMESPACE,
        extra=("--eta-interval", "2s"),
    )
    try:
        _submit(api, "first")
        poll("the first gang running", lambda: _phase(api, "first") == "Running", 30)
        _submit(api, "second")
        condition = poll("second's estimate published", lambda: _published(api, "second"), 30)
        assert (condition["status"], condition["reason"]) == ("True", "HighConfidence")
        message = condition["message"]
        assert message.startswith("starts at "), message
        assert "runtimes from activeDeadlineSeconds of 2 pods" in message, message
        starts = _seconds(message.removeprefix("starts at ").split(": ", 1)[0])
        assert 0 < starts - _seconds(condition["lastTransitionTime"]) <= RUNTIME + PERIOD

        name = "kbatch_podgroup_estimated_start_seconds"
        lines = poll("the metric", lambda: _metric_lines(run.metrics_url, name), 10)
        (line,) = [line for line in lines if 'name="second"' in line]
        assert f'namespace="{NAMESPACE}"' in line and f'queue="{QUEUE}"' in line, line
        assert 'confidence="high"' in line, line
        assert abs(float(line.rsplit(" ", 1)[1]) - starts) < 1.0, line  # the message's, whole

        story = _kbatch(control_plane, "explain", f"{NAMESPACE}/second", "--eta")
        eta = story["eta"]
        assert eta["publishedAt"] == _seconds(condition["lastTransitionTime"]), eta
        assert eta["confidence"] == "high" and 0 <= eta["seconds"] <= RUNTIME, eta

        poll("second running", lambda: _phase(api, "second") == "Running", 60)
        poll("the estimate gone", lambda: _published(api, "second") is None, 15)
        poll(
            "its series gone",
            lambda: not [x for x in _metric_lines(run.metrics_url, name) if '"second"' in x],
            15,
        )
    finally:
        run.stop()


# kube-controller-manager publishes its CA bundle into every namespace, at a time of its
# own: a fresh namespace may get it between two reads of this test.
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"


def _versions(api: Any) -> dict[str, str]:
    """The resourceVersion of each object of this test's corner (and the names of all)."""
    found = {}
    for path in (
        f"/api/v1/namespaces/{NAMESPACE}/pods",
        f"{PG_API}/namespaces/{NAMESPACE}/podgroups",
        f"{PG_API}/queues",
        f"/api/v1/namespaces/{NAMESPACE}/configmaps",
        "/api/v1/nodes",
    ):
        for item in request(api, "GET", path).get("items") or []:
            meta = item["metadata"]
            if meta["name"] == ROOT_CA_CONFIGMAP:
                continue  # the controller manager's, published when it gets to the namespace
            found[f"{path}/{meta['name']}"] = meta["resourceVersion"]
    return found


def test_what_if_answers_from_the_live_cluster_and_writes_nothing(
    control_plane: Cluster, own_corner: Any, tmp_path: Path
) -> None:
    """``kbatch simulate --from-cluster``: a gang of 2 fits the empty node at once, a second
    waits for the first's deadline, and a Job labelled with the cluster's queue (its
    PodGroup made as kbatch's webhooks would) waits for both; nothing is made or
    changed on the cluster."""
    api = own_corner
    documents = []
    for group in ("now", "later"):
        pods = [_pod(group, index) for index in range(2)]
        for pod in pods:
            pod["spec"]["schedulerName"] = "kbatch"  # one the command serves by default
        documents += [_pod_group(group), *pods]
    template = {"metadata": {}, "spec": {**_pod("job", 0)["spec"], "restartPolicy": "Never"}}
    template["spec"]["schedulerName"] = "kbatch"
    documents.append({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "labelled", "namespace": NAMESPACE,
                     "labels": {"kbatch.io/queue": QUEUE}},
        "spec": {"parallelism": 2, "template": template},
    })  # fmt: skip
    path = tmp_path / "submit.yaml"
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    before = _versions(api)
    args = [str(BIN / "kbatch"), "simulate", "--from-cluster", str(path)]
    args += ["--kubeconfig", str(control_plane.kubeconfig), "-o", "json"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    now, later, labelled = json.loads(done.stdout)["groups"]
    assert (now["name"], now["admitted"], now["nodes"]) == ("now", True, [NODE]), done.stdout
    assert now["eta"]["seconds"] == 0.0, now
    assert (later["name"], later["admitted"], later["nodes"]) == ("later", False, [NODE])
    assert later["eta"]["confidence"] == "high" and later["eta"]["seconds"] == RUNTIME, later
    assert "activeDeadlineSeconds of 2 pods" in later["eta"]["text"], later
    assert later["reason"], later
    assert (labelled["kind"], labelled["name"], labelled["queue"]) == (
        "PodGroup",
        "labelled",
        QUEUE,
    )
    assert labelled["eta"]["seconds"] > RUNTIME and labelled["nodes"] == [NODE], labelled
    assert _versions(api) == before  # nothing made, nothing changed
    for path in (
        *(f"{PG_API}/namespaces/{NAMESPACE}/podgroups/{g}" for g in ("now", "later", "labelled")),
        f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/labelled",
    ):
        with pytest.raises(ApiError) as missing:
            request(api, "GET", path)
        assert missing.value.status == 404
