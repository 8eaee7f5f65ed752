"""The webhook configurations: one definition of what the API server is asked to send
kbatch — the paths, rules and failure policies of webhooks/README.md, which the Helm
chart writes for clusters — and, for ``kbatch run --manage-webhooks`` (local runs),
their creation, update and removal.

Webhooks on kbatch's own resources fail closed (a PodGroup or Queue nobody has
checked is not admitted); the Job webhook fails open (kbatch down must never block
a cluster's Jobs: the scheduler still gangs their pods) and skips the namespaces
it must never hold Jobs in.

Queue creation and update skip a Queue labelled ``DEFAULT_QUEUE_LABEL``: the Helm
chart's ``default`` Queue, which Helm creates right after these configurations and
before kbatch's pods can answer (fail closed, the install would fail). The CRD's
schema still checks it (weight ≥ 1, state); its deletion still asks kbatch (a
webhook of its own, without that selector), which refuses it.

A ``--manage-webhooks`` run that was killed leaves its configurations behind, failing
closed at an address nobody serves: the next such run removes them (``remove_stale``)
before it serves. They are told from the chart's by their managed-by label.
"""

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbatch import kubeapi
from kbatch.api import GROUP, VERSION

log = logging.getLogger("kbatch.webhooks")

MUTATING = "kbatch-mutating"
VALIDATING = "kbatch-validating"
NAMES = ((True, MUTATING), (False, VALIDATING))
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_KBATCH = "kbatch"  # the chart's say "Helm"
DEFAULT_QUEUE_LABEL = "kbatch.io/chart-default-queue"
TIMEOUT_SECONDS = 5
NAME_SUFFIX = ".kbatch.io"  # webhook names must be fully qualified
NAMESPACE_LABEL = "kubernetes.io/metadata.name"  # set on every namespace from 1.21

MUTATE_POD_GROUP = "mutate-podgroup"
VALIDATE_POD_GROUP = "validate-podgroup"
VALIDATE_QUEUE = "validate-queue"
VALIDATE_QUEUE_DELETE = "validate-queue-delete"  # served at VALIDATE_QUEUE's path
MUTATE_JOB = "mutate-job"
MUTATE_JOBSET = "mutate-jobset"


@dataclass(frozen=True, slots=True)
class Hook:
    path: str  # also the kopf handler id
    mutating: bool
    group: str
    version: str
    resource: str
    scope: str
    operations: tuple[str, ...]
    fails_open: bool = False
    name: str = ""  # the webhook's name (before NAME_SUFFIX) when it is not the path
    skips_label: str = ""  # objects with this label are not sent


HOOKS = (
    Hook(MUTATE_POD_GROUP, True, GROUP, VERSION, "podgroups", "Namespaced", ("CREATE", "UPDATE")),
    Hook(
        VALIDATE_POD_GROUP, False, GROUP, VERSION, "podgroups", "Namespaced", ("CREATE", "UPDATE")
    ),
    Hook(
        VALIDATE_QUEUE,
        False,
        GROUP,
        VERSION,
        "queues",
        "Cluster",
        ("CREATE", "UPDATE"),
        skips_label=DEFAULT_QUEUE_LABEL,
    ),
    Hook(
        VALIDATE_QUEUE,
        False,
        GROUP,
        VERSION,
        "queues",
        "Cluster",
        ("DELETE",),
        name=VALIDATE_QUEUE_DELETE,
    ),
    Hook(MUTATE_JOB, True, "batch", "v1", "jobs", "Namespaced", ("CREATE",), fails_open=True),
    Hook(
        MUTATE_JOBSET,
        True,
        "jobset.x-k8s.io",
        "v1alpha2",
        "jobsets",
        "Namespaced",
        ("CREATE",),
        fails_open=True,
    ),
)

PATHS = {
    True: "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
    False: "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
}


