"""``kubeapi.once``: the credentials kubectl would use, read without the kubernetes client,
and one GET with them over real TLS."""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbatch import kubeapi
from kbatch.kubeapi import once
from kbatch.webhooks.certificates import self_signed


def kubeconfig(
    path: Path, server: str, user: dict[str, Any], cluster: dict[str, Any] | None = None
) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "here",
                "contexts": [{"name": "here", "context": {"cluster": "c", "user": "u"}}],
                "clusters": [{"name": "c", "cluster": {"server": server, **(cluster or {})}}],
                "users": [{"name": "u", "user": user}],
            }
        )
    )
    return path


def test_a_kubeconfig_s_files_are_found_beside_it_and_its_token_is_read(tmp_path) -> None:
    path = kubeconfig(
        tmp_path / "config",
        "https://10.0.0.1:6443/",
        {"token": "abc", "client-certificate": "pki/me.crt", "client-key": "/abs/me.key"},
        {"certificate-authority": "ca.crt"},
    )
    read = once.credentials(str(path), environ={})
    assert read == once.Credentials(
        server="https://10.0.0.1:6443",
        ca_file=str(tmp_path / "ca.crt"),
        cert_file=str(tmp_path / "pki" / "me.crt"),
        key_file="/abs/me.key",
        token="abc",
    )


def test_it_reads_what_the_kubernetes_client_reads(tmp_path) -> None:
    ca = base64.b64encode(self_signed(["ca"])[0]).decode()
    path = kubeconfig(
        tmp_path / "config",
        "https://api.example:443",
        {"token": "t0k"},
        {"certificate-authority-data": ca},
    )
    read = once.credentials(str(path), environ={})
    assert read is not None
    configuration = kubeapi.api_client(str(path)).configuration
    assert configuration.host == read.server
    assert configuration.get_api_key_with_prefix("BearerToken") == f"Bearer {read.token}"
    assert Path(configuration.ssl_ca_cert).read_text() == read.ca_data


def test_kubeconfig_files_merge_the_first_to_name_an_entry_winning(tmp_path) -> None:
    first = tmp_path / "a"
    first.write_text(
        yaml.safe_dump(
            {
                "current-context": "two",
                "users": [{"name": "u", "user": {"token": "first"}}],
            }
        )
    )
    second = kubeconfig(tmp_path / "b", "https://second:6443", {"token": "second"})
    second_doc = yaml.safe_load(second.read_text())
    second_doc["contexts"].append({"name": "two", "context": {"cluster": "c", "user": "u"}})
    second.write_text(yaml.safe_dump(second_doc))
    listed = f"{first}:{tmp_path / 'not-there'}:{second}"
    read = once.credentials(None, environ={"KUBECONFIG": listed})
    assert read is not None
    assert (read.server, read.token) == ("https://second:6443", "first")


@pytest.mark.parametrize(
    ("user", "cluster", "environ"),
    [
        ({"exec": {"command": "aws"}}, {}, {}),
        ({"auth-provider": {"name": "oidc"}}, {}, {}),
        ({"token": "t", "as": "someone"}, {}, {}),
        ({"token": "t"}, {"proxy-url": "http://proxy:3128"}, {}),
        ({"token": "t"}, {"tls-server-name": "api"}, {}),
        ({"token": "t"}, {}, {"HTTPS_PROXY": "http://proxy:3128"}),
        ({"tokenFile": "no-such-token"}, {}, {}),
        ({"client-certificate-data": "not base64!"}, {}, {}),
    ],
    ids=lambda value: str(value)[:30],
)
def test_what_only_the_full_client_does_is_left_to_it(tmp_path, user, cluster, environ) -> None:
    path = kubeconfig(tmp_path / "config", "https://api:6443", user, cluster)
    assert once.credentials(str(path), environ=environ) is None


def test_basic_auth_needs_both_a_username_and_a_password(tmp_path) -> None:
    path = kubeconfig(tmp_path / "config", "https://api:6443", {"username": "bob"})
    assert once.credentials(str(path), environ={}) == once.Credentials("https://api:6443")
    path = kubeconfig(tmp_path / "config", "https://api:6443", {"username": "bob", "password": ""})
    read = once.credentials(str(path), environ={})
    assert read is not None and read.basic == ("bob", "")


def test_an_unreadable_or_contextless_kubeconfig_is_left_to_the_full_client(tmp_path) -> None:
    assert once.credentials(str(tmp_path / "missing"), environ={}) is None
    (tmp_path / "bad").write_text("clusters: [")
    assert once.credentials(str(tmp_path / "bad"), environ={}) is None
    (tmp_path / "empty").write_text("current-context: nowhere\n")
    assert once.credentials(str(tmp_path / "empty"), environ={}) is None


