"""JobSets without a hand-written PodGroup, live (DESIGN §15): a JobSet labelled
kbatch.io/queue gets one PodGroup for all its Jobs, made and owned by it, is held
(the JobSet suspended, so JobSet's controller makes its Jobs suspended) until the
group is admitted, and is released whole: every pod of every Job bound.

JobSet's CRD and controller come from ``scripts/provision-jobset.sh``'s cache
(``e2e.jobset``); installed before the module's ``kbatch run`` starts (the one of
tests/e2e/test_webhooks.py), so kopf serves the JobSet webhook from the start.
kube-controller-manager's Job controller makes the pods.
"""

from __future__ import annotations

import contextlib
import copy
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import jobset as js
from e2e.controlplane import Cluster
from e2e.test_job_groups import NODE_LABEL, QUEUE_LABEL, get_or_none, job_events
from e2e.test_webhooks import SCHEDULER, Webhooks, eventually, pod_groups
from e2e.test_webhooks import webhooks as webhooks  # the module's kbatch run (a fixture)
from kbatch.api import API_VERSION, GROUP_NAME_ANNOTATION
from kbatch.kubeapi import ApiError, request
from kbatch.sim import runner
from kbatch.sim.manifests import load_documents

pytestmark = pytest.mark.e2e
MERGE = "application/merge-patch+json"


@pytest.fixture(scope="module")
def jobset_controller(
    control_plane: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[js.Controller]:
    """JobSet's CRD installed and its controller running (skips saying why not)."""
    if not control_plane.controllers:
        pytest.skip("e2e: this control plane runs no kube-controller-manager: no Job makes pods")
    try:
        folder = js.assets()
        with control_plane.api_client() as api:
            js.install_crd(api, folder)
        with js.controller(
            folder, control_plane.kubeconfig, tmp_path_factory.mktemp("jobset")
        ) as c:
            yield c
    except js.Unavailable as exc:
        pytest.skip(f"e2e: JobSet unavailable: {exc}")


@contextlib.contextmanager
def ready_node(api: Any, name: str, cpu: str) -> Iterator[str]:
    """A ready Node of ``cpu`` cpu, labelled for the pods that select it (deleted after)."""
    resources = {"cpu": cpu, "memory": "800Gi", "pods": "110"}
    metadata = {"name": name, "labels": {NODE_LABEL: name}}
    request(api, "POST", "/api/v1/nodes", {"metadata": metadata})
    try:
        ready = {"type": "Ready", "status": "True", "reason": "E2E"}
        status = {"capacity": resources, "allocatable": resources, "conditions": [ready]}
        request(api, "PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, MERGE)
        yield name
    finally:
        with contextlib.suppress(ApiError):
            request(api, "DELETE", f"/api/v1/nodes/{name}")


@pytest.fixture(scope="module")
def node(jobset_controller: js.Controller, webhooks: Webhooks) -> Iterator[str]:
    """A ready Node of 8 cpu for this module's pods (JobSet installed before kbatch starts)."""
    with ready_node(webhooks.api, f"e2e-jobset-{webhooks.suffix}", "8") as name:
        yield name


def replicated(name: str, replicas: int, parallelism: int, node: str) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
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
            }
        },
    }


def labelled_jobset(name: str, queue: str, *jobs: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A JobSet labelled into ``queue``, with what JobSet's defaulting webhook sets."""
    return js.filled(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
            "spec": {"replicatedJobs": list(jobs), **spec},
        }
    )


