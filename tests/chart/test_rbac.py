"""kbatch run as the chart's ServiceAccount, with the chart's arguments, against a real
API server with its audit log on: the ClusterRole and Role are exactly what kbatch
uses — no request refused, every verb granted used.

kbatch runs here as a local process, but in the chart's place: the Deployment's
pod is bound to a Node and marked Running with this machine's address, so the
webhook Service's Endpoints lead the API server (routing to Endpoints, see
conftest.py) to the local kbatch, which serves the chart's certificate from its
Secret. So the admission webhooks answer real requests through the chart's
configurations, and what they need from the API shows up in the audit log too; so
does the visibility API, asked through the chart's APIService (the API server's
front proxy, the chart's certificate, the RoleBinding in kube-system).
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e import jobset
from e2e.controlplane import free_ports, host_ipv4

from chart import kube
from chart.kube import Plane, get
from chart.tools import CHART, helm, require_control_plane, require_tool
from kbatch.api import GROUP, VERSION
from kbatch.kubeapi import ApiError, request
from kbatch.webhooks.jobs import job_suspend_support

pytestmark = pytest.mark.e2e
require_tool("helm", module=True)
require_control_plane()

NS = "kbatch-rbac"  # the release's namespace and name
WORK_NS = "rbac-work"
NODE = "rbac-node"
SYSTEM_NODE = "rbac-system"  # where kbatch's own pod is "running"
PG = f"/apis/{GROUP}/{VERSION}"
JOBS = f"/apis/batch/v1/namespaces/{WORK_NS}/jobs"
# Granted for what only a server with Job spec.suspend lets kbatch do (resume a held Job).
NEEDS_JOB_SUSPEND = {("batch", "jobs", "patch")}
# Granted for upstream's PodGroups, used where the server serves them.
UPSTREAM = "/apis/scheduling.k8s.io/v1alpha3"
NEEDS_UPSTREAM_GROUPS = {
    ("scheduling.k8s.io", "podgroups", "list"),
    ("scheduling.k8s.io", "podgroups", "watch"),
    ("scheduling.k8s.io", "podgroups/status", "patch"),
}
# Granted for Dynamic Resource Allocation, used where the server serves resource.k8s.io/v1
# (1.34 on): listed and watched by kbatch's informers there, a claim read and written
# before a bind.
DRA = "/apis/resource.k8s.io/v1"
NEEDS_DRA = {
    ("resource.k8s.io", plural, verb)
    for plural in ("resourceclaims", "deviceclasses", "resourceslices")
    for verb in ("list", "watch")
} | {
    ("resource.k8s.io", "resourceclaims", "get"),
    ("resource.k8s.io", "resourceclaims/status", "update"),
}
# Asked of kbatch by the API server (1.35 on) when its status write changes a claim's
# allocation or reservedFor: an authorization check, never a request of its own.
CHECKED_NOT_REQUESTED = {("resource.k8s.io", "resourceclaims/binding", "update")}
# Granted for Volcano's PodGroups and Queues, used where Volcano's CRDs are installed
# (not here: the exemption below holds while they are not served).
VOLCANO = "/apis/scheduling.volcano.sh/v1beta1"
NEEDS_VOLCANO = {
    ("scheduling.volcano.sh", "podgroups", "list"),
    ("scheduling.volcano.sh", "podgroups", "watch"),
    ("scheduling.volcano.sh", "podgroups", "patch"),
    ("scheduling.volcano.sh", "queues", "list"),
    ("scheduling.volcano.sh", "queues", "watch"),
    ("scheduling.volcano.sh", "queues/status", "patch"),
}
# Granted for JobSets, used where JobSet's CRD is installed (from provision-jobset.sh's
# cache, before kbatch starts; its controller is not needed: kbatch patches the JobSet).
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2"
# The visibility API, through the chart's APIService: kbatch reads the API server's
# front-proxy CA with the built-in Role the chart binds it to in kube-system.
VISIBILITY = "/apis/visibility.kbatch.io/v1alpha1"
AUTH_READER_ROLE = (
    "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles/"
    "extension-apiserver-authentication-reader"
)
NEEDS_JOBSETS = {
    ("jobset.x-k8s.io", "jobsets", "list"),
    ("jobset.x-k8s.io", "jobsets", "watch"),
    ("jobset.x-k8s.io", "jobsets", "patch"),
}


# ----------------------------------------------------------------------------- objects
def pod(name: str, group: str, cpu: str, node: str) -> dict[str, Any]:
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
            "nodeSelector": {"kubernetes.io/hostname": node},
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


def batch_job(name: str, cpu: str | None = None) -> dict[str, Any]:
    """A Job of PodGroup ``name``: a pod on the system node, best-effort unless ``cpu``."""
    container: dict[str, Any] = {"name": "work", "image": "busybox"}
    if cpu is not None:
        container["resources"] = {"requests": {"cpu": cpu}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": WORK_NS},
        "spec": {
            "template": {
                "metadata": {"annotations": {"scheduling.k8s.io/group-name": name}},
                "spec": {
                    "schedulerName": "kbatch",
                    "restartPolicy": "Never",
                    "nodeSelector": {"kubernetes.io/hostname": SYSTEM_NODE},
                    "containers": [container],
                },
            }
        },
    }


# ----------------------------------------------------------------------------- kbatch in the chart's place
def service_account_kubeconfig(api: Any, admin: Path, target: Path) -> Path:
    """A kubeconfig of the chart's ServiceAccount, with a token from the TokenRequest API."""
    review = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": 3600},
    }
    path = f"/api/v1/namespaces/{NS}/serviceaccounts/{NS}/token"
    token = request(api, "POST", path, review)["status"]["token"]
    config = yaml.safe_load(admin.read_text())  # JSON or YAML
    config["users"] = [{"name": "kbatch-sa", "user": {"token": token}}]
    current = config.get("current-context") or config["contexts"][0]["name"]
    context = next(c for c in config["contexts"] if c["name"] == current)
    context["context"]["user"] = "kbatch-sa"
    target.write_text(json.dumps(config))
    target.chmod(0o600)
    return target


