"""The webhook configurations kbatch writes for local runs, and its HTTPS endpoint."""

import contextlib
import json
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from kbatch.webhooks import configuration, endpoint

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
        ("validate-podgroup.kbatch.io", "https://127.0.0.1:9443/validate-podgroup", "Fail"),
        ("validate-queue.kbatch.io", "https://127.0.0.1:9443/validate-queue", "Fail"),
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
    queue_hook = next(h for h in validating["webhooks"] if h["name"].startswith("validate-queue"))
    assert queue_hook["rules"][0]["operations"] == ["CREATE", "UPDATE", "DELETE"]
    assert all("namespaceSelector" not in h for h in validating["webhooks"])


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
    from kbatch.webhooks import bench

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

    from kbatch.webhooks import bench

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
