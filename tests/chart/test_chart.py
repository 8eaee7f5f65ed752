"""The Helm chart, rendered: `helm lint`, `helm template` with default and other values.

Every object the chart renders is checked for what the issue asks: a hardened
Deployment with leader election, the RBAC of README.md's table and nothing
more, the scheduler conf of DESIGN §4, webhooks wired to kbatch's paths with a
certificate that verifies, dashboards for Grafana's sidecar.
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

from chart.tools import CHART, by_kind, helm, one, require_tool, template
from kbatch.config import DEFAULT_CONF
from kbatch.operators.queue.controller import DEFAULT_QUEUE_OBJECT
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.actions import REGISTRY as ACTIONS
from kbatch.operators.scheduler.core.plugins import REGISTRY as PLUGINS
from kbatch.webhooks import configuration

require_tool("helm", module=True)

NS = "kbatch-system"
AUTH_READER = "kbatch-visibility-auth-reader"  # the RoleBinding in kube-system
API_SERVICE = "v1alpha1.visibility.kbatch.io"

# Exactly what `kbatch run` does against the API, as README.md lists it.
CLUSTER_RULES = {
    ("", "pods"): {"list", "watch", "delete"},
    ("", "pods/binding"): {"create"},
    ("", "pods/status"): {"patch"},
    ("", "nodes"): {"list", "watch"},
    ("", "resourcequotas"): {"list", "watch"},
    ("", "namespaces"): {"list", "watch"},
    ("", "events"): {"create"},
    ("scheduling.k8s.io", "priorityclasses"): {"list", "watch"},
    ("", "persistentvolumeclaims"): {"list", "watch", "patch"},
    ("", "persistentvolumes"): {"list", "watch", "patch"},
    ("storage.k8s.io", "storageclasses"): {"list", "watch"},
    ("storage.k8s.io", "csinodes"): {"list", "watch"},
    ("resource.k8s.io", "resourceclaims"): {"get", "list", "watch"},
    ("resource.k8s.io", "resourceclaims/status"): {"update"},
    ("resource.k8s.io", "resourceclaims/binding"): {"update"},
    ("resource.k8s.io", "deviceclasses"): {"list", "watch"},
    ("resource.k8s.io", "resourceslices"): {"list", "watch"},
    ("batch", "jobs"): {"list", "watch"},
    ("scheduling.k8s.io", "podgroups"): {"list", "watch"},
    ("scheduling.k8s.io", "podgroups/status"): {"patch"},
    ("scheduling.volcano.sh", "podgroups"): {"list", "watch", "patch"},
    ("scheduling.volcano.sh", "queues"): {"list", "watch"},
    ("scheduling.volcano.sh", "queues/status"): {"patch"},
    ("scheduling.incubator.k8s.io", "podgroups"): {"list", "watch"},
    ("scheduling.incubator.k8s.io", "podgroups/status"): {"patch"},
    ("scheduling.incubator.k8s.io", "queues"): {"list", "watch", "create"},
    ("scheduling.incubator.k8s.io", "queues/status"): {"patch"},
    ("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"},
}
# ... and with the admission webhooks on (the default).
WEBHOOK_RULES = {
    ("scheduling.incubator.k8s.io", "queues"): {"get"},
    ("scheduling.incubator.k8s.io", "podgroups"): {"get", "patch", "create"},
    ("batch", "jobs"): {"patch"},
    ("jobset.x-k8s.io", "jobsets"): {"list", "watch", "patch"},
}
# ... and with the visibility API on (the default).
VISIBILITY_RULES = {("", "events"): {"list"}}
# What the visibility API's readers get (aggregated to "view").
READER_RULES = {
    ("visibility.kbatch.io", "podgroups/explanation"): {"get"},
    ("visibility.kbatch.io", "waitingjobs"): {"list"},
    ("visibility.kbatch.io", "queuesummaries"): {"list"},
}
LEASE_RULES = {
    ("coordination.k8s.io", "leases", ()): {"create"},
    ("coordination.k8s.io", "leases", ("kbatch",)): {"get", "update"},
}


def values_file(tmp_path: Path, values: dict[str, Any]) -> str:
    path = tmp_path / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return str(path)


def assert_schema_refuses(tmp_path: Path, values: dict[str, Any], message: str) -> None:
    """``helm template`` with these values fails on the chart's values schema, saying
    ``message`` (which names the value)."""
    result = helm(
        "template", "kbatch", str(CHART), "--values", values_file(tmp_path, values), check=False
    )
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert message in result.stderr, result.stderr


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    (only,) = pod["containers"]
    return only


def port_of(c: dict[str, Any], name: str) -> int:
    return next(p["containerPort"] for p in c["ports"] if p["name"] == name)


def webhooks(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every webhook of both configurations, by name (two may share a path)."""
    return {
        hook["name"]: hook
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for config in by_kind(objects, kind)
        for hook in config["webhooks"]
    }