def stand_in_for_the_chart_pod(api: Any, address: str, webhook_port: int) -> None:
    """Bind the Deployment's pod and mark it Running at ``address``, so that the
    webhook Service's Endpoints are ``address:webhook_port``."""
    kube.ready_node(api, SYSTEM_NODE, {"cpu": "1", "memory": "4Gi", "pods": "110"}, [])
    selector = f"app.kubernetes.io/instance={NS}"

    def chart_pod() -> dict[str, Any] | None:
        listed = request(api, "GET", f"/api/v1/namespaces/{NS}/pods?labelSelector={selector}")
        return (listed["items"] or [None])[0]

    found = kube.poll("the chart's pod", chart_pod, 60)
    name = found["metadata"]["name"]
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": name, "namespace": NS},
        "target": {"apiVersion": "v1", "kind": "Node", "name": SYSTEM_NODE},
    }
    request(api, "POST", f"/api/v1/namespaces/{NS}/pods/{name}/binding", binding)
    status = {
        "phase": "Running",
        "hostIP": address,
        "podIP": address,
        "podIPs": [{"ip": address}],
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "ContainersReady", "status": "True"},
        ],
    }
    request(api, "PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status",
            {"status": status}, kube.MERGE)  # fmt: skip

    def routed() -> bool:
        endpoints = get(api, f"/api/v1/namespaces/{NS}/endpoints/{NS}-webhook") or {}
        return any(
            address in {a["ip"] for a in subset.get("addresses") or []}
            and webhook_port in {p["port"] for p in subset.get("ports") or []}
            for subset in endpoints.get("subsets") or []
        )

    kube.poll("the webhook Service's Endpoints", routed, 60)


