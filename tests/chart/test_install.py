"""`helm install` / `helm uninstall` against a real API server, and kbatch run as the
chart's ServiceAccount: the ClusterRole and Role are exactly what kbatch uses.

The control plane is the e2e suite's (tests/e2e/controlplane.py), started here
on its own with the API server's audit log on, so that the test sees every
request kbatch makes: none may be refused (403), and every verb the chart
grants must have been used. Its webhook configurations (failurePolicy Fail,
no kbatch pod behind them: there is no kubelet) stay out of the other e2e
tests' cluster. With ``KBATCH_E2E_KUBECONFIG`` the cluster named there is used
instead, and the audit checks are skipped.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e.controlplane import Cluster, ControlPlane, discover, free_ports

from chart import kube
from chart.tools import CHART, helm, require_control_plane, require_tool
from kbatch.api import GROUP, VERSION
from kbatch.operators.scheduler.kube import ApiError, request

pytestmark = pytest.mark.e2e
require_tool("helm", module=True)
require_control_plane()

AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
"""
PG = f"/apis/{GROUP}/{VERSION}"


@dataclass(frozen=True)
class Plane:
    cluster: Cluster
    audit_log: Path | None  # None: an external cluster, not audited here


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Plane]:
    source = discover()
    if isinstance(source, Cluster):
        yield Plane(source, None)
        return
    work = tmp_path_factory.mktemp("chart-install")
    (work / "audit-policy.yaml").write_text(AUDIT_POLICY)
    audit_log = work / "audit.log"
    audited = ControlPlane(
        source.binaries,
        extra_apiserver_args=[
            f"--audit-policy-file={work / 'audit-policy.yaml'}",
            f"--audit-log-path={audit_log}",
        ],
        workdir=work / "plane",
    )
    with audited as cluster:
        yield Plane(cluster, audit_log)


def kubeconfig_args(plane: Plane) -> list[str]:
    return ["--kubeconfig", str(plane.cluster.kubeconfig)]


def get(api: Any, path: str) -> dict[str, Any] | None:
    try:
        return request(api, "GET", path)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise


# Every object of a default install, where the API serves it.
def installed_paths(ns: str, release: str) -> list[str]:
    return [
        f"/api/v1/namespaces/{ns}/serviceaccounts/{release}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{release}",
        f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{release}",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles/{release}-leader",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings/{release}-leader",
        f"/api/v1/namespaces/{ns}/configmaps/{release}-scheduler-conf",
        f"/api/v1/namespaces/{ns}/configmaps/{release}-dashboard-scheduler",
        f"/api/v1/namespaces/{ns}/configmaps/{release}-dashboard-queues",
        f"/apis/apps/v1/namespaces/{ns}/deployments/{release}",
        f"/api/v1/namespaces/{ns}/services/{release}-metrics",
        f"/api/v1/namespaces/{ns}/services/{release}-webhook",
        f"/api/v1/namespaces/{ns}/secrets/{release}-webhook-tls",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kbatch-mutating",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/kbatch-validating",
    ]


def notes_manifests(output: str) -> list[dict[str, Any]]:
    """The YAML of NOTES.txt's first gang job (the heredoc), de-indented."""
    match = re.search(r"<<'YAML' \| kubectl apply -f -\n(.*?)\n\s*YAML\n", output, re.DOTALL)
    assert match, output
    lines = match.group(1).splitlines()
    indent = min(len(line) - len(line.lstrip()) for line in lines if line.strip())
    return [d for d in yaml.safe_load_all("\n".join(line[indent:] for line in lines)) if d]


