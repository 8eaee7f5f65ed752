"""The one module that talks to the Kubernetes API server.

Everything else in kbatch calls it with plain data (paths, dicts) and gets plain
data back; only this module imports the ``kubernetes`` client (an import-linter
contract says so; kopf handler modules talk through kopf). It makes the client
from a kubeconfig or the in-cluster service account, sends one JSON request
(``request``), opens a streamed GET (``raw_get``, for list+watch), and turns an
HTTP error into ``ApiError`` with the server's own message.

Raw JSON over the client's ApiClient: no model deserialisation, which would cost
more than the scheduling itself on a large cluster.
"""

import json
from typing import Any

import urllib3
from kubernetes import client, config

ApiClient = client.ApiClient
Configuration = client.Configuration
Timeout = float | tuple[float, float] | None  # seconds, or (connect, read)
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
# Connections kept to the API server: the bind workers, the writer and the watches.
CONNECTION_POOL = 32


class ApiError(RuntimeError):
    """The API server answered with an HTTP error; ``status`` is its code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status


class Unreachable(ApiError):
    """No answer from the API server: the connection failed or timed out (status 0)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)
        self.args = (f"API server unreachable: {message}",)


class Gone(ApiError):
    """410: the resourceVersion asked for is no longer in the server's history."""

    def __init__(self, message: str) -> None:
        super().__init__(410, message)


def api_client(kubeconfig: str | None) -> ApiClient:
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
    return client.ApiClient(configuration)


def client_for(host: str) -> ApiClient:
    """A client for a plain-HTTP API server at ``host`` (a local stub in tools and tests)."""
    return client.ApiClient(client.Configuration(host=host))


def request(
    api: ApiClient,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = JSON,
    timeout: Timeout = 30,
) -> dict[str, Any]:
    """One API call with a JSON body; the decoded answer, or ApiError."""
    method, url, headers, _, post = api.param_serialize(
        method,
        path,
        header_params={"Accept": JSON, "Content-Type": content_type},
        auth_settings=["BearerToken"],
    )
    # the REST client encodes the body as JSON itself
    response = _call(api, method, url, headers, body, post, timeout)
    data = response.data
    if response.status >= 400:
        try:
            message = json.loads(data).get("message", "")
        except ValueError:
            message = data.decode(errors="replace")[:300]
        raise ApiError(response.status, message)
    return json.loads(data) if data else {}


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
    try:
        return api.call_api(method, url, headers, body, post, _request_timeout=timeout).response
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise Unreachable(f"{method} {url}: {exc}") from exc
