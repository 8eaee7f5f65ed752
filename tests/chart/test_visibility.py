"""The chart's visibility API, rendered: the APIService ``v1alpha1.visibility.kbatch.io``
behind the webhook Service's port ``visibility``, with the webhook's certificate (made,
given or cert-manager's); kbatch started to serve it there; the RoleBinding that lets
kbatch read the API server's front-proxy CA and the readers' ClusterRole aggregated to
``view``. Off, none of it renders; with the webhooks off, all of it still does.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from chart.test_chart import (
    API_SERVICE,
    AUTH_READER,
    NS,
    READER_RULES,
    assert_schema_refuses,
    container,
    port_of,
    rules_of,
    webhooks,
)
from chart.tools import CHART, by_kind, helm, one, require_tool, template

require_tool("helm", module=True)

READER = "kbatch-visibility-reader"


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    return template()


def api_service(objects: list[dict[str, Any]]) -> dict[str, Any]:
    return one(objects, "APIService", API_SERVICE)


def service_port(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    service = one(objects, "Service", "kbatch-webhook")
    return next(p for p in service["spec"]["ports"] if p["name"] == name)


def cert_dir_mount(objects: list[dict[str, Any]]) -> str:
    """Where the Deployment mounts the Secret of the serving certificate."""
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "webhook-tls")
    assert volume["secret"]["secretName"] == "kbatch-webhook-tls"
    mount = next(m for m in container(objects)["volumeMounts"] if m["name"] == "webhook-tls")
    return str(mount["mountPath"])


def test_the_api_service_names_the_webhook_services_visibility_port(default) -> None:
    spec = api_service(default)["spec"]
    assert (spec["group"], spec["version"]) == ("visibility.kbatch.io", "v1alpha1")
    assert spec["insecureSkipTLSVerify"] is False
    assert spec["groupPriorityMinimum"] == 100 and spec["versionPriority"] == 100
    port = service_port(default, "visibility")
    assert spec["service"] == {"name": "kbatch-webhook", "namespace": NS, "port": port["port"]}
    assert port["targetPort"] == "visibility"
    assert service_port(default, "webhook")["port"] != port["port"]
    secret = one(default, "Secret", "kbatch-webhook-tls")
    assert spec["caBundle"] == secret["data"]["ca.crt"]  # the CA that signed tls.crt


def test_kbatch_serves_it_with_the_webhooks_certificate(default) -> None:
    c = container(default)
    args = c["args"]
    port = port_of(c, "visibility")
    assert f"--visibility-address=0.0.0.0:{port}" in args
    assert f"--visibility-cert-dir={cert_dir_mount(default)}" in args
    assert len({port_of(c, name) for name in ("visibility", "webhook", "metrics", "health")}) == 4


def test_kbatch_may_read_the_front_proxy_ca_and_nothing_more(default) -> None:
    binding = one(default, "RoleBinding", AUTH_READER)
    assert binding["metadata"]["namespace"] == "kube-system"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "extension-apiserver-authentication-reader",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kbatch", "namespace": NS}]
    # No TokenReview / SubjectAccessReview: the API server authorizes before it proxies.
    refs = [b["roleRef"]["name"] for b in by_kind(default, "ClusterRoleBinding")]
    assert refs == ["kbatch"]


def test_readers_are_whoever_may_view(default) -> None:
    role = one(default, "ClusterRole", READER)
    assert role["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert rules_of(role) == READER_RULES


def test_off_renders_none_of_it() -> None:
    objects = template("--set", "visibility.enabled=false")
    assert not by_kind(objects, "APIService")
    names = {o["metadata"]["name"] for o in objects}
    assert not {READER, AUTH_READER} & names
    c = container(objects)
    assert not [a for a in c["args"] if a.startswith("--visibility")]
    assert "visibility" not in {p["name"] for p in c["ports"]}
    ports = one(objects, "Service", "kbatch-webhook")["spec"]["ports"]
    assert [p["name"] for p in ports] == ["webhook"]


def test_with_the_webhooks_off_it_still_has_its_service_and_certificate() -> None:
    objects = template("--set", "webhook.enabled=false")
    assert not webhooks(objects)
    ports = one(objects, "Service", "kbatch-webhook")["spec"]["ports"]
    assert [p["name"] for p in ports] == ["visibility"]
    secret = one(objects, "Secret", "kbatch-webhook-tls")
    assert api_service(objects)["spec"]["caBundle"] == secret["data"]["ca.crt"]
    args = container(objects)["args"]
    assert f"--visibility-cert-dir={cert_dir_mount(objects)}" in args
    assert not [a for a in args if a.startswith("--webhook")]


def test_cert_manager_injects_the_ca() -> None:
    objects = template("--set", "webhook.certificate.source=cert-manager")
    service = api_service(objects)
    certificate = one(objects, "Certificate")
    inject = service["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    assert inject == f"{NS}/{certificate['metadata']['name']}"
    assert "caBundle" not in service["spec"]
    assert f"kbatch-webhook.{NS}.svc" in certificate["spec"]["dnsNames"]


def test_an_existing_secrets_ca_is_the_api_services() -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    objects = template(
        "--set", "webhook.certificate.source=secret",
        "--set", "webhook.certificate.existingSecret=my-tls",
        "--set", f"webhook.certificate.caBundle={ca.decode()}",
    )  # fmt: skip
    assert api_service(objects)["spec"]["caBundle"] == ca.decode()


def test_skipping_tls_verification_sends_no_ca_bundle() -> None:
    spec = api_service(template("--set", "visibility.apiService.insecureSkipTLSVerify=true"))
    assert spec["spec"]["insecureSkipTLSVerify"] is True
    assert "caBundle" not in spec["spec"]  # the API server refuses both together


def test_without_rbac_the_chart_makes_no_role() -> None:
    objects = template("--set", "rbac.create=false")
    assert api_service(objects)
    assert not by_kind(objects, "RoleBinding") and not by_kind(objects, "ClusterRole")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (("visibility.port=8080",), "visibility.port and metrics.port are both 8080"),
        (("visibility.port=9443",), "visibility.port and webhook.port are both 9443"),
        (("visibility.service.port=443",),
         "visibility.service.port and webhook.service.port are both 443"),
    ],
)  # fmt: skip
def test_a_port_taken_twice_fails_saying_which(values, message) -> None:
    args = [a for value in values for a in ("--set", value)]
    result = helm("template", "kbatch", str(CHART), *args, check=False)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    helm("template", "kbatch", str(CHART), *args, "--set", "visibility.enabled=false")


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"visibility": {"enabled": "yes"}}, "visibility.enabled: Invalid type"),
        ({"visibility": {"port": 0}}, "visibility.port: Must be greater than or equal to 1"),
        ({"visibility": {"apiService": {"versionPriority": 1001}}},
         "visibility.apiService.versionPriority: Must be less than or equal to 1000"),
        ({"visibility": {"apiService": {"groupPriority": 100}}},
         "Additional property groupPriority is not allowed"),
    ],
)  # fmt: skip
def test_a_wrong_visibility_value_fails_with_the_schemas_message(
    tmp_path: Path, values, message
) -> None:
    assert_schema_refuses(tmp_path, values, message)