def test_a_labelled_jobset_gets_one_group_is_held_and_released_whole(
    jobset_controller: js.Controller, webhooks: Webhooks, node: str
) -> None:
    api, ns = webhooks.api, webhooks.namespace("jobset")
    queue = webhooks.queue("jobset")
    body = labelled_jobset(
        "train", queue, replicated("leader", 1, 1, node), replicated("workers", 2, 2, node)
    )
    path = js.JOBSETS.format(namespace=ns)
    created = request(api, "POST", path, body)
    for entry in created["spec"]["replicatedJobs"]:
        template = entry["template"]["spec"]["template"]
        assert template["metadata"]["annotations"][GROUP_NAME_ANNOTATION] == "train"
        assert template["spec"]["schedulerName"] == SCHEDULER
    if webhooks.job_suspend:  # the server serves Job spec.suspend: else nothing is held
        assert created["spec"]["suspend"] is True, "the JobSet is held"
        assert "kbatch.io/held" in created["metadata"]["annotations"]

    group = eventually(
        "the JobSet's PodGroup is made", lambda: get_or_none(api, f"{pod_groups(ns)}/train")
    )
    (owner,) = group["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == (
        "JobSet", "train", created["metadata"]["uid"],
    )  # fmt: skip
    assert group["spec"]["minMember"] == 5 and group["spec"]["queue"] == queue
    assert group["spec"]["minResources"] == {"cpu": "5", "memory": "1280Mi", "pods": "5"}

    def released() -> dict[str, Any] | None:
        current = request(api, "GET", f"{path}/train")
        return current if not current["spec"].get("suspend") else None

    current = eventually("the JobSet is released", released, timeout=60)
    assert "kbatch.io/held" not in (current["metadata"].get("annotations") or {})

    def all_bound() -> list[dict[str, Any]] | None:
        pods = request(api, "GET", f"/api/v1/namespaces/{ns}/pods")["items"]
        bound = [p for p in pods if p["spec"].get("nodeName") == node]
        return pods if len(pods) == 5 and len(bound) == 5 else None

    pods = eventually("the JobSet's five pods are bound", all_bound, timeout=90)
    assert {p["metadata"]["annotations"][GROUP_NAME_ANNOTATION] for p in pods} == {"train"}
    jobs = request(api, "GET", f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
    assert len(jobs) == 3, "JobSet's controller made one Job per replica"
    assert all("kbatch.io/held" not in (j["metadata"].get("annotations") or {}) for j in jobs), (
        "the JobSet is held, never its Jobs one by one"
    )
    made = [e for e in job_events(api, ns, "train") if e["reason"] == "PodGroupCreated"]
    assert made and made[0]["involvedObject"]["kind"] == "JobSet"


def test_replicas_zero_is_refused_naming_the_field(
    jobset_controller: js.Controller, webhooks: Webhooks, node: str
) -> None:
    ns = webhooks.namespace("jobset-zero")
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "empty", "labels": {QUEUE_LABEL: "default"}},
        "spec": {"replicatedJobs": [replicated("w", 0, 1, node)]},
    }
    with pytest.raises(ApiError) as refused:
        request(webhooks.api, "POST", js.JOBSETS.format(namespace=ns), js.filled(body))
    assert "spec.replicatedJobs[0].replicas: 0 pods make no gang" in str(refused.value)


def _marks(obj: dict[str, Any]) -> dict[str, str]:
    """JobSet's labels on a Job and on its pod template (but the JobSet's uid)."""
    found = {}
    for where, meta in (("", obj["metadata"]), ("pod:", obj["spec"]["template"]["metadata"])):
        for key, value in (meta.get("labels") or {}).items():
            if key.startswith("jobset.sigs.k8s.io/") and key != "jobset.sigs.k8s.io/jobset-uid":
                found[where + key] = value
    return found