def test_in_cluster_credentials_come_before_the_default_kubeconfig(tmp_path, monkeypatch) -> None:
    (tmp_path / "token").write_text("sa-token\n")
    monkeypatch.setattr(once, "SERVICE_ACCOUNT", tmp_path)
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    read = once.credentials(None, environ=environ)
    assert read == once.Credentials(
        server="https://[fd00::1]:443",
        ca_file=str(tmp_path / "ca.crt"),
        token_file=str(tmp_path / "token"),
    )
    assert once._authorization(read) == {"Authorization": "Bearer sa-token"}


# ------------------------------------------------------------------------ over real TLS
class Answering(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        peer = self.request.getpeercert()
        seen = {"path": self.path, "authorization": self.headers.get("Authorization")}
        seen["client"] = dict(x[0] for x in peer["subject"])["commonName"] if peer else None
        status = 403 if self.path.endswith("/forbidden") else 200
        body = {"kind": "Status", "message": "forbidden: no"} if status == 403 else seen
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def tls_server(tmp_path) -> Iterator[tuple[str, Path, tuple[bytes, bytes]]]:
    cert, key = self_signed(["127.0.0.1"])
    client_cert, client_key = self_signed(["alice"], client=True)
    (tmp_path / "server.crt").write_bytes(cert)
    (tmp_path / "server.key").write_bytes(key)
    (tmp_path / "clients.crt").write_bytes(client_cert)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(tmp_path / "server.crt", tmp_path / "server.key")
    context.load_verify_locations(tmp_path / "clients.crt")
    context.verify_mode = ssl.CERT_OPTIONAL
    server = ThreadingHTTPServer(("127.0.0.1", 0), Answering)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", tmp_path, (client_cert, client_key)
    finally:
        server.shutdown()
        server.server_close()


def test_a_get_proves_who_asks_with_a_token_or_a_client_certificate(tls_server) -> None:
    server, folder, (cert, key) = tls_server
    by_token = once.Credentials(server, ca_file=str(folder / "server.crt"), token="t0k")
    answer = once.get(by_token, "/apis/x?y=1")
    assert answer == {"path": "/apis/x?y=1", "authorization": "Bearer t0k", "client": None}
    by_cert = once.Credentials(
        server, ca_data=(folder / "server.crt").read_text(), cert_data=cert, key_data=key
    )
    assert once.get(by_cert, "/apis/x")["client"] == "alice"
    basic = once.Credentials(server, insecure=True, basic=("bob", "pw"))
    expected = "Basic " + base64.b64encode(b"bob:pw").decode()
    assert once.get(basic, "/apis/x")["authorization"] == expected


def test_a_kubeconfig_s_ca_data_is_trusted_before_its_ca_file(tls_server, tmp_path) -> None:
    server, folder, _ = tls_server
    other_ca = tmp_path / "other.crt"
    other_ca.write_bytes(self_signed(["127.0.0.1"])[0])
    right = (folder / "server.crt").read_text()
    assert once.get(once.Credentials(server, ca_file=str(other_ca), ca_data=right), "/x")
    wrong = other_ca.read_text()
    with pytest.raises(kubeapi.Unreachable, match="CERTIFICATE_VERIFY_FAILED"):
        once.get(once.Credentials(server, ca_file=str(folder / "server.crt"), ca_data=wrong), "/x")


def test_the_server_s_refusal_and_no_answer_are_told_apart(tls_server, tmp_path) -> None:
    server, folder, _ = tls_server
    creds = once.Credentials(server, ca_file=str(folder / "server.crt"))
    with pytest.raises(kubeapi.ApiError) as refused:
        once.get(creds, "/forbidden")
    assert (refused.value.status, str(refused.value)) == (403, "HTTP 403: forbidden: no")
    other_ca = tmp_path / "other.crt"
    other_ca.write_bytes(self_signed(["127.0.0.1"])[0])
    with pytest.raises(kubeapi.Unreachable, match="CERTIFICATE_VERIFY_FAILED"):
        once.get(once.Credentials(server, ca_file=str(other_ca)), "/apis")
    with pytest.raises(kubeapi.Unreachable, match="refused"):
        once.get(once.Credentials("https://127.0.0.1:1", insecure=True), "/apis")


def test_the_commands_ask_the_scheduler_without_importing_the_kubernetes_client(
    tls_server, tmp_path
) -> None:
    server, folder, _ = tls_server
    config = kubeconfig(
        tmp_path / "config",
        server,
        {"token": "t0k"},
        {"certificate-authority": str(folder / "server.crt")},
    )
    script = (
        "import json, sys\n"
        "from kbatch.cli.visibility import LiveSource\n"
        f"answer = LiveSource({str(config)!r}, None, print).served('/apis/asked')\n"
        "print(json.dumps([answer, 'kubernetes' in sys.modules]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    answer, imported = json.loads(done.stdout)
    assert answer == {"path": "/apis/asked", "authorization": "Bearer t0k", "client": None}
    assert not imported
