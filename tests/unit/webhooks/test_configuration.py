"""The webhook configurations kbatch writes for local runs, and its HTTPS endpoint."""

import contextlib
import json
import ssl
import types
from pathlib import Path
from typing import Any

import kopf
import pytest
from cryptography import x509

from kbatch import kubeapi
from kbatch.cluster.state import ClusterState
from kbatch.webhooks import configuration, endpoint, jobs, server

CLIENT = {"url": "https://127.0.0.1:9443", "caBundle": "Q0E="}


def test_the_configurations_are_the_readmes_table() -> None:
    bodies = configuration.configurations(CLIENT, ("kube-system", "kbatch"))
    mutating, validating = bodies[True], bodies[False]
    assert mutating["metadata"]["name"] == "kbatch-mutating"
    assert validating["metadata"]["name"] == "kbatch-validating"
    rows = {
        (hook["name"], hook["clientConfig"]["url"], hook["failurePolicy"])
        for body in bodies.values()
        for hook in body["webhooks"]
    }
    assert rows == {
        ("mutate-podgroup.kbatch.io", "https://127.0.0.1:9443/mutate-podgroup", "Fail"),
        ("mutate-job.kbatch.io", "https://127.0.0.1:9443/mutate-job", "Ignore"),
        ("mutate-jobset.kbatch.io", "https://127.0.0.1:9443/mutate-jobset", "Ignore"),
        ("validate-podgroup.kbatch.io", "https://127.0.0.1:9443/validate-podgroup", "Fail"),
        ("validate-queue.kbatch.io", "https://127.0.0.1:9443/validate-queue", "Fail"),
        ("validate-queue-delete.kbatch.io", "https://127.0.0.1:9443/validate-queue", "Fail"),
    }
    for body in bodies.values():
        for hook in body["webhooks"]:
            assert hook["timeoutSeconds"] == 5 and hook["sideEffects"] == "None"
            assert hook["clientConfig"]["caBundle"] == "Q0E="
    job_hook = next(h for h in mutating["webhooks"] if h["name"].startswith("mutate-job"))
    assert job_hook["rules"] == [
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "resources": ["jobs"],
            "operations": ["CREATE"],
            "scope": "Namespaced",
        }
    ]
    assert job_hook["namespaceSelector"]["matchExpressions"] == [
        {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["kube-system", "kbatch"],
        }
    ]
    assert all("namespaceSelector" not in h for h in validating["webhooks"])


def test_only_the_charts_default_queue_skips_queue_validation_and_never_on_delete() -> None:
    """Helm creates the chart's default Queue before kbatch can answer: its creation and
    updates skip the Queue webhook (the CRD's schema still checks them); deletion of any
    Queue is still asked, so the default queue stays undeletable."""
    validating = configuration.configurations(CLIENT)[False]
    queue_hooks = {
        h["name"]: h for h in validating["webhooks"] if h["rules"][0]["resources"] == ["queues"]
    }
    writes, deletes = (
        queue_hooks["validate-queue.kbatch.io"],
        queue_hooks["validate-queue-delete.kbatch.io"],
    )
    assert writes["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert writes["objectSelector"] == {
        "matchExpressions": [{"key": "kbatch.io/chart-default-queue", "operator": "DoesNotExist"}]
    }
    assert deletes["rules"][0]["operations"] == ["DELETE"]
    assert "objectSelector" not in deletes
    others = [h for h in validating["webhooks"] if h["name"] not in queue_hooks]
    assert all("objectSelector" not in h for h in others)


def test_a_service_client_config_gets_the_path() -> None:
    service = {"service": {"name": "kbatch-webhook", "namespace": "kbatch", "port": 443}}
    hook = configuration.webhook(configuration.HOOKS[0], service, ())
    assert hook["clientConfig"]["service"]["path"] == "/mutate-podgroup"