def chart_args(api: Any, work: Path, address: str) -> list[str]:
    """The installed Deployment's arguments, with its mounts as local files and its
    addresses on this machine."""
    deployment = get(api, f"/apis/apps/v1/namespaces/{NS}/deployments/{NS}")
    assert deployment is not None
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    conf_map = get(api, f"/api/v1/namespaces/{NS}/configmaps/{NS}-scheduler-conf")
    secret = get(api, f"/api/v1/namespaces/{NS}/secrets/{NS}-webhook-tls")
    assert conf_map is not None and secret is not None
    (work / "scheduler.conf").write_text(conf_map["data"]["scheduler.conf"])
    certs = work / "webhook"
    certs.mkdir()
    for key, value in secret["data"].items():
        (certs / key).write_bytes(base64.b64decode(value))
    metrics, health = free_ports(2)
    local = {
        "--scheduler-conf": str(work / "scheduler.conf"),
        "--webhook-cert-dir": str(certs),
        "--visibility-cert-dir": str(certs),
        "--metrics-address": f"127.0.0.1:{metrics}",
        "--health-address": f"127.0.0.1:{health}",
    }
    args = []
    for arg in container["args"]:
        flag, _, value = arg.partition("=")
        if flag in ("--webhook-address", "--visibility-address"):
            value = f"{address}:{value.rpartition(':')[2]}"
        value = local.get(flag, value).replace("$(POD_NAMESPACE)", NS)
        args.append(f"{flag}={value}" if value else flag)
    return args


# ----------------------------------------------------------------------------- what kbatch does
def admission_works_through_the_chart(api: Any) -> None:
    """The webhooks answer: a PodGroup of a missing queue and the default queue's
    deletion are refused; a Job of a PodGroup is labelled with its group."""
    with pytest.raises(ApiError) as refused:
        request(api, "POST", f"{PG}/namespaces/{WORK_NS}/podgroups", pod_group("x", "nope", 1))
    assert "does not exist" in str(refused.value), refused.value
    with pytest.raises(ApiError) as kept:
        request(api, "DELETE", f"{PG}/queues/default")
    assert "default" in str(kept.value), kept.value
    kube.ensure(api, JOBS, batch_job("j"))
    kube.ensure(api, f"{PG}/namespaces/{WORK_NS}/podgroups", pod_group("j", "default", 1))
    labelled = get(api, f"{JOBS}/j") or {}
    assert labelled["metadata"].get("labels", {}).get("kbatch.io/pod-group") == "j", labelled
    # kube-batch's usual order: the PodGroup first, filled when its Job comes
    kube.ensure(api, f"{PG}/namespaces/{WORK_NS}/podgroups", pod_group("k", "default", 1))
    kube.ensure(api, JOBS, batch_job("k", cpu="100m"))

    def filled() -> bool:
        group = get(api, f"{PG}/namespaces/{WORK_NS}/podgroups/k") or {}
        return "minResources" in group.get("spec", {})

    kube.poll("PodGroup k's minResources filled from its Job", filled, 30)


