"""`helm install`, `helm upgrade` and `helm uninstall` of the default chart against a
real API server (tests/chart/conftest.py's): every object is accepted and made,
the default Queue too although the webhooks (failing closed) have nobody to ask,
an upgrade keeps the generated webhook certificate, a wrong value fails with the
schema's message, the uninstall removes everything but the CRDs and the default
Queue. There is no kubelet, so kbatch's pods never run: the objects are what is
checked. NOTES.txt's first gang job is run through the simulator. The visibility
API's APIService is taken (and reported unavailable: nobody serves it), and its RBAC
asked of the API server (SubjectAccessReviews): kbatch reads the front-proxy CA,
viewers read explanations.
"""

from __future__ import annotations

import base64
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from chart import kube
from chart.kube import Plane, get
from chart.tools import CHART, helm, require_control_plane, require_tool
from kbatch.api import GROUP, VERSION
from kbatch.kubeapi import ApiError, request
from kbatch.operators.queue.controller import DEFAULT_QUEUE_OBJECT
from kbatch.webhooks import configuration

pytestmark = pytest.mark.e2e
require_tool("helm", module=True)
require_control_plane()

QUEUES = f"/apis/{GROUP}/{VERSION}/queues"
API_SERVICE = "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.visibility.kbatch.io"
REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CLUSTER_VIEWER = "kbatch-test-cluster-viewer"  # a ClusterRoleBinding to "view"
CLUSTER_BINDINGS = "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings"
DEFAULT_QUEUE = f"{QUEUES}/default"


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
        API_SERVICE,
        f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{release}-visibility-reader",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings/"
        f"{release}-visibility-auth-reader",
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


def without_a_default_queue(api: Any) -> None:
    """No Queue "default" (left by another test; no webhook may refuse its deletion)."""
    kube.delete(api, DEFAULT_QUEUE)
    kube.poll("no default queue", lambda: get(api, DEFAULT_QUEUE) is None, 30)


def refusal(api: Any, method: str, path: str, body: Any = None) -> str:
    """Why the API server refused the request ("" if it did not)."""
    try:
        request(api, method, path, body)
    except ApiError as exc:
        return str(exc)
    return ""


def assert_the_charts_default_queue(api: Any, release: str) -> None:
    """The default Queue is the chart's, and only it passes the Queue webhook, which
    has nobody to answer it (no kbatch pod runs): fail closed, others are refused."""
    queue = get(api, DEFAULT_QUEUE)
    assert queue is not None, "no default queue right after helm install"
    assert queue["spec"] == DEFAULT_QUEUE_OBJECT["spec"]
    assert queue["metadata"]["labels"][configuration.DEFAULT_QUEUE_LABEL] == "true"
    assert queue["metadata"]["annotations"]["meta.helm.sh/release-name"] == release
    other = {**DEFAULT_QUEUE_OBJECT, "metadata": {"name": "other"}}
    assert "validate-queue.kbatch.io" in refusal(api, "POST", f"{QUEUES}?dryRun=All", other)
    deleted = refusal(api, "DELETE", f"{DEFAULT_QUEUE}?dryRun=All")
    assert "validate-queue-delete.kbatch.io" in deleted  # deletion is still asked


def test_install_upgrade_and_uninstall_the_default_chart(plane: Plane, tmp_path: Path) -> None:
    ns, release = "kbatch-system", "kbatch"
    with plane.cluster.api_client() as api:
        without_a_default_queue(api)
    out = helm(
        "install", release, str(CHART), "-n", ns, "--create-namespace", *plane.kubeconfig_args()
    ).stdout
    assert "STATUS: deployed" in out
    with plane.cluster.api_client() as api:
        missing = [p for p in installed_paths(ns, release) if get(api, p) is None]
        assert not missing, missing
        assert_the_charts_default_queue(api, release)
        # policy/v1 where the server serves it (1.21 on), else policy/v1beta1 (1.20)
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
        helm("upgrade", release, str(CHART), "-n", ns, *plane.kubeconfig_args())
        again = get(api, f"/api/v1/namespaces/{ns}/secrets/{release}-webhook-tls")
        assert again is not None and again["data"] == secret["data"]
        assert_the_charts_default_queue(api, release)

        # A wrong value fails the install with the schema's message.
        bad = helm(
            "install", "bad", str(CHART), "-n", ns, "--set", "webhook.certificate.source=vault",
            *plane.kubeconfig_args(), check=False,
        )  # fmt: skip
        assert bad.returncode != 0
        assert "webhook.certificate.source must be one of the following" in bad.stderr

        helm("uninstall", release, "-n", ns, *plane.kubeconfig_args())
        left = [p for p in installed_paths(ns, release) if get(api, p) is not None]
        assert not left, left
        assert get(api, DEFAULT_QUEUE) is not None  # kept, like the CRDs
        without_a_default_queue(api)  # allowed now: no webhook is left to refuse it

    assert_first_gang_job_schedules(out, tmp_path)


