"""The kubernetes client of ``kbatch.kubeapi``, whose names are the package's.

Only this module imports the ``kubernetes`` client (an import-linter contract says
so; kopf handler modules talk through kopf). It makes the client
from a kubeconfig or the in-cluster service account, sends one JSON request
(``request``), opens a streamed GET (``raw_get``, for list+watch), and turns an
HTTP error into ``ApiError`` with the server's own message, and no answer at all into
``Unreachable``. It does not retry a failed connection itself: its callers back off
(an outage must not cost one log line per try), and the client's ``exchanges`` tell them
when the server answers again.

Raw JSON over the client's ApiClient: no model deserialisation, which would cost
more than the scheduling itself on a large cluster.
"""

import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import urllib3
from kubernetes import client, config

from kbatch import json_codec
from kbatch.kubeapi.errors import ApiError, Gone, Unreachable, message_of

ApiClient = client.ApiClient
Configuration = client.Configuration
Timeout = float | tuple[float, float] | None  # seconds, or (connect, read)
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
# Merges a list by its patch key: a pod's status.conditions by type.
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
# Connections kept to the API server: the bind workers, the writer and the watches.
CONNECTION_POOL = 32
# No retry of a refused or timed-out connection (the client's default tries 4 times,
# logging each retry): the caller backs off. One retry of an idempotent request whose
# pooled connection the server had closed (a read error on GET), nothing else.
RETRIES = urllib3.Retry(total=1, connect=0, read=1, redirect=0, status=0, other=0)
# How often a request may run the client's token refresh hook (see ``TokenRefresh``).
TOKEN_CHECK_SECONDS = 1.0


class Exchanges:
    """Requests sent to the API server, numbered in the order sent, and the highest
    number answered: one that saw a request fail asks whether one sent after it has been
    answered since (``answered_since``), i.e. whether the server is back."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.sent = 0
        self.answered = 0

    def send(self) -> int:
        with self._lock:
            self.sent += 1
            return self.sent

    def answer(self, number: int) -> None:
        with self._lock:
            self.answered = max(self.answered, number)

    def answered_since(self, sent: int) -> bool:
        """Has a request sent after the ``sent``-th been answered?"""
        return self.answered > sent


class Client(client.ApiClient):
    """The kubernetes ApiClient kbatch talks through, with the requests sent through it
    numbered (``exchanges``): a bind that got no answer is held until a request sent after
    it, by any of the threads sharing this client, is answered. Each client counts its
    own: another client's answers (another server, a test's) tell nothing of this one's."""

    def __init__(self, configuration: Configuration) -> None:
        super().__init__(configuration)
        self.exchanges = Exchanges()


def exchanges_of(api: Any) -> Exchanges:
    """The requests sent through ``api`` and answered: its own if it is a ``Client``,
    else a new count (a client made elsewhere, or a test's stand-in, is never told)."""
    return api.exchanges if isinstance(api, Client) else Exchanges()


class TokenRefresh:
    """The client's token refresh hook, run at most once every ``seconds``.

    The kubeconfig and in-cluster loaders install a hook that every request runs: it
    checks the token's expiry (refreshing it five minutes early, or re-reading the
    service account's token file once a minute) and sets the configuration's fields
    again, the host's proxy from the environment among them: about 0.04 ms of a
    request's 0.35 ms, in a burst of 10,000 binds. Once a second is as current. The
    kubeconfig loader installs a new hook each time it runs; that one is kept."""

    def __init__(self, configuration: Configuration, seconds: float = TOKEN_CHECK_SECONDS):
        # the client types the hook as None, though its loaders set functions
        self._hook: Callable[[Configuration], None] = configuration.refresh_api_key_hook  # type: ignore[assignment]
        self._seconds = seconds
        self._next = 0.0
        self._lock = threading.Lock()
        configuration.refresh_api_key_hook = self  # type: ignore[assignment]

    def __call__(self, configuration: Configuration) -> None:
        if time.monotonic() < self._next:
            return
        with self._lock:
            if time.monotonic() < self._next:
                return
            self._hook(configuration)
            hook: Any = configuration.refresh_api_key_hook
            if hook is not self:  # the loader's new hook
                self._hook = hook
                configuration.refresh_api_key_hook = self  # type: ignore[assignment]
            self._next = time.monotonic() + self._seconds


def refresh_tokens_at_most_every_second(api: ApiClient) -> ApiClient:
    """``api`` with its token refresh hook, if it has one, run at most once a second."""
    configuration = api.configuration
    hook = configuration.refresh_api_key_hook
    if hook is not None and not isinstance(hook, TokenRefresh):
        TokenRefresh(configuration)
    return api


def api_client(kubeconfig: str | None) -> Client:
    """A client for ``kubeconfig``; without one, in-cluster credentials, else the
    default kubeconfig."""
    configuration = client.Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    configuration.connection_pool_maxsize = CONNECTION_POOL
    configuration.retries = RETRIES
    api = Client(configuration)
    refresh_tokens_at_most_every_second(api)
    return api


