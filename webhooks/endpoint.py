"""The HTTPS endpoint the API server calls: kopf's WebhookServer, with

- a self-signed certificate made with ``cryptography`` when no certificate is
  given (kopf's own needs certbuilder and oscrypto; oscrypto cannot load
  OpenSSL 3.0.10 and later);
- a callback on every client config it serves (URL and CA bundle), which
  ``--manage-webhooks`` uses to keep the webhook configurations pointing at it;
- objects given the request's namespace when they come without one.
"""

import asyncio
import datetime
import ipaddress
from collections.abc import AsyncIterator, Callable, Collection
from pathlib import Path
from typing import Any

import kopf
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ClientConfigFn = Callable[[dict[str, Any]], None]
VALID_DAYS = 365


class WebhookServer(kopf.WebhookServer):
    def __init__(self, *, on_client_config: ClientConfigFn | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.on_client_config = on_client_config

    async def __call__(self, fn: Any) -> AsyncIterator[Any]:
        async def with_namespace(
            request: Any,
            *,
            webhook: str | None = None,
            headers: dict[str, str] | None = None,
            sslpeer: dict[str, Any] | None = None,
        ) -> Any:
            review = namespaced(request)
            return await fn(review, webhook=webhook, headers=headers, sslpeer=sslpeer)

        async for client_config in super().__call__(with_namespace):
            if self.on_client_config is not None:
                await asyncio.to_thread(self.on_client_config, dict(client_config))
            yield client_config

    @staticmethod
    def build_certificate(
        hostnames: Collection[str], password: str | None = None
    ) -> tuple[bytes, bytes]:
        return self_signed(hostnames, password)


def namespaced(review: dict[str, Any]) -> dict[str, Any]:
    """The review with ``metadata.namespace`` set on its objects from the request's
    namespace: API servers before 1.22 send a namespaced object as its client wrote it
    (often without one), and set it only after admission."""
    payload = review.get("request") or {}
    namespace = payload.get("namespace")
    if namespace:
        for key in ("object", "oldObject"):
            obj = payload.get(key)
            if isinstance(obj, dict) and not (obj.get("metadata") or {}).get("namespace"):
                obj["metadata"] = {**(obj.get("metadata") or {}), "namespace": namespace}
    return review


def self_signed(hostnames: Collection[str], password: str | None = None) -> tuple[bytes, bytes]:
    """A self-signed CA certificate for ``hostnames`` (IPs and DNS names as SANs; the first
    DNS name, else the first IP, as common name) and its key, both PEM."""
    names: list[str] = []
    ips: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []
    for hostname in dict.fromkeys(hostnames):
        try:
            ip = ipaddress.ip_address(hostname)
        except ValueError:
            names.append(hostname)
            continue
        if not ip.is_unspecified:
            ips.append(ip)
    common = names[0] if names else str(ips[0]) if ips else "localhost"
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in names]
    sans += [x509.IPAddress(ip) for ip in ips]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode())
        if password
        else serialization.NoEncryption()
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, encryption
    )
    return certificate.public_bytes(serialization.Encoding.PEM), key_pem


def server(
    address: str,
    cert_dir: Path | None = None,
    host: str | None = None,
    on_client_config: ClientConfigFn | None = None,
) -> WebhookServer:
    """The server for ``--webhook-address HOST:PORT`` and ``--webhook-cert-dir``: the
    directory's tls.crt and tls.key (and ca.crt, the bundle for the configurations,
    when present), else a self-signed certificate for HOST and ``host``."""
    listen, _, port = address.rpartition(":")
    listen = listen.strip("[]")
    kwargs: dict[str, Any] = {}
    if cert_dir is not None:
        kwargs = {"certfile": cert_dir / "tls.crt", "pkeyfile": cert_dir / "tls.key"}
        if (cert_dir / "ca.crt").is_file():
            kwargs["cafile"] = cert_dir / "ca.crt"
    return WebhookServer(
        addr=listen or None,
        port=int(port),
        host=host or None,
        on_client_config=on_client_config,
        **kwargs,
    )
