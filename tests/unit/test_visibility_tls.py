"""The visibility API's TLS is made again when its certificate is renewed in place or
the API server's front-proxy CA changes; what cannot be loaded keeps what it has."""

from __future__ import annotations

import contextlib
import http.client
import logging
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kbatch.visibility import api_server
from kbatch.visibility.tls import FrontProxy, ProxyUnreadable, ServingTls
from kbatch.webhooks.certificates import self_signed

PROXY_NAME = "front-proxy-client"


class Answering:
    """The visibility API's place, answering every caller the proxy lets through."""

    class view:
        @staticmethod
        def start() -> None: ...

        @staticmethod
        def stop() -> None: ...

    def get(self, path: str, caller: str | None) -> api_server.Answer:
        if caller is None:
            return api_server.status(401, "Unauthorized", "no front proxy")
        return api_server.Answer(200, {"caller": caller})


class Proxy:
    """The front proxy as the API server publishes it (None: cannot be read now)."""

    def read(self) -> FrontProxy:
        if self.published is None:
            raise ProxyUnreadable("HTTP 503: the API server is away")
        return self.published

    def __init__(self, tmp_path: Path) -> None:
        self.folder = tmp_path
        self.published: FrontProxy | None = None
        self.client = self.rotate("one")

    def rotate(self, name: str) -> tuple[Path, Path]:
        cert, key = self_signed([PROXY_NAME], client=True)
        (self.folder / f"{name}.crt").write_bytes(cert)
        (self.folder / f"{name}.key").write_bytes(key)
        self.published = FrontProxy(cert.decode(), frozenset({PROXY_NAME}))
        return self.folder / f"{name}.crt", self.folder / f"{name}.key"


def renew(cert_dir: Path, key_too: bool = True) -> bytes:
    cert, key = self_signed(["127.0.0.1"])
    (cert_dir / "tls.crt").write_bytes(cert)
    if key_too:
        (cert_dir / "tls.key").write_bytes(key)
    return cert


@contextlib.contextmanager
def serving(tmp_path: Path, every: float) -> Iterator[tuple[ServingTls, int, Path, Proxy]]:
    """A visibility server on a certificate of its own folder, checked every ``every``."""
    cert_dir = tmp_path / "certs"
    cert_dir.mkdir()
    renew(cert_dir)
    proxy = Proxy(tmp_path)
    tls = ServingTls(cert_dir, ["127.0.0.1"], proxy.read, every=every)
    server = api_server.VisibilityServer("127.0.0.1:0", Answering(), tls)  # type: ignore[arg-type]
    server.start()
    try:
        yield tls, server.port, cert_dir, proxy
    finally:
        server.stop()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[ServingTls, int, Path, Proxy]]:
    with serving(tmp_path, every=3600) as parts:
        yield parts


def ask(port: int, client: tuple[Path, Path] | None) -> tuple[int, bytes]:
    """The answer's status and the certificate the server showed (DER)."""
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    if client is not None:
        context.load_cert_chain(*client)
    connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        connection.connect()
        shown = connection.sock.getpeercert(binary_form=True) or b""  # type: ignore[attr-defined]
        connection.request("GET", "/apis", headers={"X-Remote-User": "alice"})
        response = connection.getresponse()
        response.read()
        return response.status, shown
    finally:
        connection.close()


def der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())


def test_a_certificate_renewed_in_place_is_served_to_new_connections(served) -> None:
    tls, port, cert_dir, proxy = served
    first = (cert_dir / "tls.crt").read_bytes()
    assert ask(port, proxy.client) == (200, der(first))
    assert not tls.check()  # nothing changed
    renewed = renew(cert_dir)
    assert ask(port, proxy.client)[1] == der(first)  # not checked yet
    assert tls.check()
    assert ask(port, proxy.client) == (200, der(renewed))


def test_a_certificate_written_before_its_key_keeps_the_old_pair_until_both_are_new(
    served, caplog
) -> None:
    tls, port, cert_dir, proxy = served
    first = (cert_dir / "tls.crt").read_bytes()
    renewed = renew(cert_dir, key_too=False)
    caplog.set_level(logging.INFO, "kbatch.visibility")
    assert not tls.check()
    assert not tls.check()
    assert ask(port, proxy.client)[1] == der(first)
    key = self_signed(["127.0.0.1"])  # the pair written whole
    (cert_dir / "tls.crt").write_bytes(key[0])
    (cert_dir / "tls.key").write_bytes(key[1])
    assert tls.check()
    assert ask(port, proxy.client)[1] == der(key[0]) != der(renewed)
    said = [r.getMessage()[:62] for r in caplog.records]
    assert said == [  # the trouble once, not at every check
        "visibility API: keeps its TLS: the new one cannot be loaded: [",
        "visibility API: its certificate reads again",
        "visibility API: serves with its new certificate",
    ]


def test_a_rotated_front_proxy_ca_is_trusted_once_read_and_the_old_one_no_more(served) -> None:
    tls, port, _, proxy = served
    old_client = proxy.client
    new_client = proxy.rotate("two")
    with pytest.raises((ssl.SSLError, ConnectionError)):
        ask(port, new_client)  # its CA not read yet
    assert tls.check()
    assert ask(port, new_client)[0] == 200
    with pytest.raises((ssl.SSLError, ConnectionError)):
        ask(port, old_client)


def test_a_front_proxy_that_cannot_be_read_keeps_the_one_it_has(served, caplog) -> None:
    tls, port, _, proxy = served
    proxy.published = None  # the API server away
    assert not tls.check()
    assert not tls.check()
    assert ask(port, proxy.client)[0] == 200
    assert ask(port, None)[0] == 401
    said = [r.getMessage() for r in caplog.records if "front-proxy CA" in r.getMessage()]
    assert said == [  # once, not at every check
        "visibility API: cannot read the API server's front-proxy CA (HTTP 503: the API "
        "server is away): keeps the one it has"
    ]


def test_a_front_proxy_unreadable_at_start_refuses_all_until_it_is_read(tmp_path) -> None:
    proxy = Proxy(tmp_path)
    published = proxy.published
    proxy.published = None
    tls = ServingTls(None, ["127.0.0.1"], proxy.read)
    assert tls.current.proxy == FrontProxy("")
    proxy.published = published
    assert tls.check()
    assert tls.current.proxy == published


def test_a_self_signed_certificate_stays_the_same_across_checks(tmp_path) -> None:
    proxy = Proxy(tmp_path)
    tls = ServingTls(None, ["127.0.0.1"], proxy.read)
    context = tls.current.context
    assert not tls.check()
    assert tls.current.context is context
    proxy.rotate("two")
    assert tls.check()
    assert tls.current.proxy == proxy.published


def test_unreadable_certificate_files_at_start_are_an_error(tmp_path) -> None:
    with pytest.raises(FileNotFoundError):
        ServingTls(tmp_path, ["127.0.0.1"], lambda: FrontProxy(""))


def test_the_check_runs_on_its_own_while_the_server_serves(tmp_path) -> None:
    with serving(tmp_path, every=0.05) as (_, port, cert_dir, proxy):
        renewed = renew(cert_dir)
        deadline = time.monotonic() + 10
        shown: Any = None
        while shown != der(renewed) and time.monotonic() < deadline:
            time.sleep(0.05)
            shown = ask(port, proxy.client)[1]
        assert shown == der(renewed)