def test_the_default_queue_is_taken_back_or_left_alone(plane: Plane) -> None:
    """The release installed again takes back the default Queue its uninstall kept; a
    "default" Queue someone else made (here as kbatch's leader does) is left as it is:
    Helm could not adopt it, and the install must not fail for it."""
    ns, release = "kbatch-queue", "kbatch-queue"
    install = ("install", release, str(CHART), "-n", ns, "--create-namespace")
    uninstall = ("uninstall", release, "-n", ns)
    with plane.cluster.api_client() as api:
        without_a_default_queue(api)
        try:
            helm(*install, *plane.kubeconfig_args())
            helm(*uninstall, *plane.kubeconfig_args())
            kept = get(api, DEFAULT_QUEUE)
            assert kept is not None
            helm(*install, *plane.kubeconfig_args())
            assert_the_charts_default_queue(api, release)
            helm(*uninstall, *plane.kubeconfig_args())
            without_a_default_queue(api)

            request(api, "POST", QUEUES, DEFAULT_QUEUE_OBJECT)  # kbatch's, no Helm labels
            helm(*install, *plane.kubeconfig_args())
            theirs = get(api, DEFAULT_QUEUE)
            assert theirs is not None
            assert configuration.DEFAULT_QUEUE_LABEL not in (theirs["metadata"].get("labels") or {})
            helm(*uninstall, *plane.kubeconfig_args())
            assert get(api, DEFAULT_QUEUE) is not None  # not the release's to delete
        finally:
            helm(*uninstall, *plane.kubeconfig_args(), check=False)
            without_a_default_queue(api)


def certificate(work: Path) -> str:
    """A self-signed certificate, PEM, base64-encoded as a webhook's caBundle."""
    key, cert = work / "ca.key", work / "ca.crt"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=kbatch-dead-run", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return base64.b64encode(cert.read_bytes()).decode()


def test_a_killed_local_runs_configurations_are_removed_the_charts_never(
    plane: Plane, tmp_path: Path
) -> None:
    """What ``kbatch run --manage-webhooks`` does at start (configuration.remove_stale),
    against a real API server: the configurations a killed run left (at a dead address)
    go; the chart's, of the same names, stay."""
    ns, release = "kbatch-stale", "kbatch-stale"
    # A CA bundle the API server can read (newer servers parse it before they connect),
    # so that what refuses is the dead address.
    dead = {"url": "https://127.0.0.1:1", "caBundle": certificate(tmp_path)}
    paths = [f"{configuration.PATHS[m]}/{name}" for m, name in configuration.NAMES]
    with plane.cluster.api_client() as api:
        try:
            helm("install", release, str(CHART), "-n", ns, "--create-namespace",
                 "--set", "defaultQueue.create=false", *plane.kubeconfig_args())  # fmt: skip
            charts = [get(api, path) for path in paths]
            assert configuration.remove_stale(api) == []
            assert [get(api, path) for path in paths] == charts
            helm("uninstall", release, "-n", ns, *plane.kubeconfig_args())

            configuration.apply(api, configuration.configurations(dead))
            left = {**DEFAULT_QUEUE_OBJECT, "metadata": {"name": "left"}}
            # the API server takes up a new configuration within a moment, not at once
            kube.poll(
                "the dead configuration refusing Queues",
                lambda: "connection refused" in refusal(api, "POST", f"{QUEUES}?dryRun=All", left),
                30,
            )
            assert configuration.remove_stale(api) == ["kbatch-mutating", "kbatch-validating"]
            assert [get(api, path) for path in paths] == [None, None]
        finally:
            helm("uninstall", release, "-n", ns, *plane.kubeconfig_args(), check=False)
            configuration.remove(api)