def openssl(*args: str, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["openssl", *args], input=stdin, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    return template()


def test_helm_lint_passes_with_default_and_other_values() -> None:
    out = helm("lint", str(CHART), "--strict").stdout
    assert "0 chart(s) failed" in out
    helm("lint", str(CHART), "--strict", "--set", "webhook.enabled=false,replicaCount=1")


def test_default_render_has_every_object(default) -> None:
    kinds = sorted(o["kind"] for o in default)
    assert kinds == sorted(
        ["ServiceAccount", "ClusterRole", "ClusterRole", "ClusterRoleBinding",
         "Role", "RoleBinding", "RoleBinding",
         "ConfigMap", "ConfigMap", "ConfigMap", "Deployment", "PodDisruptionBudget",
         "Service", "Service", "Secret", "Queue",
         "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService"]
    )  # fmt: skip
    for obj in default:
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding", "Queue", "APIService"):
            continue
        if "Webhook" in obj["kind"]:
            continue
        expected = "kube-system" if obj["metadata"]["name"] == AUTH_READER else NS
        assert obj["metadata"]["namespace"] == expected, obj["metadata"]["name"]


def test_deployment_is_two_hardened_replicas_with_leader_election(default) -> None:
    deployment = one(default, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == one(default, "ServiceAccount")["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    c = container(default)
    assert c["image"] == "kbatch/kbatch:0.1.0"
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert set(c["resources"]) == {"requests", "limits"}
    assert {"cpu", "memory"} <= set(c["resources"]["requests"]) & set(c["resources"]["limits"])
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    args = c["args"]
    assert f"--health-address=0.0.0.0:{port_of(c, 'health')}" in args
    assert f"--metrics-address=0.0.0.0:{port_of(c, 'metrics')}" in args
    assert "--leader-elect" in args
    assert "--lock-namespace=$(POD_NAMESPACE)" in args
    assert any(e["name"] == "POD_NAMESPACE" for e in c["env"])
    assert [a for a in args if a.startswith("--scheduler-name=")] == [
        "--scheduler-name=kbatch",
        "--scheduler-name=kube-batch",
    ]
    assert f"--webhook-address=0.0.0.0:{port_of(c, 'webhook')}" in args
    assert "--webhook-cert-dir=/etc/kbatch/webhook" in args
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert mounts["/tmp"] == "tmp"  # the root filesystem is read-only
    assert mounts["/etc/kbatch/webhook"] == "webhook-tls"
    conf_arg = next(a for a in args if a.startswith("--scheduler-conf="))
    conf_path = Path(conf_arg.partition("=")[2])
    volumes = {v["name"]: v for v in pod["volumes"]}
    conf_volume = volumes[mounts[str(conf_path.parent)]]
    conf_map = one(default, "ConfigMap", conf_volume["configMap"]["name"])
    assert conf_path.name in conf_map["data"]


def test_pod_disruption_budget_keeps_one_replica(default) -> None:
    pdb = one(default, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    labels = one(default, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


def test_scheduler_conf_is_design_default_and_loads(default) -> None:
    conf_map = one(default, "ConfigMap", "kbatch-scheduler-conf")
    text = conf_map["data"]["scheduler.conf"]
    # One default everywhere (DESIGN §14): the chart's is the built-in one.
    assert yaml.safe_load(text) == yaml.safe_load(DEFAULT_CONF)
    conf = runner.load_conf(text, "scheduler.conf")
    assert conf.actions == ("enqueue", "reclaim", "allocate", "backfill", "reserve")


def rules_of(role: dict[str, Any]) -> dict[tuple[str, ...], set[str]]:
    rules: dict[tuple[str, ...], set[str]] = {}
    for rule in role["rules"]:
        names = tuple(rule.get("resourceNames", ()))
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                key = (
                    (group, resource, names)
                    if names or role["kind"] == "Role"
                    else (group, resource)
                )
                rules.setdefault(key, set()).update(rule["verbs"])
    return rules


def joined(*parts: dict[tuple[str, ...], set[str]]) -> dict[tuple[str, ...], set[str]]:
    rules: dict[tuple[str, ...], set[str]] = {}
    for part in parts:
        for key, verbs in part.items():
            rules[key] = rules.get(key, set()) | verbs
    return rules


def test_cluster_role_has_exactly_the_verbs_kbatch_uses(default) -> None:
    role = one(default, "ClusterRole", "kbatch")
    text = json.dumps(role["rules"])
    assert "*" not in text
    assert "nonResourceURLs" not in text
    assert rules_of(role) == joined(CLUSTER_RULES, WEBHOOK_RULES, VISIBILITY_RULES)
    off = one(template("--set", "webhook.enabled=false"), "ClusterRole", "kbatch")
    assert rules_of(off) == joined(CLUSTER_RULES, VISIBILITY_RULES)
    both_off = template("--set", "webhook.enabled=false,visibility.enabled=false")
    assert rules_of(one(both_off, "ClusterRole", "kbatch")) == CLUSTER_RULES
    binding = one(default, "ClusterRoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kbatch", "namespace": NS}]


def test_lease_role_is_namespaced_and_named(default) -> None:
    role = one(default, "Role")
    assert role["metadata"]["namespace"] == NS
    assert rules_of(role) == LEASE_RULES
    binding = one(default, "RoleBinding", "kbatch-leader")
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": role["metadata"]["name"],
    }


def test_readme_lists_the_rbac_verbs() -> None:
    readme = (CHART / "README.md").read_text()
    readme = readme[readme.index("\n## RBAC") : readme.index("\n## Admission webhooks")]
    listed: dict[tuple[str, str], set[str]] = {}
    for group, resources, verbs in re.findall(
        r"^\| `([^`]*)` \| ([^|]+) \| ([^|]+) \|", readme, re.MULTILINE
    ):
        for resource in re.findall(r"`([^`]+)`", resources):
            listed.setdefault((group, resource), set()).update(re.findall(r"`([^`]+)`", verbs))
    expected = joined(CLUSTER_RULES, WEBHOOK_RULES, VISIBILITY_RULES)
    expected[("coordination.k8s.io", "leases")] = {"create", "get", "update"}
    normalised = {("" if g == "core" else g, r): v for (g, r), v in listed.items()}
    assert normalised == expected


def test_webhook_configurations_are_kbatchs_own_definition(default) -> None:
    """The chart writes exactly what kbatch.webhooks.configuration defines (the paths,
    rules and failure policies of webhooks/README.md), with a Service clientConfig."""
    service = one(default, "Service", "kbatch-webhook")
    port = next(p for p in service["spec"]["ports"] if p["name"] == "webhook")
    assert port["targetPort"] == "webhook"
    ca = one(default, "MutatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["caBundle"]
    client_config = {
        "service": {"name": "kbatch-webhook", "namespace": NS, "port": port["port"]},
        "caBundle": ca,
    }
    expected = configuration.configurations(client_config, ("kube-system", NS))
    for mutating, kind in ((True, "MutatingWebhookConfiguration"),
                           (False, "ValidatingWebhookConfiguration")):  # fmt: skip
        rendered = one(default, kind)
        assert rendered["metadata"]["name"] == expected[mutating]["metadata"]["name"]
        assert rendered["webhooks"] == expected[mutating]["webhooks"]
    assert {o["metadata"]["name"] for o in default if "Webhook" in o["kind"]} == {
        "kbatch-mutating",
        "kbatch-validating",
    }


def test_default_queue_is_kbatchs_and_skips_only_the_queue_webhook(default) -> None:
    """The chart's default Queue is kbatch's own default queue, kept on uninstall, and
    labelled so that the Queue webhook (no kbatch answers yet when Helm creates it)
    skips it on create and update, and only that webhook: its deletion is still asked."""
    queue = one(default, "Queue")
    assert queue["apiVersion"] == DEFAULT_QUEUE_OBJECT["apiVersion"]
    assert queue["metadata"]["name"] == DEFAULT_QUEUE_OBJECT["metadata"]["name"]
    assert queue["spec"] == DEFAULT_QUEUE_OBJECT["spec"]
    assert queue["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    labels = queue["metadata"]["labels"]
    assert labels[configuration.DEFAULT_QUEUE_LABEL] == "true"

    def sent(hook: dict[str, Any]) -> bool:
        expressions = (hook.get("objectSelector") or {}).get("matchExpressions", [])
        return all(e["operator"] == "DoesNotExist" and e["key"] not in labels
                   for e in expressions)  # fmt: skip

    queue_hooks = {
        tuple(h["rules"][0]["operations"]): sent(h)
        for h in webhooks(default).values()
        if h["rules"][0]["resources"] == ["queues"]
    }
    assert queue_hooks == {("CREATE", "UPDATE"): False, ("DELETE",): True}
    assert not by_kind(template("--set", "defaultQueue.create=false"), "Queue")
    assert one(template("--set", "webhook.enabled=false"), "Queue")


def test_generated_certificate_is_signed_by_the_webhooks_ca(default, tmp_path) -> None:
    secret = one(default, "Secret", "kbatch-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    for hook in webhooks(default).values():
        assert base64.b64decode(hook["clientConfig"]["caBundle"]).decode() == data["ca.crt"]
    (tmp_path / "ca.crt").write_text(data["ca.crt"])
    (tmp_path / "tls.crt").write_text(data["tls.crt"])
    assert "OK" in openssl("verify", "-CAfile", str(tmp_path / "ca.crt"), str(tmp_path / "tls.crt"))
    text = openssl("x509", "-noout", "-text", "-in", str(tmp_path / "tls.crt"))
    assert f"DNS:kbatch-webhook.{NS}.svc" in text
    pod = one(default, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "webhook-tls")
    assert volume["secret"]["secretName"] == "kbatch-webhook-tls"


def test_metrics_service_and_dashboards(default) -> None:
    service = one(default, "Service", "kbatch-metrics")
    (port,) = service["spec"]["ports"]
    assert port["targetPort"] == "metrics"
    labels = one(default, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    boards = [o for o in by_kind(default, "ConfigMap") if "dashboard" in o["metadata"]["name"]]
    assert len(boards) == 2
    for board in boards:
        assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
        ((key, text),) = board["data"].items()
        assert text == (CHART / "dashboards" / key).read_text().rstrip("\n")
        assert json.loads(text)["title"].startswith("kbatch ")


def test_webhook_off_renders_no_webhook_objects() -> None:
    objects = template("--set", "webhook.enabled=false,visibility.enabled=false")
    assert not webhooks(objects)
    assert not by_kind(objects, "Secret")
    assert [s["metadata"]["name"] for s in by_kind(objects, "Service")] == ["kbatch-metrics"]
    c = container(objects)
    assert not [a for a in c["args"] if a.startswith("--webhook")]
    assert "webhook" not in {p["name"] for p in c["ports"]}
    assert "/etc/kbatch/webhook" not in {m["mountPath"] for m in c["volumeMounts"]}


def test_existing_secret_gives_the_certificate_and_ca() -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    objects = template(
        "--set", "webhook.certificate.source=secret",
        "--set", "webhook.certificate.existingSecret=my-webhook-tls",
        "--set", f"webhook.certificate.caBundle={ca.decode()}",
    )  # fmt: skip
    assert not by_kind(objects, "Secret")
    for hook in webhooks(objects).values():
        assert hook["clientConfig"]["caBundle"] == ca.decode()
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "webhook-tls")
    assert volume["secret"]["secretName"] == "my-webhook-tls"


def test_existing_secret_without_a_ca_fails_saying_what_to_set() -> None:
    result = helm(
        "template", "kbatch", str(CHART),
        "--set", "webhook.certificate.source=secret",
        "--set", "webhook.certificate.existingSecret=my-webhook-tls",
        check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "set webhook.certificate.caBundle" in result.stderr
    result = helm(
        "template", "kbatch", str(CHART), "--set", "webhook.certificate.source=secret", check=False
    )
    assert "needs webhook.certificate.existingSecret" in result.stderr


def test_cert_manager_issues_the_certificate_and_injects_the_ca() -> None:
    objects = template("--set", "webhook.certificate.source=cert-manager")
    assert not by_kind(objects, "Secret")
    issuer = one(objects, "Issuer")
    assert issuer["spec"] == {"selfSigned": {}}
    certificate = one(objects, "Certificate")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    assert certificate["spec"]["secretName"] == "kbatch-webhook-tls"
    assert f"kbatch-webhook.{NS}.svc" in certificate["spec"]["dnsNames"]
    assert certificate["spec"]["issuerRef"] == {
        "name": issuer["metadata"]["name"],
        "kind": "Issuer",
    }
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = one(objects, kind)
        inject = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
        assert inject == f"{NS}/{certificate['metadata']['name']}"
    for hook in webhooks(objects).values():
        assert "caBundle" not in hook["clientConfig"]
    objects = template(
        "--set", "webhook.certificate.source=cert-manager",
        "--set", "webhook.certificate.certManager.issuerRef.name=corp-ca",
        "--set", "webhook.certificate.certManager.issuerRef.kind=ClusterIssuer",
    )  # fmt: skip
    assert not by_kind(objects, "Issuer")
    assert one(objects, "Certificate")["spec"]["issuerRef"] == {
        "name": "corp-ca",
        "kind": "ClusterIssuer",
    }


def test_service_monitor_selects_the_metrics_service() -> None:
    objects = template(
        "--set", "metrics.serviceMonitor.enabled=true",
        "--set", "metrics.serviceMonitor.labels.release=prometheus",
        "--set", "metrics.serviceMonitor.interval=15s",
    )  # fmt: skip
    monitor = one(objects, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    service = one(objects, "Service", "kbatch-metrics")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"]
    assert endpoint["interval"] == "15s"
    assert not by_kind(template(), "ServiceMonitor")


def test_one_replica_without_leader_election() -> None:
    objects = template("--set", "replicaCount=1,leaderElection.enabled=false")
    assert one(objects, "Deployment")["spec"]["replicas"] == 1
    assert not by_kind(objects, "PodDisruptionBudget")  # it would block every drain
    assert not by_kind(objects, "Role")
    args = container(objects)["args"]
    assert "--no-leader-elect" in args
    assert not [a for a in args if a.startswith("--lock-namespace")]


def test_custom_scheduler_conf_and_names(tmp_path) -> None:
    conf = {
        "actions": "enqueue, allocate, backfill",
        "tiers": [
            {"plugins": [{"name": "gang"}, {"name": "priority", "disableJobOrder": True}]},
            {"plugins": [{"name": "binpack"}, {"name": "predicates"}, {"name": "proportion"}]},
        ],
    }
    objects = template(
        "--values", values_file(tmp_path, {"scheduler": {"conf": conf, "names": ["batch"]}}),
        "--namespace", "batch", "--set", "fullnameOverride=sched",
    )  # fmt: skip
    text = one(objects, "ConfigMap", "sched-scheduler-conf")["data"]["scheduler.conf"]
    assert yaml.safe_load(text) == conf
    assert runner.load_conf(text).actions == ("enqueue", "allocate", "backfill")
    args = container(objects)["args"]
    assert [a for a in args if a.startswith("--scheduler-name")] == ["--scheduler-name=batch"]
    assert one(objects, "Deployment")["metadata"] == {
        **one(objects, "Deployment")["metadata"],
        "name": "sched",
        "namespace": "batch",
    }


def test_volcanos_conf_with_its_action_configurations_goes_through_the_chart(tmp_path) -> None:
    """Volcano's default conf (overcommit, binpack), its per-action arguments and
    kbatch's reserve.starvingAfter pass the values schema and load in kbatch."""
    conf = {
        "actions": "enqueue, allocate, backfill, reserve",
        "configurations": [{"name": "allocate", "arguments": {"predicateErrorCacheEnable": True}}],
        "reserve": {"starvingAfter": "1m"},
        "tiers": [
            {"plugins": [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}]},
            {"plugins": [{"name": "overcommit"}, {"name": "predicates"}, {"name": "binpack"}]},
        ],
    }
    objects = template("--values", values_file(tmp_path, {"scheduler": {"conf": conf}}))
    (text,) = [c["data"]["scheduler.conf"] for c in by_kind(objects, "ConfigMap")
               if "scheduler.conf" in (c.get("data") or {})]  # fmt: skip
    loaded = runner.load_conf(text)
    assert loaded.configurations[0].name == "allocate"
    assert loaded.reserve.starving_after_seconds == 60


def test_image_digest_and_tag() -> None:
    digest = "sha256:" + "a" * 64
    assert (
        container(template("--set", f"image.digest={digest}"))["image"] == f"kbatch/kbatch@{digest}"
    )
    assert container(template("--set", "image.tag=dev"))["image"] == "kbatch/kbatch:dev"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": 0}, "replicaCount: Must be greater than or equal to 1"),
        ({"replicas": 2}, "Additional property replicas is not allowed"),
        ({"scheduler": {"schedulePeriod": "1 second"}}, "scheduler.schedulePeriod: Does not match pattern"),
        ({"scheduler": {"conf": {"actions": "enqueue, allocat", "tiers": [{"plugins": [{"name": "gang"}]}]}}},
         "scheduler.conf.actions: Does not match pattern"),
        ({"scheduler": {"conf": {"actions": "allocate", "tiers": [{"plugins": [{"name": "gnag"}]}]}}},
         "scheduler.conf.tiers.0.plugins.0.name: scheduler.conf.tiers.0.plugins.0.name must be one of the following"),
        ({"scheduler": {"conf": {"actions": "allocate", "tiers": []}}},
         "scheduler.conf.tiers: Array must have at least 1 items"),
        ({"scheduler": {"conf": {"actions": "allocate", "tiers": [{"plugins": [{"name": "gang", "enableJobOrdr": False}]}]}}},
         "Additional property enableJobOrdr is not allowed"),
        ({"webhook": {"certificate": {"source": "vault"}}},
         'webhook.certificate.source must be one of the following: "generate", "secret", "cert-manager"'),
        ({"webhook": {"failurePolicy": "Never"}}, "webhook.failurePolicy must be one of the following"),
        ({"scheduler": {"logLevel": "verbose"}}, "scheduler.logLevel must be one of the following"),
        ({"image": {"digest": "latest"}}, "image.digest: Does not match pattern"),
    ],
)  # fmt: skip
def test_a_wrong_value_fails_with_the_schemas_message(tmp_path, values, message) -> None:
    assert_schema_refuses(tmp_path, values, message)


def test_schema_knows_exactly_kbatchs_actions_and_plugins() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text())
    conf = schema["properties"]["scheduler"]["properties"]["conf"]
    plugin = conf["properties"]["tiers"]["items"]["properties"]["plugins"]["items"]
    assert set(plugin["properties"]["name"]["enum"]) == set(PLUGINS)
    pattern = conf["properties"]["actions"]["pattern"]
    assert set(re.search(r"\(([a-z|]+)\)", pattern).group(1).split("|")) == set(ACTIONS)


def test_chart_crds_are_the_crds_folder() -> None:
    ours = {p.name: p.read_bytes() for p in (CHART / "crds").iterdir()}
    theirs = {p.name: p.read_bytes() for p in (CHART.parents[1] / "crds").iterdir()}
    assert ours == theirs, (
        "charts/kbatch/crds/ must be copies of crds/: cp crds/*.yaml charts/kbatch/crds/"
    )


def test_volcanos_crds_are_installed_only_when_asked() -> None:
    crds = {
        o["metadata"]["name"]: o
        for o in by_kind(template("--set", "volcano.installCRDs=true"), "CustomResourceDefinition")
    }
    assert set(crds) == {"podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh"}
    group, queue = crds["podgroups.scheduling.volcano.sh"], crds["queues.scheduling.volcano.sh"]
    assert (group["spec"]["scope"], queue["spec"]["scope"]) == ("Namespaced", "Cluster")
    (version,) = queue["spec"]["versions"]
    assert version["name"] == "v1beta1" and version["subresources"] == {"status": {}}
    assert "subresources" not in group["spec"]["versions"][0]  # as Volcano's
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert {"parent", "weight", "capability", "guarantee", "deserved", "reclaimable"} <= set(
        spec["properties"]
    )
    assert "shortNames" not in queue["spec"]["names"]  # pg and q are kbatch's own
    assert queue["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert not by_kind(template(), "CustomResourceDefinition")  # off by default
    guard = (CHART / "templates" / "volcano-crds.yaml").read_text()
    assert 'lookup "apiextensions.k8s.io/v1" "CustomResourceDefinition"' in guard
