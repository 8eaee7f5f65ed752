"""The visibility API's TLS: its serving certificate, and the front proxy whose client
certificate it takes (``api_server``), both made again when they change while
``kbatch run`` runs, as Kubernetes' own aggregated API servers do.

cert-manager renews the certificate of ``--visibility-cert-dir`` in place (the Secret's
volume changes under the running process), and the API server's front-proxy CA can be
rotated (``kube-system/extension-apiserver-authentication``). A ``ServingTls`` reads
both again every ``CHECK_SECONDS`` and makes a new context when either differs: new
connections use it, those open keep theirs. A pair it cannot load (a certificate
written before its key) or a CA it cannot read (the API server away) keeps the one it
has, until the next check.
"""

import logging
import ssl
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kbatch import pem
from kbatch.webhooks.certificates import self_signed

CHECK_SECONDS = 60.0
log = logging.getLogger("kbatch.visibility")


@dataclass(frozen=True)
class FrontProxy:
    """Who may call: the API server's front-proxy CA (PEM; empty: nobody) and the common
    names it allows (empty: any it signed)."""

    ca_pem: str
    allowed_names: frozenset[str] = frozenset()


class ProxyUnreadable(Exception):
    """The front proxy cannot be read now (the API server away, or not allowed)."""


@dataclass(frozen=True)
class Tls:
    """What a connection is served with: the context, and the proxy it trusts."""

    context: ssl.SSLContext
    proxy: FrontProxy


def tls_context(certificate: tuple[bytes, bytes], proxy: FrontProxy) -> ssl.SSLContext:
    """The server's TLS with ``certificate`` (PEM chain, key); a client certificate asked
    for, and checked against the front proxy's CA when one is sent."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    pem.load_pair(context, *certificate)
    context.verify_mode = ssl.CERT_OPTIONAL
    if proxy.ca_pem:
        context.load_verify_locations(cadata=proxy.ca_pem)
    return context


class ServingTls:
    """The TLS the server serves with now (``current``), made again when the
    certificate files of ``cert_dir`` (tls.crt, tls.key; None: a self-signed
    certificate for ``hostnames``, kept) or the front proxy (``read_proxy``, which
    raises ProxyUnreadable when it cannot read it) change: ``check``, every ``every``
    seconds between ``start`` and ``stop``. What it cannot read or load is said once,
    not at every check, and again once it can."""

    def __init__(
        self,
        cert_dir: Path | None,
        hostnames: Sequence[str],
        read_proxy: Callable[[], FrontProxy],
        every: float = CHECK_SECONDS,
    ) -> None:
        self._cert_dir = cert_dir
        self._self_signed = None if cert_dir is not None else self_signed(hostnames)
        self._read_proxy = read_proxy
        self._every = every
        self._said: dict[str, str] = {}  # what is wrong now, by topic: said once
        proxy = self._proxy(FrontProxy(""))
        if not proxy.ca_pem:
            log.error("visibility API: no front-proxy CA (the API server's "
                      "--requestheader-client-ca-file): every request is refused")  # fmt: skip
        certificate = self._certificate()  # unreadable at start: kbatch run says so
        self.current = Tls(tls_context(certificate, proxy), proxy)
        self._made_of = (certificate, proxy)
        self._stopped = threading.Event()
        self._thread = threading.Thread(
            target=self._keep, name="kbatch-visibility-tls", daemon=True
        )

    def _proxy(self, kept: FrontProxy) -> FrontProxy:
        """The front proxy as published now; ``kept`` when it cannot be read."""
        try:
            proxy = self._read_proxy()
        except ProxyUnreadable as exc:
            self._say("front proxy", f"cannot read the API server's front-proxy CA ({exc}): "
                      "keeps the one it has")  # fmt: skip
            return kept
        self._say("front proxy", None)
        return proxy

    def _say(self, topic: str, problem: str | None) -> None:
        """Log ``problem`` (None: none) with ``topic`` once, not at every check while it
        lasts, and once that it is over."""
        said = self._said.pop(topic, None)
        if problem is not None:
            self._said[topic] = problem
            if problem != said:
                log.warning("visibility API: %s", problem)
        elif said is not None:
            log.info("visibility API: its %s reads again", topic)

    def _certificate(self) -> tuple[bytes, bytes]:
        if self._self_signed is not None:
            return self._self_signed
        assert self._cert_dir is not None
        return (self._cert_dir / "tls.crt").read_bytes(), (self._cert_dir / "tls.key").read_bytes()

    def check(self) -> bool:
        """Make the TLS again if its certificate or front proxy changed: True if it did."""
        try:
            certificate = self._certificate()
        except OSError as exc:
            self._say("certificate", f"keeps its certificate: cannot read it again: {exc}")
            return False
        proxy = self._proxy(self._made_of[1])
        if (certificate, proxy) == self._made_of:
            self._say("certificate", None)
            return False
        try:
            context = tls_context(certificate, proxy)
        except (ssl.SSLError, OSError, ValueError) as exc:  # e.g. a key not the certificate's
            self._say("certificate", f"keeps its TLS: the new one cannot be loaded: {exc}")
            return False
        self._say("certificate", None)
        what = [name for name, changed in (("certificate", certificate != self._made_of[0]),
                ("front proxy", proxy != self._made_of[1])) if changed]  # fmt: skip
        self.current = Tls(context, proxy)
        self._made_of = (certificate, proxy)
        log.info("visibility API: serves with its new %s", " and ".join(what))
        if not proxy.ca_pem:
            log.error("visibility API: the front-proxy CA is gone: every request is refused")
        return True

    def _keep(self) -> None:
        while not self._stopped.wait(self._every):
            try:
                self.check()
            except Exception:  # a bug: logged, the TLS it has is kept
                log.exception("visibility API: checking its TLS failed")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