def client_for(host: str) -> Client:
    """A client for a plain-HTTP API server at ``host`` (a local stub in tools and tests)."""
    return Client(client.Configuration(host=host, retries=RETRIES))


def request(
    api: ApiClient,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = JSON,
    timeout: Timeout = 30,
    query: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One API call with a JSON body (and ``query`` parameters); the decoded answer, or
    ApiError."""
    method, url, headers, _, post = api.param_serialize(
        method,
        path,
        query_params=list(query.items()) if query else None,
        header_params={"Accept": JSON, "Content-Type": content_type},
        auth_settings=["BearerToken"],
    )
    # the REST client encodes the body as JSON itself
    response = _call(api, method, url, headers, body, post, timeout)
    data = _body(response, method, url)
    if response.status >= 400:
        raise ApiError(response.status, message_of(data))
    return json_codec.loads(data) if data else {}


def _body(response: Any, method: str, url: str) -> bytes:
    """The whole answer; Unreachable when the connection broke before its end (e.g. the
    server's request timeout cutting a collection DELETE's long answer short): what the
    server did is then as unknown as with no answer at all."""
    try:
        data: bytes = response.data
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unreachable(f"{method} {url}: the answer was cut short: {exc}") from exc
    return data


def raw_get(api: ApiClient, path: str, query: dict[str, str], timeout: Timeout) -> Any:
    """GET ``path`` with ``query``; the raw urllib3 response, not read yet (a list to
    decode, or a watch to stream). Gone on 410, ApiError on any other HTTP error."""
    method, url, headers, body, post = api.param_serialize(
        "GET",
        path,
        query_params=list(query.items()),
        header_params={"Accept": JSON},
        auth_settings=["BearerToken"],
    )
    response = _call(api, method, url, headers, body, post, timeout)
    if response.status >= 400:
        text = response.data.decode(errors="replace")[:300]
        response.release_conn()
        message = f"GET {path}: {text}"
        raise Gone(message) if response.status == 410 else ApiError(response.status, message)
    return response


def _call(
    api: ApiClient, method: str, url: str, headers: Any, body: Any, post: Any, timeout: Timeout
) -> Any:
    """The raw response; Unreachable when none came (a failed or timed-out connection)."""
    exchanges = exchanges_of(api)
    number = exchanges.send()
    try:
        response = api.call_api(method, url, headers, body, post, _request_timeout=timeout)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unreachable(f"{method} {url}: {exc}") from exc
    except client.ApiException as exc:
        if exc.status == 0 and "SSLError" in str(exc.reason):  # a TLS handshake cut short
            raise Unreachable(f"{method} {url}: {exc.reason}") from exc
        raise
    exchanges.answer(number)
    return response.response


def pages(
    get: Callable[[dict[str, str]], dict[str, Any]],
    query: dict[str, str] | None = None,
    page_size: int = 500,
) -> Iterator[dict[str, Any]]:
    """The decoded answers of one list read in pages of ``page_size`` (limit and
    continue, as client-go's pager reads), ``get`` answering each page's query; a
    server that does not page answers the first whole, with no continue token."""
    params = {**(query or {}), "limit": str(page_size)}
    while True:
        body = get(params)
        yield body
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return
        params = {**params, "continue": str(token)}


def list_items(
    api: ApiClient,
    path: str,
    query: dict[str, str] | None = None,
    page_size: int = 500,
    timeout: Timeout = 60,
) -> list[dict[str, Any]]:
    """Every item of the collection at ``path`` (all pages, ``page_size`` at a time),
    as the server lists them (without ``kind``); ApiError as ``raw_get`` raises it."""

    def get(params: dict[str, str]) -> dict[str, Any]:
        response = raw_get(api, path, params, timeout)
        try:
            body: dict[str, Any] = json_codec.loads(response.data)
        finally:
            response.release_conn()
        return body

    return [item for body in pages(get, query, page_size) for item in body.get("items") or []]


def openapi_schemas(api: ApiClient, group_version: str) -> dict[str, Any] | None:
    """The schemas, by name, of the OpenAPI v3 document the server serves for
    ``group_version`` (its discovery path: "apis/batch/v1", "api/v1"); None where the
    server serves no OpenAPI v3 (before Kubernetes 1.23) or not that group version.
    ApiError (Unreachable) as ``request`` raises it."""
    try:
        index = request(api, "GET", "/openapi/v3")
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    entry = (index.get("paths") or {}).get(group_version)
    if not isinstance(entry, dict):
        return None
    # the document's address carries its hash, so that clients may cache it
    url = entry.get("serverRelativeURL") or f"/openapi/v3/{group_version}"
    path, _, query = str(url).partition("?")
    document = request(api, "GET", path, query=dict(urllib.parse.parse_qsl(query)))
    schemas = (document.get("components") or {}).get("schemas")
    return schemas if isinstance(schemas, dict) else {}