def exercise_every_verb(api: Any, kbatch: kube.Process) -> None:
    """q1 fills a 4-cpu node with four one-pod groups: binds, status writes, events;
    then q2 asks for room, which reclaim takes back from q1 (a pod deleted)."""
    for name in ("q1", "q2"):
        kube.ensure(api, f"{PG}/queues", queue(name))
    exercise_volumes(api, kbatch)
    if dra_served(api):
        exercise_devices(api, kbatch)
    for i in range(4):
        kube.ensure(api, f"{PG}/namespaces/{WORK_NS}/podgroups", pod_group(f"a{i}", "q1", 1))
        kube.ensure(api, f"/api/v1/namespaces/{WORK_NS}/pods", pod(f"a{i}", f"a{i}", "1", NODE))
    q1_pods = {f"a{i}" for i in range(4)}

    def q1_bound() -> bool:
        """q1's own four, not any four: the Jobs' pods (on the system node) count too."""
        kube.mark_bound_pods_running(api, WORK_NS)
        pods = request(api, "GET", f"/api/v1/namespaces/{WORK_NS}/pods")["items"]
        return q1_pods <= {p["metadata"]["name"] for p in pods if p["spec"].get("nodeName")}

    kbatch.wait_until("q1's four pods bound", q1_bound)

    def status_written() -> bool:
        group = get(api, f"{PG}/namespaces/{WORK_NS}/podgroups/a0") or {}
        q1 = get(api, f"{PG}/queues/q1") or {}
        return (group.get("status") or {}).get("phase") == "Running" and bool(
            (q1.get("status") or {}).get("allocated")
        )

    kbatch.wait_until("PodGroup and Queue status written", status_written)
    exercise_visibility(api, kbatch)
    kube.ensure(api, f"{PG}/namespaces/{WORK_NS}/podgroups", pod_group("b", "q2", 1))
    for i in range(2):
        kube.ensure(api, f"/api/v1/namespaces/{WORK_NS}/pods", pod(f"b{i}", "b", "1", NODE))

    def reclaimed() -> bool:
        pods = request(api, "GET", f"/api/v1/namespaces/{WORK_NS}/pods")["items"]
        return sum(p["metadata"]["name"].startswith("a") for p in pods) < 4

    kbatch.wait_until("reclaim to delete one of q1's pods", reclaimed)
    # A Job labelled kbatch.io/queue that names no PodGroup: kbatch makes its group.
    labelled = batch_job("labelled")
    del labelled["spec"]["template"]["metadata"]
    labelled["metadata"]["labels"] = {"kbatch.io/queue": "q2"}
    kube.ensure(api, JOBS, labelled)
    group_path = f"{PG}/namespaces/{WORK_NS}/podgroups/labelled"
    kbatch.wait_until("the labelled Job's PodGroup made", lambda: get(api, group_path) is not None)
    if upstream_groups_served(api):
        exercise_upstream_groups(api, kbatch)
    if jobsets_served(api):
        exercise_jobsets(api, kbatch)
    events = request(api, "GET", f"/api/v1/namespaces/{WORK_NS}/events")["items"]
    assert "Scheduled" in {e["reason"] for e in events}
    lease = get(api, f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/kbatch")
    assert lease is not None and lease["spec"]["holderIdentity"]


def exercise_volumes(api: Any, kbatch: kube.Process) -> None:
    """A pod (asking no cpu: q1's four still fill the node) with two claims bound on first
    use: before its bind, kbatch binds a free PV to the first (a patch of the PV) and
    selects the node for the second's provisioner (a patch of the claim)."""
    classes = "/apis/storage.k8s.io/v1/storageclasses"
    for name, provisioner in (
        ("rbac-local", "kubernetes.io/no-provisioner"),
        ("rbac-made", "example.com/rbac-disks"),
    ):
        kube.ensure(
            api,
            classes,
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "StorageClass",
                "metadata": {"name": name},
                "provisioner": provisioner,
                "volumeBindingMode": "WaitForFirstConsumer",
            },
        )
        kube.ensure(
            api,
            f"/api/v1/namespaces/{WORK_NS}/persistentvolumeclaims",
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": WORK_NS},
                "spec": {
                    "storageClassName": name,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}},
                },
            },
        )
    kube.ensure(
        api,
        "/api/v1/persistentvolumes",
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "rbac-disk"},
            "spec": {
                "storageClassName": "rbac-local",
                "accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": "1Gi"},
                "hostPath": {"path": "/tmp/rbac-disk"},
            },
        },
    )
    kube.ensure(api, f"{PG}/namespaces/{WORK_NS}/podgroups", pod_group("v", "q1", 1))
    mounting = pod("v0", "v", "0", NODE)
    mounting["spec"]["volumes"] = [
        {"name": c, "persistentVolumeClaim": {"claimName": c}} for c in ("rbac-local", "rbac-made")
    ]
    kube.ensure(api, f"/api/v1/namespaces/{WORK_NS}/pods", mounting)

    def written() -> bool:
        disk = get(api, "/api/v1/persistentvolumes/rbac-disk") or {}
        made = get(api, f"/api/v1/namespaces/{WORK_NS}/persistentvolumeclaims/rbac-made") or {}
        selected = (made.get("metadata", {}).get("annotations") or {}).get(
            "volume.kubernetes.io/selected-node"
        )
        return ((disk.get("spec") or {}).get("claimRef") or {}).get("name") == "rbac-local" and (
            selected == NODE
        )

    kbatch.wait_until("the pod's claims bound and provisioned for its node", written)