def webhook(
    hook: Hook, client_config: Mapping[str, Any], skip_namespaces: Sequence[str]
) -> dict[str, Any]:
    """One entry of a configuration's ``webhooks``; ``client_config`` without the path
    (``url`` or ``service``, and ``caBundle``)."""
    config = dict(client_config)
    if "url" in config:
        config["url"] = f"{str(config['url']).rstrip('/')}/{hook.path}"
    if "service" in config:
        config["service"] = {**config["service"], "path": f"/{hook.path}"}
    entry: dict[str, Any] = {
        "name": (hook.name or hook.path) + NAME_SUFFIX,
        "clientConfig": config,
        "rules": [
            {
                "apiGroups": [hook.group],
                "apiVersions": [hook.version],
                "resources": [hook.resource],
                "operations": list(hook.operations),
                "scope": hook.scope,
            }
        ],
        "failurePolicy": "Ignore" if hook.fails_open else "Fail",
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "timeoutSeconds": TIMEOUT_SECONDS,
        "admissionReviewVersions": ["v1", "v1beta1"],
    }
    if hook.mutating:
        entry["reinvocationPolicy"] = "Never"
    if hook.fails_open and skip_namespaces:
        entry["namespaceSelector"] = {
            "matchExpressions": [
                {"key": NAMESPACE_LABEL, "operator": "NotIn", "values": list(skip_namespaces)}
            ]
        }
    if hook.skips_label:
        entry["objectSelector"] = {
            "matchExpressions": [{"key": hook.skips_label, "operator": "DoesNotExist"}]
        }
    return entry


def configurations(
    client_config: Mapping[str, Any], skip_namespaces: Sequence[str] = ("kube-system",)
) -> dict[bool, dict[str, Any]]:
    """The MutatingWebhookConfiguration (key True) and the ValidatingWebhookConfiguration."""
    out = {}
    for mutating, name in NAMES:
        kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
        out[mutating] = {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY_KBATCH}},
            "webhooks": [
                webhook(hook, client_config, skip_namespaces)
                for hook in HOOKS
                if hook.mutating is mutating
            ],
        }
    return out


def apply(api: kubeapi.ApiClient, bodies: Mapping[bool, Mapping[str, Any]]) -> None:
    """Create both configurations, or bring existing ones to ``bodies``."""
    for mutating, body in bodies.items():
        name = body["metadata"]["name"]
        try:
            kubeapi.request(api, "POST", PATHS[mutating], body)
        except kubeapi.ApiError as exc:
            if exc.status != 409:
                raise
            patch = {
                "metadata": {"labels": body["metadata"]["labels"]},
                "webhooks": body["webhooks"],
            }
            kubeapi.request(api, "PATCH", f"{PATHS[mutating]}/{name}", patch, kubeapi.MERGE_PATCH)
        log.info("%s %s points at %s", body["kind"], name, _where(body))


def remove(api: kubeapi.ApiClient) -> None:
    """Delete both configurations (the end of a local run: nothing is left to fail closed)."""
    for mutating, name in NAMES:
        try:
            kubeapi.request(api, "DELETE", f"{PATHS[mutating]}/{name}")
        except kubeapi.ApiError as exc:
            if exc.status != 404:
                log.warning("could not delete webhook configuration %s: %s", name, exc)


def remove_stale(api: kubeapi.ApiClient) -> list[str]:
    """Delete the configurations an earlier ``--manage-webhooks`` run left (killed before
    its cleanup, they refuse kbatch's objects with "connection refused"): kbatch's names
    labelled managed-by kbatch, never the chart's. The names removed; a failure is
    logged, not raised (``apply`` brings them to this run's address anyway)."""
    removed = []
    for mutating, name in NAMES:
        path = f"{PATHS[mutating]}/{name}"
        try:
            found = kubeapi.request(api, "GET", path)
            meta = found.get("metadata") or {}
            managed_by = (meta.get("labels") or {}).get(MANAGED_BY_LABEL)
            if managed_by != MANAGED_BY_KBATCH:
                log.info("leaving webhook configuration %s: managed by %s", name, managed_by)
                continue
            # only the object just read: not one a run starting meanwhile made again
            preconditions = {"preconditions": {"uid": meta.get("uid")}}
            kubeapi.request(api, "DELETE", path, preconditions)
        except kubeapi.ApiError as exc:
            if exc.status not in (404, 409):
                log.warning("could not remove stale webhook configuration %s: %s", name, exc)
            continue
        log.info("removed webhook configuration %s, left by an earlier run", name)
        removed.append(name)
    return removed


def _where(body: Mapping[str, Any]) -> str:
    config = body["webhooks"][0]["clientConfig"]
    return str(config.get("url") or config.get("service"))