def allowed(api: Any, user: str, groups: list[str], attributes: dict[str, str]) -> bool:
    """The API server's answer to a SubjectAccessReview of ``user``."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": groups, "resourceAttributes": attributes},
    }
    return bool(request(api, "POST", REVIEWS, review)["status"].get("allowed"))


def front_proxy_ca_readable(api: Any, ns: str, name: str) -> bool:
    """kbatch's ServiceAccount may read the front-proxy CA's ConfigMap, and no other."""
    account = (f"system:serviceaccount:{ns}:{name}",
               ["system:serviceaccounts", f"system:serviceaccounts:{ns}"])  # fmt: skip
    config_map = {"verb": "get", "resource": "configmaps", "namespace": "kube-system"}
    other = allowed(api, *account, {**config_map, "name": "kube-proxy"})
    assert not other, "kbatch may read other ConfigMaps of kube-system"
    return allowed(api, *account, {**config_map, "name": "extension-apiserver-authentication"})


def viewer_may_explain(api: Any, ns: str) -> bool:
    """The user "viewer", bound to the built-in "view" in ``ns``, may get an explanation
    and list the waiting jobs there (the readers' ClusterRole aggregated to view)."""
    explanation = {"group": "visibility.kbatch.io", "resource": "podgroups",
                   "subresource": "explanation", "verb": "get", "namespace": ns}  # fmt: skip
    waiting = {"group": "visibility.kbatch.io", "resource": "waitingjobs", "verb": "list",
               "namespace": ns}  # fmt: skip
    return all(allowed(api, "viewer", [], attrs) for attrs in (explanation, waiting))


def cluster_viewer_may_list_queues(api: Any) -> bool:
    """The user "cluster-viewer", bound to "view" cluster-wide, may list the queues'
    summaries (cluster-scoped, as Queues are: a namespace's binding does not reach them)."""
    summaries = {"group": "visibility.kbatch.io", "resource": "queuesummaries", "verb": "list"}
    return allowed(api, "cluster-viewer", [], summaries)


def view_binding(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "viewer", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": "viewer"}],
    }  # fmt: skip


def cluster_view_binding() -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": CLUSTER_VIEWER},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": "cluster-viewer"}],
    }  # fmt: skip


def test_the_visibility_api_is_registered_and_its_rbac_granted(plane: Plane) -> None:
    """The API server takes the chart's APIService (with the generated CA) and reports
    it unavailable while no kbatch serves it; kbatch may read the front-proxy CA; whoever
    may view a namespace may read its explanations, whoever may view the cluster its
    queues' summaries; uninstalled, all of it is gone."""
    ns, release = "kbatch-visibility", "kbatch-visibility"
    bindings = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings"
    with plane.cluster.api_client() as api:
        try:
            helm("install", release, str(CHART), "-n", ns, "--create-namespace",
                 "--set", "defaultQueue.create=false", *plane.kubeconfig_args())  # fmt: skip
            service = get(api, API_SERVICE)
            secret = get(api, f"/api/v1/namespaces/{ns}/secrets/{release}-webhook-tls")
            assert service is not None and secret is not None
            assert service["spec"]["caBundle"] == secret["data"]["ca.crt"]
            assert service["spec"]["service"]["name"] == f"{release}-webhook"

            def unavailable() -> bool:
                conditions = (get(api, API_SERVICE) or {}).get("status", {}).get("conditions")
                return any(c["type"] == "Available" and c["status"] == "False"
                           for c in conditions or [])  # fmt: skip

            kube.poll("the APIService reported unavailable", unavailable, 60)
            assert front_proxy_ca_readable(api, ns, release)
            kube.ensure(api, bindings, view_binding(ns))
            kube.ensure(api, CLUSTER_BINDINGS, cluster_view_binding())
            if plane.cluster.controllers:  # the aggregation controller fills "view"
                kube.poll("a viewer may read explanations", lambda: viewer_may_explain(api, ns))
                kube.poll("a cluster viewer may list queues",
                          lambda: cluster_viewer_may_list_queues(api))  # fmt: skip
            helm("uninstall", release, "-n", ns, *plane.kubeconfig_args())
            assert get(api, API_SERVICE) is None
            assert not front_proxy_ca_readable(api, ns, release)
            if plane.cluster.controllers:
                kube.poll("a viewer no longer may", lambda: not viewer_may_explain(api, ns))
                kube.poll("a cluster viewer no longer may",
                          lambda: not cluster_viewer_may_list_queues(api))  # fmt: skip
        finally:
            helm("uninstall", release, "-n", ns, *plane.kubeconfig_args(), check=False)
            kube.delete(api, f"{bindings}/viewer", f"{CLUSTER_BINDINGS}/{CLUSTER_VIEWER}")