def dra_served(api: Any) -> bool:
    """Does the server serve resource.k8s.io/v1 ResourceClaims (discovery)?"""
    try:
        resources = request(api, "GET", DRA).get("resources") or []
    except ApiError:
        return False
    return any(r.get("name") == "resourceclaims" for r in resources)


def exercise_devices(api: Any, kbatch: kube.Process) -> None:
    """A pod (asking no cpu) with a resource claim for the node's one device: before its
    bind, kbatch allocates the claim and reserves it for the pod (its status)."""
    driver = "gpu.rbac.example.com"
    selector = {"cel": {"expression": f'device.driver == "{driver}"'}}
    kube.ensure(api, f"{DRA}/deviceclasses", {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "rbac-gpu"}, "spec": {"selectors": [selector]},
    })  # fmt: skip
    kube.ensure(api, f"{DRA}/resourceslices", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "rbac-gpus"},
        "spec": {"driver": driver, "nodeName": NODE, "devices": [{"name": "gpu-0"}],
                 "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1}},
    })  # fmt: skip
    request_ = {"name": "gpu", "exactly": {"deviceClassName": "rbac-gpu"}}
    kube.ensure(api, f"{DRA}/namespaces/{WORK_NS}/resourceclaims", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "rbac-gpu", "namespace": WORK_NS},
        "spec": {"devices": {"requests": [request_]}},
    })  # fmt: skip
    kube.ensure(api, f"{PG}/namespaces/{WORK_NS}/podgroups", pod_group("d", "q1", 1))
    claiming = pod("d0", "d", "0", NODE)
    claiming["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "rbac-gpu"}]
    kube.ensure(api, f"/api/v1/namespaces/{WORK_NS}/pods", claiming)

    def allocated() -> bool:
        claim = get(api, f"{DRA}/namespaces/{WORK_NS}/resourceclaims/rbac-gpu") or {}
        return bool((claim.get("status") or {}).get("reservedFor"))

    kbatch.wait_until("the pod's claim allocated and reserved for it", allocated)


def exercise_visibility(api: Any, kbatch: kube.Process) -> None:
    """A0's explanation, asked through the API server: the chart's APIService and
    certificate, the API server's front proxy, kbatch's reading of the PodGroup's events."""
    path = f"{VISIBILITY}/namespaces/{WORK_NS}/podgroups/a0/explanation"

    def explained() -> bool:
        try:
            answer = request(api, "GET", path)
        except ApiError:
            return False
        return isinstance(answer, dict) and bool(answer)

    kbatch.wait_until("a0's explanation through the API server", explained)


def volcano_served(api: Any) -> bool:
    """Are Volcano's CRDs installed (discovery lists scheduling.volcano.sh/v1beta1)?"""
    try:
        resources = request(api, "GET", VOLCANO).get("resources") or []
    except ApiError:
        return False
    return any(r.get("name") == "podgroups" for r in resources)


def upstream_groups_served(api: Any) -> bool:
    """Does the server serve upstream's PodGroups at v1alpha3, which the test makes
    (discovery)? (kbatch watches v1beta1 first where that is served too.)"""
    try:
        resources = request(api, "GET", UPSTREAM).get("resources") or []
    except ApiError:
        return False
    return any(r.get("name") == "podgroups" for r in resources)


def exercise_upstream_groups(api: Any, kbatch: kube.Process) -> None:
    """An upstream PodGroup of one best-effort pod: watched, bound, its condition written."""
    group = {
        "apiVersion": "scheduling.k8s.io/v1alpha3",
        "kind": "PodGroup",
        "metadata": {"name": "up", "namespace": WORK_NS},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}},
    }
    kube.ensure(api, f"{UPSTREAM}/namespaces/{WORK_NS}/podgroups", group)
    member = pod("up-0", "", "0", NODE)
    del member["metadata"]["annotations"]
    member["spec"]["schedulingGroup"] = {"podGroupName": "up"}
    kube.ensure(api, f"/api/v1/namespaces/{WORK_NS}/pods", member)

    def told() -> bool:
        written = get(api, f"{UPSTREAM}/namespaces/{WORK_NS}/podgroups/up") or {}
        conditions = (written.get("status") or {}).get("conditions") or []
        return any(c["type"] == "PodGroupInitiallyScheduled" for c in conditions)

    kbatch.wait_until("the upstream PodGroup's condition written", told)