def test_the_simulator_makes_the_jobs_and_the_group_jobset_and_kbatch_make_live(
    jobset_controller: js.Controller, webhooks: Webhooks, node: str
) -> None:
    """The same JobSet, live and in ``kbatch simulate``: the same Jobs, named and
    labelled as JobSet's controller names and labels them, and the same PodGroup."""
    api, ns = webhooks.api, webhooks.namespace("jobset-sim")
    queue = webhooks.queue("jobset-sim")
    workers = {**replicated("workers", 2, 2, node), "groupName": "workers"}
    body = labelled_jobset("pair", queue, replicated("leader", 1, 1, node), workers)
    request(api, "POST", js.JOBSETS.format(namespace=ns), copy.deepcopy(body))

    def three_jobs() -> list[dict[str, Any]] | None:
        jobs = request(api, "GET", f"/apis/batch/v1/namespaces/{ns}/jobs")["items"]
        return jobs if len(jobs) == 3 else None

    live = {j["metadata"]["name"]: j for j in eventually("its three Jobs", three_jobs)}
    group = eventually("its PodGroup", lambda: get_or_none(api, f"{pod_groups(ns)}/pair"))

    sim_node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node, "labels": {NODE_LABEL: node}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }
    sim_queue = {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": queue}}
    submitted = {**body, "metadata": {**body["metadata"], "namespace": ns}}
    loaded = load_documents([sim_node, sim_queue, submitted])
    options = runner.Options(until=30.0)
    outcome = runner.Simulation(loaded, runner.resolve_conf(None, loaded), options).run()
    simulated = {name: r.obj for (space, name), r in outcome.jobs.jobs.items() if space == ns}

    assert (
        sorted(simulated) == sorted(live) == ["pair-leader-0", "pair-workers-0", "pair-workers-1"]
    )
    for name, job in live.items():
        assert _marks(simulated[name]) == _marks(job), name
    sim_group = outcome.cluster.state.get("PodGroup", ns, "pair")
    assert sim_group is not None
    for key in ("minMember", "minResources", "queue"):
        assert sim_group["spec"][key] == group["spec"][key], key


def test_explain_eta_foresees_when_a_held_jobset_starts(
    control_plane: Cluster, jobset_controller: js.Controller, webhooks: Webhooks
) -> None:
    """A labelled JobSet held behind a running gang whose deadline frees the only node big
    enough in 10 minutes (the JobSet's group needs more than the cluster has left, so it
    stays Pending and the JobSet held): its group has no pods, but ``kbatch explain
    --eta`` knows its Jobs (held with it, as the JobSet's) and says when it starts."""
    api, ns = webhooks.api, webhooks.namespace("jobset-eta")
    queue = webhooks.queue("jobset-eta")
    name = f"e2e-jobset-eta-{webhooks.suffix}"
    with ready_node(api, name, "200"):
        gang = {"minMember": 1, "queue": queue, "minResources": {"cpu": "200"}}
        request(api, "POST", pod_groups(ns), {"apiVersion": API_VERSION, "kind": "PodGroup",
                "metadata": {"name": "blocker"}, "spec": gang})  # fmt: skip
        blocker = {
            "metadata": {"name": "blocker", "annotations": {GROUP_NAME_ANNOTATION: "blocker"}},
            "spec": {
                "schedulerName": SCHEDULER,
                "nodeName": name,
                "activeDeadlineSeconds": 600,
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": "200"}}}
                ],
            },
        }
        request(api, "POST", f"/api/v1/namespaces/{ns}/pods", blocker)
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        running = {"status": {"phase": "Running", "startTime": started}}
        request(api, "PATCH", f"/api/v1/namespaces/{ns}/pods/blocker/status", running, MERGE)

        def blocker_runs() -> bool | None:
            group = get_or_none(api, f"{pod_groups(ns)}/blocker") or {}
            return (group.get("status") or {}).get("phase") == "Running" or None

        eventually("the blocker's gang runs", blocker_runs)
        workers = replicated("workers", 2, 1, name)
        pod_spec = workers["template"]["spec"]["template"]["spec"]
        pod_spec["containers"][0]["resources"]["requests"]["cpu"] = "100"
        body = labelled_jobset("later", queue, workers)
        created = request(api, "POST", js.JOBSETS.format(namespace=ns), body)
        if not webhooks.job_suspend:
            pytest.skip("e2e: this server serves no Job spec.suspend: nothing is held")
        assert created["spec"]["suspend"] is True

        def told_why() -> dict[str, Any] | None:
            group = get_or_none(api, f"{pod_groups(ns)}/later")
            return group if group and (group.get("status") or {}).get("conditions") else None

        group = eventually("its group told why it waits", told_why)
        assert group["status"].get("phase", "Pending") == "Pending", group["status"]
        held = request(api, "GET", f"{js.JOBSETS.format(namespace=ns)}/later")
        assert held["spec"]["suspend"] is True, "the JobSet is still held"
        args = [str(Path(sys.executable).parent / "kbatch"), "explain", f"{ns}/later", "--eta"]
        args += ["--eta-max-age", "0", "--kubeconfig", str(control_plane.kubeconfig)]
        args += ["--scheduler-name", SCHEDULER, "-o", "json"]
        done = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        eta = json.loads(done.stdout)["eta"]
        assert eta["seconds"] is not None and 540 < eta["seconds"] <= 610, eta
        assert eta["confidence"] == "high", eta

        def published() -> str | None:  # kbatch run watches JobSets, and publishes it too
            group = get_or_none(api, f"{pod_groups(ns)}/later") or {}
            for condition in (group.get("status") or {}).get("conditions") or ():
                if condition["type"] == "kbatch.io/EstimatedStart":
                    return str(condition["message"])
            return None

        message = eventually("kbatch run publishes its estimate", published, timeout=45)
        assert message.startswith("starts at "), message