def assert_first_gang_job_schedules(notes: str, tmp_path: Path) -> None:
    """NOTES.txt's first gang job, run through the simulator with a node, runs."""
    manifests = notes_manifests(notes)
    assert {m["kind"] for m in manifests} == {"PodGroup", "Job"}
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {
            "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    (tmp_path / "first-gang.yaml").write_text(yaml.safe_dump_all([node, *manifests]))
    result = subprocess.run(
        [str(kube.KBATCH), "simulate", str(tmp_path / "first-gang.yaml"), "--output", "json",
         "--until", "30s"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    (group,) = json.loads(result.stdout)["podGroups"]
    assert group["name"] == "first-gang"
    assert group["phase"] in ("Running", "Completed"), group


def test_install_upgrade_and_uninstall_the_default_chart(plane: Plane, tmp_path: Path) -> None:
    ns, release = "kbatch-system", "kbatch"
    out = helm(
        "install", release, str(CHART), "-n", ns, "--create-namespace", *kubeconfig_args(plane)
    ).stdout
    assert "STATUS: deployed" in out
    with plane.cluster.api_client() as api:
        missing = [p for p in installed_paths(ns, release) if get(api, p) is None]
        assert not missing, missing
        # policy/v1 from Kubernetes 1.21, policy/v1beta1 before (the e2e plane is 1.20)
        pdb = "/apis/policy/{}/namespaces/" + ns + "/poddisruptionbudgets/" + release
        assert get(api, pdb.format("v1")) or get(api, pdb.format("v1beta1"))
        for crd in ("podgroups", "queues"):
            name = f"{crd}.{GROUP}"
            assert get(api, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        deployment = get(api, f"/apis/apps/v1/namespaces/{ns}/deployments/{release}")
        assert deployment is not None and deployment["spec"]["replicas"] == 2
        webhook = get(
            api,
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/kbatch-mutating",
        )
        assert webhook is not None
        ca = webhook["webhooks"][0]["clientConfig"]["caBundle"]
        secret = get(api, f"/api/v1/namespaces/{ns}/secrets/{release}-webhook-tls")
        assert secret is not None and secret["data"]["ca.crt"] == ca

        # An upgrade keeps the generated certificate (read back with `lookup`).
        helm("upgrade", release, str(CHART), "-n", ns, *kubeconfig_args(plane))
        again = get(api, f"/api/v1/namespaces/{ns}/secrets/{release}-webhook-tls")
        assert again is not None and again["data"] == secret["data"]

        # A wrong value fails the install with the schema's message.
        bad = helm(
            "install", "bad", str(CHART), "-n", ns, "--set", "webhook.certificate.source=vault",
            *kubeconfig_args(plane), check=False,
        )  # fmt: skip
        assert bad.returncode != 0
        assert "webhook.certificate.source must be one of the following" in bad.stderr

        helm("uninstall", release, "-n", ns, *kubeconfig_args(plane))
        left = [p for p in installed_paths(ns, release) if get(api, p) is not None]
        assert not left, left

    assert_first_gang_job_schedules(out, tmp_path)


# ----------------------------------------------------------------------------- RBAC
RBAC_NS = "kbatch-rbac"
RBAC_RELEASE = "kbatch-rbac"
WORK_NS = "rbac-work"
NODE = "rbac-node"


def service_account_kubeconfig(api: Any, admin: Path, target: Path) -> Path:
    """A kubeconfig of the chart's ServiceAccount, with a token from the TokenRequest API."""
    review = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    path = f"/api/v1/namespaces/{RBAC_NS}/serviceaccounts/{RBAC_RELEASE}/token"
    token = request(api, "POST", path, review)["status"]["token"]
    config = yaml.safe_load(admin.read_text())  # JSON or YAML
    config["users"] = [{"name": "kbatch-sa", "user": {"token": token}}]
    current = config.get("current-context") or config["contexts"][0]["name"]
    context = next(c for c in config["contexts"] if c["name"] == current)
    context["context"]["user"] = "kbatch-sa"
    target.write_text(json.dumps(config))
    target.chmod(0o600)
    return target


def chart_args(api: Any, conf_file: Path, metrics: int, health: int) -> list[str]:
    """The installed Deployment's arguments, with local files and ports."""
    deployment = get(api, f"/apis/apps/v1/namespaces/{RBAC_NS}/deployments/{RBAC_RELEASE}")
    assert deployment is not None
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    conf_map = get(api, f"/api/v1/namespaces/{RBAC_NS}/configmaps/{RBAC_RELEASE}-scheduler-conf")
    assert conf_map is not None
    conf_file.write_text(conf_map["data"]["scheduler.conf"])
    args = []
    for arg in container["args"]:
        flag = arg.partition("=")[0]
        arg = {
            "--scheduler-conf": f"--scheduler-conf={conf_file}",
            "--metrics-address": f"--metrics-address=127.0.0.1:{metrics}",
            "--health-address": f"--health-address=127.0.0.1:{health}",
        }.get(flag, arg)
        args.append(arg.replace("$(POD_NAMESPACE)", RBAC_NS))
    return args


def pod(name: str, group: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": WORK_NS,
            "annotations": {"scheduling.k8s.io/group-name": group},
        },
        "spec": {
            "schedulerName": "kbatch",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {"name": "work", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
            ],
        },
    }


def pod_group(name: str, queue: str, members: int) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": WORK_NS},
        "spec": {"minMember": members, "queue": queue},
    }


def queue(name: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1},
    }


def granted(api: Any) -> set[tuple[str, str, str]]:
    """(api group, resource[/subresource], verb) the chart's roles grant."""
    rules = []
    for path in (
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{RBAC_RELEASE}",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{RBAC_NS}/roles/{RBAC_RELEASE}-leader",
    ):
        role = get(api, path)
        assert role is not None, path
        rules += role["rules"]
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def audited_requests(audit_log: Path, user: str) -> list[dict[str, Any]]:
    events = []
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") == user:
            events.append(event)
    return events


def submit_queue_q1_filling_the_node(api: Any) -> None:
    """q1 fills a 4-cpu node with four one-pod groups."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORK_NS}}
    kube.ensure(api, "/api/v1/namespaces", namespace)
    kube.ready_node(api, NODE, {"cpu": "4", "memory": "16Gi", "pods": "110"}, [])
    for name in ("q1", "q2"):
        kube.ensure(api, f"{PG}/queues", queue(name))
    for i in range(4):
        kube.ensure(api, f"{PG}/namespaces/{WORK_NS}/podgroups", pod_group(f"a{i}", "q1", 1))
        kube.ensure(api, f"/api/v1/namespaces/{WORK_NS}/pods", pod(f"a{i}", f"a{i}", "1"))


def exercise_every_verb(api: Any, kbatch: kube.Process) -> None:
    """Binds, status writes, events, the default queue, the Lease; then q2 asks for
    half the node, which reclaim takes back from q1 (pods deleted)."""
    kbatch.wait_until(
        "q1's four pods bound", lambda: kube.mark_bound_pods_running(api, WORK_NS) == 4
    )

    def status_written() -> bool:
        group = get(api, f"{PG}/namespaces/{WORK_NS}/podgroups/a0") or {}
        q1 = get(api, f"{PG}/queues/q1") or {}
        return (group.get("status") or {}).get("phase") == "Running" and bool(
            (q1.get("status") or {}).get("allocated")
        )

    kbatch.wait_until("PodGroup and Queue status written", status_written)
    kube.ensure(api, f"{PG}/namespaces/{WORK_NS}/podgroups", pod_group("b", "q2", 2))
    for i in range(2):
        kube.ensure(api, f"/api/v1/namespaces/{WORK_NS}/pods", pod(f"b{i}", "b", "1"))

    def reclaimed() -> bool:
        pods = request(api, "GET", f"/api/v1/namespaces/{WORK_NS}/pods")["items"]
        return sum(p["metadata"]["name"].startswith("a") for p in pods) <= 2

    kbatch.wait_until("reclaim to delete two of q1's pods", reclaimed)
    events = request(api, "GET", f"/api/v1/namespaces/{WORK_NS}/events")["items"]
    assert "Scheduled" in {e["reason"] for e in events}
    assert get(api, f"{PG}/queues/default") is not None  # created by kbatch
    lease = get(api, f"/apis/coordination.k8s.io/v1/namespaces/{RBAC_NS}/leases/kbatch")
    assert lease is not None and lease["spec"]["holderIdentity"]


def used_verbs(audit_log: Path, user: str) -> set[tuple[str, str, str]]:
    """(api group, resource[/subresource], verb) of ``user``'s requests; none refused."""
    requests = audited_requests(audit_log, user)
    assert requests, f"no request of {user} in {audit_log}"
    refused = {
        f"{e['verb']} {e['requestURI']}"
        for e in requests
        if e.get("responseStatus", {}).get("code") == 403
    }
    assert not refused, sorted(refused)
    return {
        (
            e["objectRef"].get("apiGroup", ""),
            e["objectRef"]["resource"]
            + (f"/{e['objectRef']['subresource']}" if e["objectRef"].get("subresource") else ""),
            e["verb"],
        )
        for e in requests
        if "objectRef" in e  # the rest is discovery (/api, /apis/...), open to everyone
    }


def test_kbatch_as_the_charts_service_account_uses_exactly_its_grants(
    plane: Plane, tmp_path: Path
) -> None:
    helm(
        "install", RBAC_RELEASE, str(CHART), "-n", RBAC_NS, "--create-namespace",
        "--set", "webhook.enabled=false", *kubeconfig_args(plane),
    )  # fmt: skip
    with plane.cluster.api_client() as api:
        submit_queue_q1_filling_the_node(api)
        config = service_account_kubeconfig(api, plane.cluster.kubeconfig, tmp_path / "sa.conf")
        metrics, health = free_ports(2)
        argv = [
            str(kube.KBATCH), "run", "--kubeconfig", str(config),
            *chart_args(api, tmp_path / "scheduler.conf", metrics, health),
            "--log-level=debug",
        ]  # fmt: skip
        kbatch = kube.Process.start("kbatch run as the chart's ServiceAccount", argv,
                                    tmp_path / "kbatch-run.log")  # fmt: skip
        try:
            exercise_every_verb(api, kbatch)
            grants = granted(api)
        finally:
            kbatch.stop()  # gives the Lease back (an update)
            helm("uninstall", RBAC_RELEASE, "-n", RBAC_NS, *kubeconfig_args(plane))
            pods = ("a0", "a1", "a2", "a3", "b0", "b1")
            kube.delete(
                api,
                *(f"/api/v1/namespaces/{WORK_NS}/pods/{name}" for name in pods),
                f"/api/v1/nodes/{NODE}",
            )
    log = kbatch.log.read_text()
    assert "forbidden" not in log.lower(), log[-3000:]
    if plane.audit_log is None:
        return  # an external cluster: its audit log is not ours to read
    used = used_verbs(plane.audit_log, f"system:serviceaccount:{RBAC_NS}:{RBAC_RELEASE}")
    assert used <= grants, sorted(used - grants)
    assert grants <= used, f"granted but never used: {sorted(grants - used)}"