def jobsets_served(api: Any) -> bool:
    """Is JobSet's CRD installed (discovery)?"""
    try:
        resources = request(api, "GET", JOBSETS).get("resources") or []
    except ApiError:
        return False
    return any(r.get("name") == "jobsets" for r in resources)


def exercise_jobsets(api: Any, kbatch: kube.Process) -> None:
    """A labelled JobSet of one best-effort pod: indexed, held, its group made and
    admitted, the JobSet released with a patch (no JobSet controller needed)."""
    body = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "set", "namespace": WORK_NS, "labels": {"kbatch.io/queue": "q2"}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [{"name": "c", "image": "busybox"}],
                                }
                            }
                        }
                    },
                }
            ]
        },
    }
    path = f"{JOBSETS}/namespaces/{WORK_NS}/jobsets"
    kube.ensure(api, path, jobset.filled(body))

    def released() -> bool:
        current = get(api, f"{path}/set") or {}
        return (current.get("spec") or {}).get("suspend") is False

    kbatch.wait_until("the labelled JobSet released", released)


# ----------------------------------------------------------------------------- the audit
def granted(api: Any) -> set[tuple[str, str, str]]:
    """(api group, resource[/subresource], verb) the chart's roles grant."""
    rules = []
    for path in (
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{NS}",
        f"/apis/rbac.authorization.k8s.io/v1/namespaces/{NS}/roles/{NS}-leader",
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


def granted_by_kubernetes(api: Any) -> set[tuple[str, str, str]]:
    """What the built-in Role the chart binds kbatch to in kube-system grants (allowed,
    not the chart's to trim: kbatch gets the ConfigMap, the Role also lists it)."""
    role = get(api, AUTH_READER_ROLE)
    assert role is not None, AUTH_READER_ROLE
    return {
        (group, resource, verb)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def used_verbs(audit_log: Path, user: str) -> set[tuple[str, str, str]]:
    """(api group, resource[/subresource], verb) of ``user``'s requests; none refused."""
    requests = [
        event
        for event in map(json.loads, audit_log.read_text().splitlines())
        if event.get("user", {}).get("username") == user
    ]
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
        if "objectRef" in e  # the rest is discovery (/api, /apis/..., /version): open to all
    }


def serves_job_suspend(api: Any) -> bool:
    """Whether the API server serves Job spec.suspend, as kbatch learns it."""
    supported, why = job_suspend_support(api)
    assert supported is not None, why
    return supported


def webhooks_serve(api: Any) -> bool:
    """A dry-run Queue creation passes kbatch's validate-queue webhook (Fail)."""
    try:
        request(api, "POST", f"{PG}/queues?dryRun=All", queue("dry-run"))
    except ApiError:
        return False
    return True


# ----------------------------------------------------------------------------- the stand-in
@dataclass
class StandIn:
    api: Any
    kbatch: kube.Process
    grants: set[tuple[str, str, str]]
    default_queue_made_by_the_test: bool


@pytest.fixture(scope="module")
def stand_in(plane: Plane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandIn]:
    """The chart installed, kbatch running in its pod's place as its ServiceAccount."""
    if plane.audit_log is None:
        pytest.skip("e2e: an external cluster: no audit log or Endpoints routing of ours")
    address = host_ipv4()
    if address is None:
        pytest.skip("e2e: no non-loopback address for the API server to reach kbatch's webhooks")
    work = tmp_path_factory.mktemp("rbac")
    webhook_port, visibility_port = free_ports(2)
    # Without the chart's default Queue (and none left by another test): kbatch's leader
    # makes it, and so uses `create` (test_kbatch_makes_the_default_queue_with_its_webhooks_on).
    with plane.cluster.api_client() as api:
        kube.delete(api, f"{PG}/queues/default")
        # JobSets are exercised where JobSet can be had and Jobs can be held (a server
        # without Job spec.suspend holds no JobSet either, so none would be released).
        if serves_job_suspend(api):
            with contextlib.suppress(jobset.Unavailable):
                jobset.install_crd(api, jobset.assets())
    helm(
        "install", NS, str(CHART), "-n", NS, "--create-namespace",
        "--set", f"replicaCount=1,webhook.port={webhook_port},defaultQueue.create=false",
        "--set", f"visibility.port={visibility_port}",
        *plane.kubeconfig_args(),
    )  # fmt: skip
    with plane.cluster.api_client() as api:
        kbatch = None
        try:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORK_NS}}
            kube.ensure(api, "/api/v1/namespaces", namespace)
            kube.ready_node(api, NODE, {"cpu": "4", "memory": "16Gi", "pods": "110"}, [])
            stand_in_for_the_chart_pod(api, address, webhook_port)
            config = service_account_kubeconfig(api, plane.cluster.kubeconfig, work / "sa.conf")
            argv = [str(kube.KBATCH), "run", "--kubeconfig", str(config),
                    *chart_args(api, work, address), "--log-level=debug"]  # fmt: skip
            kbatch = kube.Process.start(
                "kbatch run as the chart's ServiceAccount", argv, work / "kbatch-run.log"
            )
            kbatch.wait_until("its webhooks to serve", lambda: webhooks_serve(api))
            made = not poll_quietly(lambda: get(api, f"{PG}/queues/default") is not None, 10)
            if made:  # see test_kbatch_makes_the_default_queue_with_its_webhooks_on
                kube.ensure(api, f"{PG}/queues", queue("default"))
            yield StandIn(api, kbatch, granted(api), made)
        finally:
            if kbatch is not None:
                kbatch.stop()
            helm("uninstall", NS, "-n", NS, *plane.kubeconfig_args())
            kube.delete(
                api,
                f"/api/v1/namespaces/{WORK_NS}",
                f"/api/v1/nodes/{NODE}",
                f"/api/v1/nodes/{SYSTEM_NODE}",
            )