@pytest.mark.parametrize("steps", ["InOrder", "dependsOn"])
def test_a_jobset_in_steps_starts_its_leader_then_its_workers(
    jobset_controller: js.Controller, webhooks: Webhooks, steps: str
) -> None:
    """``startupPolicyOrder: InOrder``, or the workers' ``dependsOn`` the leader being
    Ready: JobSet's controller resumes (or makes) the workers' Job only once the
    leader's is ready, so the gang is the leader (a gang of all three pods would wait
    for ever); the workers join the running group. The test plays the kubelet for the
    leader's pod (Running and Ready)."""
    api, ns = webhooks.api, webhooks.namespace(f"jobset-{steps.lower()}")
    queue = webhooks.queue(f"jobset-{steps.lower()}")
    name = f"e2e-jobset-{steps.lower()}-{webhooks.suffix}"
    with ready_node(api, name, "8"):
        leader, workers = replicated("leader", 1, 1, name), replicated("workers", 1, 2, name)
        if steps == "InOrder":
            order = {"startupPolicyOrder": "InOrder"}
            body = labelled_jobset("ordered", queue, leader, workers, startupPolicy=order)
        else:
            workers["dependsOn"] = [{"name": "leader", "status": "Ready"}]
            body = labelled_jobset("ordered", queue, leader, workers)
        request(api, "POST", js.JOBSETS.format(namespace=ns), body)
        group = eventually("its group", lambda: get_or_none(api, f"{pod_groups(ns)}/ordered"))
        assert group["spec"]["minMember"] == 1
        assert group["spec"]["minResources"]["cpu"] == "3", "room for all three pods"

        def bound(prefix: str, count: int) -> list[dict[str, Any]] | None:
            pods = request(api, "GET", f"/api/v1/namespaces/{ns}/pods")["items"]
            mine = [p for p in pods if p["metadata"]["name"].startswith(prefix)]
            placed = [p for p in mine if p["spec"].get("nodeName") == name]
            return placed if len(placed) == count else None

        (leader,) = eventually("the leader is bound", lambda: bound("ordered-leader-", 1), 60)
        started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        running = {
            "phase": "Running",
            "startTime": started,
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": started}],
        }
        path = f"/api/v1/namespaces/{ns}/pods/{leader['metadata']['name']}/status"
        request(api, "PATCH", path, {"status": running}, MERGE)
        eventually("the workers are bound", lambda: bound("ordered-workers-", 2), 90)