def test_the_self_signed_certificate_serves_the_host(tmp_path: Path) -> None:
    cert, key = endpoint.self_signed(["127.0.0.1", "0.0.0.0", "kbatch.local"])
    parsed = x509.load_pem_x509_certificate(cert)
    sans = parsed.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["kbatch.local"]
    assert [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")  # a usable pair


def test_the_server_takes_its_address_and_certificate_directory(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_text("CA")
    server = endpoint.server("0.0.0.0:9443", tmp_path, "kbatch.example")
    assert (server.addr, server.port, server.host) == ("0.0.0.0", 9443, "kbatch.example")
    assert (server.certfile, server.pkeyfile) == (tmp_path / "tls.crt", tmp_path / "tls.key")
    assert server.cafile == tmp_path / "ca.crt"
    local = endpoint.server(":8443")
    assert (local.addr, local.port, local.certfile) == (None, 8443, None)


def test_objects_without_a_namespace_get_the_requests() -> None:
    review = {"request": {"namespace": "team-a", "object": {"metadata": {"name": "g"}}}}
    assert endpoint.namespaced(review)["request"]["object"]["metadata"] == {
        "name": "g",
        "namespace": "team-a",
    }
    cluster_scoped = {"request": {"object": {"metadata": {"name": "q"}}}}
    assert endpoint.namespaced(cluster_scoped)["request"]["object"]["metadata"] == {"name": "q"}


def test_the_admission_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Runs, and answers every case (no timing asserted: see its output for figures)."""
    from kbatch.bench import webhooks as bench

    assert bench.main(["--groups", "60", "--rounds", "3"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["admission"] for line in lines] == [
        "PodGroup create: fill minResources + quota",
        "PodGroup create: no Job known (lists Jobs)",
        "PodGroup create: validate",
        "Queue update: validate",
        "Queue delete: in use",
        "Job create: hold (group Pending, a held sibling)",
        "Job create: hold (no group yet, no Job known)",
    ]
    assert all(line["p99_ms"] >= line["p50_ms"] >= 0 for line in lines)


def test_the_admission_benchmark_times_what_its_cases_say() -> None:
    import asyncio

    import kopf

    from kbatch.bench import webhooks as bench

    state, index = bench.build_state(60)
    answers = {}
    with bench.stub_api() as api:
        handlers = bench.handlers(bench.Runtime(state, api))
        for name, (hook, kwargs) in bench.cases(index).items():
            patch = kopf.Patch(body=kwargs["body"])
            lists = bench.EmptyJobLists.lists
            with contextlib.suppress(kopf.AdmissionError):
                asyncio.run(handlers[hook](patch=patch, warnings=[], **kwargs))
            answers[name] = (dict(patch), bench.EmptyJobLists.lists - lists)
    assert answers["PodGroup create: fill minResources + quota"][0]["spec"]["minResources"]
    assert answers["PodGroup create: no Job known (lists Jobs)"] == ({}, 1)  # asked the API
    for name in ("group Pending, a held sibling", "no group yet, no Job known"):
        patch, lists = answers[f"Job create: hold ({name})"]
        assert patch["spec"] == {"suspend": True} and lists == 0


def test_kopf_logs_a_refusal_at_info_and_other_failures_as_errors() -> None:
    import logging

    from kbatch.webhooks.server import RefusalsAreAnswers

    def level(message: str) -> str:
        record = logging.LogRecord("kopf.objects", logging.ERROR, "", 0, message, None, None)
        assert RefusalsAreAnswers().filter(record)
        return record.levelname

    assert level("Webhook 'validate-queue' failed permanently: spec.weight: ...") == "INFO"
    assert level("Webhook 'validate-queue' failed with an exception. Will retry.") == "ERROR"
    assert level("Handler 'release-held-jobs' failed permanently: boom") == "ERROR"


# --------------------------------------------------------------------------- a killed run's
class FakeApi:
    """The admissionregistration paths of an API server: objects by path, and what was
    asked of it."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {self.path_of(o): o for o in objects}
        self.calls: list[tuple[str, str]] = []

    @staticmethod
    def path_of(obj: dict[str, Any]) -> str:
        mutating = obj["kind"].startswith("Mutating")
        return f"{configuration.PATHS[mutating]}/{obj['metadata']['name']}"

    def request(self, api: object, method: str, path: str, body: Any = None, *_: Any) -> Any:
        assert api is self
        self.calls.append((method, path))
        if method == "POST":
            self.objects[f"{path}/{body['metadata']['name']}"] = body
            return body
        if path not in self.objects:
            raise kubeapi.ApiError(404, "not found")
        if method == "DELETE":
            uid = ((body or {}).get("preconditions") or {}).get("uid")
            if uid is not None and uid != self.objects[path]["metadata"].get("uid"):
                raise kubeapi.ApiError(409, "Precondition failed: UID in precondition")
            return self.objects.pop(path)
        return self.objects[path]


def left_by_a_killed_run() -> list[dict[str, Any]]:
    bodies = configuration.configurations({"url": "https://10.0.0.9:9443", "caBundle": "Q0E="})
    for mutating, body in bodies.items():
        body["metadata"]["uid"] = f"uid-{mutating}"
    return list(bodies.values())


def the_charts() -> list[dict[str, Any]]:
    service = {"service": {"name": "kbatch-webhook", "namespace": "kbatch", "port": 443}}
    bodies = configuration.configurations(service, ("kube-system", "kbatch"))
    for body in bodies.values():
        body["metadata"]["labels"] = {"app.kubernetes.io/managed-by": "Helm"}
    return list(bodies.values())


def test_a_killed_runs_configurations_are_removed(monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeApi(*left_by_a_killed_run())
    monkeypatch.setattr(kubeapi.client, "request", api.request)
    assert configuration.remove_stale(api) == ["kbatch-mutating", "kbatch-validating"]  # type: ignore[arg-type]
    assert not api.objects
    assert configuration.remove_stale(api) == []  # type: ignore[arg-type]


def test_the_charts_configurations_are_never_removed_as_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = FakeApi(*the_charts())
    monkeypatch.setattr(kubeapi.client, "request", api.request)
    assert configuration.remove_stale(api) == []  # type: ignore[arg-type]
    assert len(api.objects) == 2
    assert not [method for method, _ in api.calls if method == "DELETE"]


def test_a_configuration_made_again_meanwhile_is_not_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The DELETE names the uid it read: a configuration another run made in between is
    that run's, not stale."""
    api = FakeApi(*left_by_a_killed_run())
    made_again = left_by_a_killed_run()[1]  # the validating one, made anew
    made_again["metadata"]["uid"] = "uid-of-a-new-run"
    reads = api.request

    def read_then_replace(_api: object, method: str, path: str, *rest: Any) -> Any:
        found = reads(_api, method, path, *rest)
        if method == "GET" and path.endswith(configuration.VALIDATING):
            api.objects[path] = made_again
        return found

    monkeypatch.setattr(kubeapi.client, "request", read_then_replace)
    assert configuration.remove_stale(api) == ["kbatch-mutating"]  # type: ignore[arg-type]
    assert [o["metadata"]["uid"] for o in api.objects.values()] == ["uid-of-a-new-run"]


class ManagedRun:
    """What the webhooks read of ``kbatch run --manage-webhooks``."""

    def __init__(self, api: FakeApi) -> None:
        self.api = api
        self.settings = types.SimpleNamespace(
            webhook_address="127.0.0.1:0",
            webhook_cert_dir=None,
            webhook_host=None,
            manage_webhooks=True,
            lock_namespace="kbatch",
        )
        self.state = ClusterState()

    def synced(self) -> bool:
        return True

    def webhooks_serving(self) -> None:
        pass


def test_manage_webhooks_removes_a_killed_runs_configurations_before_it_serves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At start, before the server exists (so before anything points at it), the
    configurations a killed run left are gone; the chart's are left alone."""
    api = FakeApi(*left_by_a_killed_run())
    monkeypatch.setattr(kubeapi.client, "request", api.request)
    registry = kopf.OperatorRegistry()
    delayed = jobs.DelayedPodCreation()
    delayed.supported = True  # nothing to learn from the API server
    server.register(registry, ManagedRun(api), delayed)  # type: ignore[arg-type]
    (startup,) = [
        h for h in registry._activities.get_all_handlers() if h.fn.__name__ == "webhook_server"
    ]
    settings = kopf.OperatorSettings()
    startup.fn(settings=settings)
    assert not api.objects
    assert isinstance(settings.admission.server, endpoint.WebhookServer)
    assert [method for method, _ in api.calls if method == "POST"] == []  # not serving yet
