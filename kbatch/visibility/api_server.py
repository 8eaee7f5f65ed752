"""``kbatch run``'s visibility API: an aggregated API of the Kubernetes API server
(``visibility.kbatch.io/v1alpha1``, registered by the chart's APIService, as Kueue's
``visibility.kueue.x-k8s.io``), answered from the scheduler's own state
(``kbatch.visibility.served``).

    GET /apis/visibility.kbatch.io/v1alpha1/namespaces/NS/podgroups/NAME/explanation
    GET /apis/visibility.kbatch.io/v1alpha1[/namespaces/NS]/waitingjobs
    GET /apis/visibility.kbatch.io/v1alpha1/queuesummaries

Each answers the document ``kbatch explain -o json``, ``kbatch jobs -o json`` or
``kbatch queues -o json`` prints (without an estimate's ``eta`` unless one is published;
see ``served``). The queues' resource is ``queuesummaries``, cluster-scoped as Queues
are: not ``queues``, which would make ``kubectl get queues`` ambiguous with the CRD.

The API server authenticates and authorizes the user (RBAC on ``podgroups/explanation``,
``waitingjobs`` and ``queuesummaries`` of the group) and proxies the request here with
its front-proxy client certificate. This server takes only requests that carry that
certificate: signed by the CA the API server publishes in
``kube-system/extension-apiserver-authentication`` (``requestheader-client-ca-file``)
and, when the API server names them, with one of its allowed common names. Anything
else is refused (401); a replica whose caches are not synced answers 503. Discovery
(``/apis``, the group, the version) answers anyone.

HTTPS with the certificate of ``--visibility-cert-dir`` (tls.crt, tls.key), else a
self-signed one; both it and the front proxy are read again when they change (``tls``).
"""

import logging
import re
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kbatch import json_codec
from kbatch.visibility.served import API_GROUP, API_VERSION, GROUP_VERSION, Events, VisibilityView
from kbatch.visibility.tls import FrontProxy, ServingTls

log = logging.getLogger("kbatch.visibility")

ROOT = f"/apis/{GROUP_VERSION}"
_NAME = r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?"
EXPLANATION = re.compile(
    rf"{ROOT}/namespaces/(?P<ns>{_NAME})/podgroups/(?P<name>{_NAME})/explanation"
)
WAITING = re.compile(rf"{ROOT}(/namespaces/(?P<ns>{_NAME}))?/waitingjobs")
QUEUE_SUMMARIES = f"{ROOT}/queuesummaries"
RESOURCES = [
    {"name": "podgroups/explanation", "singularName": "", "namespaced": True,
     "kind": "Explanation", "verbs": ["get"]},
    {"name": "waitingjobs", "singularName": "", "namespaced": True,
     "kind": "WaitingJobs", "verbs": ["list"]},
    {"name": "queuesummaries", "singularName": "", "namespaced": False,
     "kind": "QueueSummaries", "verbs": ["list"]},
]  # fmt: skip
GROUP = {
    "name": API_GROUP,
    "versions": [{"groupVersion": GROUP_VERSION, "version": API_VERSION}],
    "preferredVersion": {"groupVersion": GROUP_VERSION, "version": API_VERSION},
}
HANDSHAKE_SECONDS = 10.0
Object = dict[str, Any]


@dataclass(frozen=True)
class Answer:
    code: int
    body: Object


def status(code: int, reason: str, message: str) -> Answer:
    """A Kubernetes Status: what clients read an error's message from."""
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}  # fmt: skip
    return Answer(code, body)


class VisibilityApi:
    """The answers, by path; ``events`` lists an explanation's events
    (``VisibilityView.explanation``), ``ready()`` says whether the caches are synced."""

    def __init__(
        self,
        view: VisibilityView,
        events: Events,
        ready: Callable[[], bool],
    ) -> None:
        self.view = view
        self.events = events
        self.ready = ready

    def get(self, path: str, caller: str | None) -> Answer:
        """The answer to GET ``path``; ``caller``: the front proxy's user, None when the
        request did not come through it."""
        if path == "/apis":
            return Answer(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [GROUP]})
        if path == f"/apis/{API_GROUP}":
            return Answer(200, {"kind": "APIGroup", "apiVersion": "v1", **GROUP})
        if path == ROOT:
            return Answer(200, {"kind": "APIResourceList", "apiVersion": "v1",
                                "groupVersion": GROUP_VERSION, "resources": RESOURCES})  # fmt: skip
        explained, waiting = EXPLANATION.fullmatch(path), WAITING.fullmatch(path)
        queues = path == QUEUE_SUMMARIES
        if explained is None and waiting is None and not queues:
            return status(404, "NotFound", f"the server could not find {path}")
        if caller is None:
            return status(401, "Unauthorized", "only the API server's front proxy may ask")
        if not self.ready():
            return status(503, "ServiceUnavailable", "kbatch's caches are not synced yet")
        if queues:
            return Answer(200, self.view.queue_summaries())
        if waiting is not None:
            return Answer(200, self.view.waiting_jobs(waiting["ns"]))
        assert explained is not None
        namespace, name = explained["ns"], explained["name"]
        data = self.view.explanation(namespace, name, self.events)
        if data is None:
            return status(404, "NotFound", f"no PodGroup or pod {namespace}/{name}")
        return Answer(200, data)


def caller_of(peer: Object | None, headers: Any, proxy: FrontProxy) -> str | None:
    """The user the front proxy asks for (``X-Remote-User``), when ``peer`` (the
    verified client certificate) is the front proxy's; else None."""
    if not peer:
        return None
    names = {
        value for field in peer.get("subject", ()) for key, value in field if key == "commonName"
    }
    if proxy.allowed_names and not names & proxy.allowed_names:
        return None
    return str(headers.get("X-Remote-User") or "")


class _TlsServer(ThreadingHTTPServer):
    """A threading HTTP server whose connections speak TLS, each shaken hands with in its
    own thread (a slow client holds up no other)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: Any, tls: ServingTls):
        self.tls = tls
        super().__init__(address, handler)

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(HANDSHAKE_SECONDS)
        try:
            tls = self.tls.current.context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError) as exc:  # no TLS, a certificate not the proxy's
            log.debug("visibility API: refused a connection from %s: %s", client_address, exc)
            return
        try:
            tls.settimeout(None)
            super().finish_request(tls, client_address)
        finally:
            tls.close()


class VisibilityServer:
    """The HTTPS server of ``--visibility-address HOST:PORT`` (start/stop: one of
    ``kbatch run``'s background workers)."""

    def __init__(self, address: str, api: VisibilityApi, tls: ServingTls):
        host, _, port = address.rpartition(":")
        answer = api.get
        self.view = api.view
        self.tls = tls

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server calls it by this name
                peer = self.connection.getpeercert()
                caller = caller_of(peer, self.headers, tls.current.proxy)
                try:
                    reply = answer(self.path.split("?")[0], caller)
                except Exception as exc:  # a bug: answered, logged, the server goes on
                    log.exception("visibility API: GET %s failed", self.path)
                    reply = status(500, "InternalError", f"kbatch could not answer: {exc}")
                body = json_codec.dumps(reply.body)
                self.send_response(reply.code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                log.debug("visibility API: " + format, *args)

        self.server = _TlsServer((host.strip("[]") or "0.0.0.0", int(port)), Handler, tls)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="kbatch-visibility", daemon=True
        )

    def start(self) -> None:
        self.view.start()
        self.tls.start()
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.tls.stop()
        self.view.stop()
