"""The admission webhooks against a real API server (DESIGN §7, webhooks/README.md).

One ``kbatch run --webhook-address 127.0.0.1:PORT --manage-webhooks`` for the
module: kopf serves the webhooks with a self-signed certificate, kbatch writes
the webhook configurations (URL client config + CA bundle) and removes them at
exit. Every request below is what ``kubectl apply`` would send (POST to create,
merge PATCH to change, DELETE), and every rejection is read from the API
server's answer.

The scheduler of that process serves its own schedulerName only, so it binds no
other test's pods.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from e2e.controlplane import KUBECONFIG_ENV, Cluster, free_ports, tail
from kbatch.api import API_VERSION, GROUP, GROUP_NAME_ANNOTATION, VERSION
from kbatch.kubeapi import ApiError, request
from kbatch.webhooks import configuration
from kbatch.webhooks.jobs import job_suspend_support

pytestmark = pytest.mark.e2e

T = TypeVar("T")
REPO = Path(__file__).resolve().parents[2]
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
QUEUES = f"/apis/{GROUP}/{VERSION}/queues"
SCHEDULER = "kbatch-e2e-webhooks"
UNAVAILABLE = "delayed pod creation is unavailable"
START_TIMEOUT = 60.0


def eventually(what: str, probe: Callable[[], T | None], timeout: float = 30.0) -> T:
    """Poll ``probe`` until it returns something other than None (or fail saying ``what``)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not true after {timeout:.0f}s: {what}")
        time.sleep(0.1)


def refusal(api: Any, method: str, path: str, body: Any = None, patch: bool = False) -> ApiError:
    """The API server's refusal of a request that must be refused."""
    content_type = "application/merge-patch+json" if patch else "application/json"
    with pytest.raises(ApiError) as caught:
        request(api, method, path, body, content_type)
    return caught.value


def pod_groups(namespace: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups"


def pod_group(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def job(name: str, group: str, cpu: str = "500m", memory: str = "256Mi") -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "parallelism": 1,
            "template": {
                "metadata": {"annotations": {GROUP_NAME_ANNOTATION: group}},
                "spec": {
                    "schedulerName": SCHEDULER,
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}},
                        }
                    ],
                },
            },
        },
    }