def poll_quietly(check: Callable[[], bool], timeout: float) -> bool:
    """``check`` until true or ``timeout``: whether it came true."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


# ----------------------------------------------------------------------------- tests
def test_kbatch_makes_the_default_queue_with_its_webhooks_on(stand_in: StandIn) -> None:
    """Taking the lead before its own validate-queue webhook answers, kbatch's first try is
    refused; it tries again once the webhooks serve (kbatch.webhooks.server)."""
    assert not stand_in.default_queue_made_by_the_test


def test_admission_answers_through_the_charts_configurations(stand_in: StandIn) -> None:
    admission_works_through_the_chart(stand_in.api)


def test_kbatch_as_the_charts_service_account_uses_exactly_its_grants(
    plane: Plane, stand_in: StandIn
) -> None:
    api, kbatch = stand_in.api, stand_in.kbatch
    exercise_every_verb(api, kbatch)
    kbatch.stop()  # its watches end (the audit log has them once they complete)
    log = kbatch.log.read_text()
    assert "forbidden" not in log.lower(), log[-3000:]
    audit_log, user = plane.audit_log, f"system:serviceaccount:{NS}:{NS}"
    assert audit_log is not None
    exempt = set() if serves_job_suspend(api) else set(NEEDS_JOB_SUSPEND)
    if not upstream_groups_served(api):
        exempt |= NEEDS_UPSTREAM_GROUPS
    if not jobsets_served(api):
        exempt |= NEEDS_JOBSETS
    if not volcano_served(api):
        exempt |= NEEDS_VOLCANO
    if not dra_served(api):
        exempt |= NEEDS_DRA
    exempt |= CHECKED_NOT_REQUESTED
    if stand_in.default_queue_made_by_the_test:
        exempt.add((GROUP, "queues", "create"))
    unused: set[tuple[str, str, str]] = set()

    def all_used() -> bool:
        nonlocal unused
        used = used_verbs(audit_log, user)
        allowed = stand_in.grants | granted_by_kubernetes(api)
        assert used <= allowed, sorted(used - allowed)
        unused = stand_in.grants - used - exempt
        return not unused

    if not poll_quietly(all_used, 10):
        pytest.fail(f"granted but never used: {sorted(unused)}")
