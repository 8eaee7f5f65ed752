"""The HTTPS endpoint the API server calls: kopf's WebhookServer, with

- a self-signed certificate made with ``cryptography`` when no certificate is
  given (kopf's own needs certbuilder and oscrypto; oscrypto cannot load
  OpenSSL 3.0.10 and later);
- a callback on every client config it serves (URL and CA bundle), which
  ``--manage-webhooks`` uses to keep the webhook configurations pointing at it;
- objects given the request's namespace when they come without one.
"""

import asyncio
from collections.abc import AsyncIterator, Callable, Collection
from pathlib import Path
from typing import Any

import kopf

from kbatch.webhooks.certificates import self_signed

ClientConfigFn = Callable[[dict[str, Any]], None]


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