# --------------------------------------------------------------------------- fixtures
@dataclass
class Webhooks:
    """The running ``kbatch run`` and what the tests made (removed at the end)."""

    api: Any
    popen: subprocess.Popen[bytes]
    log: Path
    suffix: str
    job_suspend: bool  # whether the API server serves Job spec.suspend (its schema says)
    namespaces: list[str]
    queues: list[str]

    def namespace(self, stem: str) -> str:
        name = f"e2e-{stem}-{self.suffix}"
        request(self.api, "POST", "/api/v1/namespaces", {"metadata": {"name": name}})
        self.namespaces.append(name)
        return name

    def queue(self, stem: str, **spec: Any) -> str:
        name = f"e2e-{stem}-{self.suffix}"
        request(self.api, "POST", QUEUES, queue(name, **spec))
        self.queues.append(name)
        return name

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(30)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def install_crds(api: Any) -> None:
    names = []
    for path in sorted((REPO / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        names.append(crd["metadata"]["name"])
        try:
            request(api, "POST", CRDS, crd)
        except ApiError as exc:
            if exc.status != 409:
                raise

    def established() -> bool | None:
        for name in names:
            conditions = request(api, "GET", f"{CRDS}/{name}").get("status", {}).get("conditions")
            if not any(
                c["type"] == "Established" and c["status"] == "True" for c in conditions or []
            ):
                return None
        return True

    eventually("the CRDs are established", established)


@pytest.fixture(scope="module")
def webhooks(control_plane: Cluster) -> Iterator[Webhooks]:
    if os.environ.get(KUBECONFIG_ENV):
        pytest.skip(
            f"e2e: {KUBECONFIG_ENV} names an external cluster, whose API server cannot call "
            "a webhook server on this host's 127.0.0.1"
        )
    with control_plane.api_client() as api:
        install_crds(api)
        job_suspend, _ = job_suspend_support(api)
        assert job_suspend is not None, "the API server's OpenAPI schema is readable"
        (port,) = free_ports(1)
        workdir = Path(tempfile.mkdtemp(prefix="kbatch-e2e-webhooks-"))
        log = workdir / "kbatch-run.log"
        argv = [
            sys.executable, "-m", "kbatch.cli", "run",
            "--kubeconfig", str(control_plane.kubeconfig),
            "--webhook-address", f"127.0.0.1:{port}",
            "--manage-webhooks",
            "--no-leader-elect",
            "--scheduler-name", SCHEDULER,
            "--metrics-address", "",
            "--health-address", "",
        ]  # fmt: skip
        with log.open("wb") as handle:
            popen = subprocess.Popen(
                argv,
                stdout=handle,
                stderr=subprocess.STDOUT,
                cwd=workdir,  # not the checkout: its ./kbatch would shadow the installed layout
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        running = Webhooks(api, popen, log, secrets.token_hex(3), job_suspend, [], [])
        try:
            _wait_until_serving(running)
            yield running
        finally:
            running.stop()
            with contextlib.suppress(ApiError):
                configuration.remove(api)  # whatever happened, nothing is left failing closed
            for name in running.namespaces:
                with contextlib.suppress(ApiError):
                    request(api, "DELETE", f"/api/v1/namespaces/{name}")
            for name in running.queues:
                with contextlib.suppress(ApiError):
                    request(api, "DELETE", f"{QUEUES}/{name}")


def _wait_until_serving(running: Webhooks) -> None:
    """Until a PodGroup naming a missing queue is refused by our webhook (dry run)."""
    probe = pod_group("probe", queue="e2e-no-such-queue")

    def refused() -> str | None:
        if running.popen.poll() is not None:
            raise AssertionError(f"kbatch run exited:\n{tail(running.log)}")
        try:
            request(running.api, "POST", pod_groups("default") + "?dryRun=All", probe)
        except ApiError as exc:
            return str(exc) if "e2e-no-such-queue" in str(exc) else None
        return None

    try:
        eventually("kbatch's webhooks answer", refused, START_TIMEOUT)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- kbatch run ---\n{tail(running.log)}") from None


# --------------------------------------------------------------------------- configurations
def test_the_configurations_follow_the_contract(webhooks: Webhooks) -> None:
    for mutating, name in ((True, configuration.MUTATING), (False, configuration.VALIDATING)):
        body = request(webhooks.api, "GET", f"{configuration.PATHS[mutating]}/{name}")
        for hook in body["webhooks"]:
            assert hook["timeoutSeconds"] == 5
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:")
            assert hook["clientConfig"]["caBundle"]
        policies = {h["name"]: h["failurePolicy"] for h in body["webhooks"]}
        if mutating:
            assert policies == {
                "mutate-podgroup.kbatch.io": "Fail",
                "mutate-job.kbatch.io": "Ignore",
                "mutate-jobset.kbatch.io": "Ignore",
            }
        else:
            assert policies == {
                "validate-podgroup.kbatch.io": "Fail",
                "validate-queue.kbatch.io": "Fail",
                "validate-queue-delete.kbatch.io": "Fail",
            }


# --------------------------------------------------------------------------- validation
def test_min_member_below_one_is_refused(webhooks: Webhooks) -> None:
    ns = webhooks.namespace("minmember")
    refused = refusal(webhooks.api, "POST", pod_groups(ns), pod_group("g", minMember=0))
    # The CRD's schema (minimum: 1) refuses it before the validating webhook is asked.
    assert refused.status == 422 and "spec.minMember" in str(refused)
    request(webhooks.api, "POST", pod_groups(ns), pod_group("g", minMember=2))
    patched = refusal(
        webhooks.api, "PATCH", f"{pod_groups(ns)}/g", {"spec": {"minMember": 0}}, patch=True
    )
    assert patched.status == 422 and "spec.minMember" in str(patched)


def test_a_pod_group_in_a_missing_queue_is_refused(webhooks: Webhooks) -> None:
    ns = webhooks.namespace("noqueue")
    refused = refusal(webhooks.api, "POST", pod_groups(ns), pod_group("g", queue="e2e-nope"))
    assert refused.status == 422
    assert "spec.queue: queue 'e2e-nope' does not exist; create it or name another queue" in str(
        refused
    )


def test_a_closed_queue_admits_no_new_pod_groups(webhooks: Webhooks) -> None:
    ns = webhooks.namespace("closed")
    closed = webhooks.queue("closed", weight=1, state="Closed")
    open_ = webhooks.queue("open", weight=1)
    refused = refusal(webhooks.api, "POST", pod_groups(ns), pod_group("g", queue=closed))
    assert f"spec.queue: queue '{closed}' is Closed: it admits no new PodGroups" in str(refused)
    # nor may a group move into it
    request(webhooks.api, "POST", pod_groups(ns), pod_group("g", queue=open_))
    moved = refusal(
        webhooks.api, "PATCH", f"{pod_groups(ns)}/g", {"spec": {"queue": closed}}, patch=True
    )
    assert "is Closed" in str(moved)


def test_queue_weight_below_one_is_refused(webhooks: Webhooks) -> None:
    name = webhooks.queue("weight", weight=2)
    refused = refusal(
        webhooks.api, "PATCH", f"{QUEUES}/{name}", {"spec": {"weight": 0}}, patch=True
    )
    # The CRD's schema (minimum: 1) refuses it before the validating webhook is asked.
    assert refused.status == 422 and "spec.weight" in str(refused)


def test_the_default_queue_cannot_be_deleted(webhooks: Webhooks) -> None:
    eventually(
        "kbatch made the default queue", lambda: request(webhooks.api, "GET", f"{QUEUES}/default")
    )
    refused = refusal(webhooks.api, "DELETE", f"{QUEUES}/default")
    assert refused.status == 403
    assert "metadata.name: the default queue cannot be deleted" in str(refused)


def test_a_queue_with_pod_groups_cannot_be_deleted(webhooks: Webhooks) -> None:
    ns = webhooks.namespace("inuse")
    name = webhooks.queue("inuse")
    request(webhooks.api, "POST", pod_groups(ns), pod_group("g", queue=name))

    def refused() -> ApiError | None:
        """the PodGroup has reached kbatch's watch and the deletion is refused"""
        try:
            request(webhooks.api, "DELETE", f"{QUEUES}/{name}?dryRun=All")
        except ApiError as exc:
            return exc
        return None

    eventually("the deletion is refused", refused)
    error = refusal(webhooks.api, "DELETE", f"{QUEUES}/{name}")
    assert error.status == 403
    assert (
        f"queue '{name}' cannot be deleted: 1 PodGroup still names it in spec.queue ({ns}/g)"
        in str(error)
    )
    request(webhooks.api, "DELETE", f"{pod_groups(ns)}/g")

    def allowed() -> bool | None:
        try:
            request(webhooks.api, "DELETE", f"{QUEUES}/{name}?dryRun=All")
        except ApiError:
            return None
        return True

    eventually("the queue may be deleted once its PodGroup is gone", allowed)


# --------------------------------------------------------------------------- PodGroupMinResources
def test_min_resources_are_filled_from_the_groups_job(webhooks: Webhooks) -> None:
    ns = webhooks.namespace("minres")
    created = request(
        webhooks.api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job("train", "train")
    )
    assert created["metadata"]["labels"]["kbatch.io/pod-group"] == "train"  # the Job webhook ran
    group = request(webhooks.api, "POST", pod_groups(ns), pod_group("train", minMember=2))
    assert group["spec"]["minResources"] == {"cpu": "1", "memory": "512Mi", "pods": "2"}
    stored = request(webhooks.api, "GET", f"{pod_groups(ns)}/train")
    assert stored["spec"]["minResources"] == group["spec"]["minResources"]


def test_a_pod_group_made_before_its_job_is_filled_when_the_job_comes(webhooks: Webhooks) -> None:
    """kube-batch's usual order: the PodGroup first (nothing to fill it from yet)."""
    ns = webhooks.namespace("pgfirst")
    group = request(webhooks.api, "POST", pod_groups(ns), pod_group("train", minMember=2))
    assert "minResources" not in group["spec"]
    request(webhooks.api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job("train", "train"))

    def filled() -> dict[str, str] | None:
        current = request(webhooks.api, "GET", f"{pod_groups(ns)}/train")
        return current["spec"].get("minResources")

    assert eventually("minResources are filled", filled) == {
        "cpu": "1",
        "memory": "512Mi",
        "pods": "2",
    }


def test_a_job_kbatch_does_not_schedule_is_left_alone(webhooks: Webhooks) -> None:
    ns = webhooks.namespace("foreign")
    foreign = job("other", "other")
    foreign["spec"]["template"]["spec"]["schedulerName"] = "default-scheduler"
    created = request(webhooks.api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", foreign)
    assert "kbatch.io/pod-group" not in (created["metadata"].get("labels") or {})
    assert not created["spec"].get("suspend")


def test_past_a_resource_quota_a_pod_group_is_refused(webhooks: Webhooks) -> None:
    ns = webhooks.namespace("quota")
    quota = {"metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "4"}}}
    request(webhooks.api, "POST", f"/api/v1/namespaces/{ns}/resourcequotas", quota)
    request(webhooks.api, "POST", pod_groups(ns), pod_group("a", minResources={"cpu": "3"}))
    too_much = pod_group("b", minResources={"cpu": "1500m"})

    def refused() -> ApiError | None:
        """kbatch's watch has the quota and PodGroup a"""
        try:
            request(webhooks.api, "POST", pod_groups(ns) + "?dryRun=All", too_much)
        except ApiError as exc:
            return exc
        return None

    eventually("the quota is enforced", refused)
    error = refusal(webhooks.api, "POST", pod_groups(ns), too_much)
    assert error.status == 403
    assert (
        f"spec.minResources.cpu: the PodGroups of namespace {ns} would need 4500m "
        f"(3 for 1 other PodGroup + 1500m for this one), more than ResourceQuota "
        f"{ns}/compute allows (hard requests.cpu: 4)"
    ) in str(error)
    request(webhooks.api, "POST", pod_groups(ns), pod_group("b", minResources={"cpu": "1"}))


# --------------------------------------------------------------------------- enqueue
@pytest.mark.parametrize("filled_by", ["webhook", "scheduler"])
def test_a_gang_the_cluster_cannot_hold_is_not_admitted(webhooks: Webhooks, filled_by: str) -> None:
    """With the webhooks on, as without them (tests/e2e/test_scenarios_both.py, 'full') and
    in the simulator: minResources filled from the Job by the webhook, or taken from the
    pods by the scheduler when there is no Job, and the gang stays Pending."""
    ns = webhooks.namespace(f"full-{filled_by}")
    if filled_by == "webhook":
        # The Job first, so that the PodGroup is created with its minResources: made the
        # other way round, a session may admit the group (no minimum known, no pods yet)
        # before the Job comes and the controller fills them.
        huge = job("huge", "huge", cpu="100000")
        huge["spec"]["parallelism"] = 3
        request(webhooks.api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", huge)
        group = request(webhooks.api, "POST", pod_groups(ns), pod_group("huge", minMember=3))
        assert group["spec"]["minResources"]["cpu"] == "300000"
    else:  # the pods first for the same reason: the scheduler takes the minimum from them
        for i in range(3):
            body = job("huge", "huge", cpu="100000")["spec"]["template"]
            body = {"apiVersion": "v1", "kind": "Pod", **body}
            body["metadata"] = {**body["metadata"], "name": f"huge-{i}"}
            request(webhooks.api, "POST", f"/api/v1/namespaces/{ns}/pods", body)
        request(webhooks.api, "POST", pod_groups(ns), pod_group("huge", minMember=3))

    def not_admitted() -> str | None:
        status = request(webhooks.api, "GET", f"{pod_groups(ns)}/huge").get("status") or {}
        for condition in status.get("conditions") or []:
            if condition["type"] == "Unschedulable" and "not admitted" in condition["message"]:
                assert status.get("phase") == "Pending", status
                return str(condition["message"])
        return None

    message = eventually("the gang is told it is not admitted", not_admitted)
    assert "minResources exceed the cluster's free resources: cpu 300000 > " in message


# --------------------------------------------------------------------------- delayed pod creation
def test_without_job_suspend_delayed_pod_creation_is_skipped_saying_why_once(
    webhooks: Webhooks,
) -> None:
    if webhooks.job_suspend:
        pytest.skip("this API server has Job suspend: see the delayed pod creation test")
    ns = webhooks.namespace("nosuspend")
    created = request(webhooks.api, "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", job("j", "g"))
    assert not created["spec"].get("suspend")
    assert "kbatch.io/held" not in (created["metadata"].get("annotations") or {})
    lines = [line for line in webhooks.output().splitlines() if UNAVAILABLE in line]
    assert len(lines) == 1, lines
    assert "has no Job spec.suspend" in lines[0], lines


def test_delayed_pod_creation_holds_a_job_until_its_group_is_inqueue(webhooks: Webhooks) -> None:
    if not webhooks.job_suspend:
        pytest.skip(
            "this API server has no Job spec.suspend (on from Kubernetes 1.22): "
            "delayed pod creation cannot be seen on it"
        )
    ns = webhooks.namespace("delayed")
    jobs = f"/apis/batch/v1/namespaces/{ns}/jobs"
    created = request(webhooks.api, "POST", jobs, job("train", "train"))
    assert created["spec"]["suspend"] is True
    assert "PodGroup" in created["metadata"]["annotations"]["kbatch.io/held"]
    # Without minResources the group is admitted at once; the Job is then released.
    request(webhooks.api, "POST", pod_groups(ns), pod_group("train", minMember=1, minResources={}))

    def released() -> dict[str, Any] | None:
        current = request(webhooks.api, "GET", f"{jobs}/train")
        return current if current["spec"].get("suspend") is False else None

    current = eventually("the Job is released", released)
    assert "kbatch.io/held" not in (current["metadata"].get("annotations") or {})
    phase = request(webhooks.api, "GET", f"{pod_groups(ns)}/train")["status"]["phase"]
    assert phase in ("Inqueue", "Running")


# --------------------------------------------------------------------------- the end of a run
def test_a_stopped_run_leaves_no_configuration_behind(webhooks: Webhooks) -> None:
    webhooks.stop()
    assert webhooks.popen.returncode is not None
    for mutating, name in ((True, configuration.MUTATING), (False, configuration.VALIDATING)):
        with pytest.raises(ApiError) as gone:
            request(webhooks.api, "GET", f"{configuration.PATHS[mutating]}/{name}")
        assert gone.value.status == 404
