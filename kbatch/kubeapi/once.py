"""One GET with the standard library, for a command that asks the API server one
question: ``kbatch explain`` and ``kbatch jobs`` asking ``kbatch run``'s visibility API.
Importing the ``kubernetes`` client costs such a command 0.3 to 0.6 s, more than its
question once the scheduler answers it.

``credentials`` reads what kubectl would use: the kubeconfig named, else in-cluster,
else ``$KUBECONFIG`` (files merged, the first to name an entry wins) or
``~/.kube/config``; its current context's server and CA, client certificate, bearer
token (or token file) or basic auth, and ``insecure-skip-tls-verify``. What it does not
do (an exec or auth-provider plugin, impersonation, a proxy, a TLS server name of its
own, a file it cannot read) makes it answer None, and the caller uses the full client
(``kbatch.kubeapi.client``), which does, or says what is wrong.
"""

from __future__ import annotations

import base64
import http.client
import os
import ssl
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbatch import json_codec, pem
from kbatch.kubeapi.errors import ApiError, Unreachable, message_of

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
# what the full client reads that this one does not: with any, it is used instead
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY")
UNREAD_CLUSTER_FIELDS = ("proxy-url", "tls-server-name")
UNREAD_USER_FIELDS = ("exec", "auth-provider", "as", "as-uid", "as-groups", "as-user-extra")


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to prove who is asking."""

    server: str  # https://host:port, with the path prefix a proxy in front may add
    ca_file: str | None = None
    ca_data: str | None = None  # PEM
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None  # PEM
    key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    basic: tuple[str, str] | None = None
    insecure: bool = False


def credentials(kubeconfig: str | None, environ: Any = None) -> Credentials | None:
    """The credentials the full client would use (its order: the file named, else
    in-cluster, else the default kubeconfig); None where this module cannot use them."""
    environ = os.environ if environ is None else environ
    if any(environ.get(name) for name in PROXY_VARIABLES):
        return None
    if kubeconfig:
        return _from_files([Path(kubeconfig).expanduser()])
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if host and port and (SERVICE_ACCOUNT / "token").exists():
        address = f"[{host}]" if ":" in host else host
        return Credentials(
            server=f"https://{address}:{port}",
            ca_file=str(SERVICE_ACCOUNT / "ca.crt"),
            token_file=str(SERVICE_ACCOUNT / "token"),
        )
    kubeconfigs = str(environ.get("KUBECONFIG") or "").split(os.pathsep)
    listed = [Path(p).expanduser() for p in kubeconfigs if p]
    if not listed:
        return _from_files([Path.home() / ".kube" / "config"])
    # (a file $KUBECONFIG names that is not there is passed over, as kubectl does)
    return _from_files([path for path in listed if path.exists()])


def _from_files(paths: list[Path]) -> Credentials | None:
    merged: dict[str, dict[str, tuple[dict[str, Any], Path]]] = {
        "clusters": {},
        "users": {},
        "contexts": {},
    }
    current = None
    if not paths:
        return None
    for path in paths:
        document = _read(path)
        if document is None:
            return None  # (the full client says what is wrong with it)
        current = current or document.get("current-context")
        for section, entries in merged.items():
            for entry in document.get(section) or []:
                if isinstance(entry, dict) and isinstance(entry.get(section[:-1]), dict):
                    entries.setdefault(str(entry.get("name")), (entry[section[:-1]], path))
    context = merged["contexts"].get(str(current))
    if context is None:
        return None
    cluster = merged["clusters"].get(str(context[0].get("cluster")))
    user = merged["users"].get(str(context[0].get("user")), ({}, Path()))
    if cluster is None:
        return None
    return _credentials_of(cluster, user)


def _read(path: Path) -> dict[str, Any] | None:
    import yaml

    try:
        document = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except (OSError, UnicodeError, yaml.YAMLError):
        return None
    return document if isinstance(document, dict) else None


def _credentials_of(
    cluster: tuple[dict[str, Any], Path], user: tuple[dict[str, Any], Path]
) -> Credentials | None:
    (server_of, cluster_file), (user_of, user_file) = cluster, user
    if any(server_of.get(f) for f in UNREAD_CLUSTER_FIELDS) or any(
        user_of.get(f) for f in UNREAD_USER_FIELDS
    ):
        return None
    server = str(server_of.get("server") or "")
    token_file = _path(user_of.get("tokenFile"), user_file)
    if not server.startswith(("https://", "http://")) or (
        token_file and not os.access(token_file, os.R_OK)
    ):
        return None
    try:
        return Credentials(
            server=server.rstrip("/"),
            ca_file=_path(server_of.get("certificate-authority"), cluster_file),
            ca_data=_decoded(server_of.get("certificate-authority-data"), text=True),
            cert_file=_path(user_of.get("client-certificate"), user_file),
            key_file=_path(user_of.get("client-key"), user_file),
            cert_data=_decoded(user_of.get("client-certificate-data")),
            key_data=_decoded(user_of.get("client-key-data")),
            token=str(user_of["token"]) if user_of.get("token") else None,
            token_file=token_file,
            basic=(str(user_of["username"]), str(user_of["password"]))
            if "username" in user_of and "password" in user_of
            else None,
            insecure=bool(server_of.get("insecure-skip-tls-verify")),
        )
    except ValueError:  # data that is not base64
        return None


def _path(value: Any, defined_in: Path) -> str | None:
    """A file a kubeconfig names: relative to the kubeconfig's own folder."""
    return str(defined_in.parent / str(value)) if value else None


def _decoded(value: Any, text: bool = False) -> Any:
    if not value:
        return None
    data = base64.b64decode(str(value), validate=True)
    return data.decode() if text else data


def get(creds: Credentials, path: str, timeout: float = 30) -> dict[str, Any]:
    """GET ``path`` (with its query); the decoded answer. ApiError with the server's
    message on an HTTP error, Unreachable when no answer came."""
    url = urllib.parse.urlsplit(creds.server)
    headers = {"Accept": "application/json", **_authorization(creds)}
    try:
        if url.scheme == "https":
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                url.hostname or "", url.port, timeout=timeout, context=_tls(creds)
            )
        else:
            connection = http.client.HTTPConnection(url.hostname or "", url.port, timeout=timeout)
        try:
            connection.request("GET", url.path + path, headers=headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
    except (OSError, http.client.HTTPException, ssl.SSLError) as exc:
        raise Unreachable(f"GET {creds.server}{path}: {exc}") from exc
    if response.status >= 400:
        raise ApiError(response.status, message_of(data))
    answer: dict[str, Any] = json_codec.loads(data) if data else {}
    return answer


def _authorization(creds: Credentials) -> dict[str, str]:
    token = creds.token
    if token is None and creds.token_file:
        token = Path(creds.token_file).read_text().strip()
    if token:
        return {"Authorization": f"Bearer {token}"}
    if creds.basic:
        pair = base64.b64encode(":".join(creds.basic).encode()).decode()
        return {"Authorization": f"Basic {pair}"}
    return {}


def _tls(creds: Credentials) -> ssl.SSLContext:
    # (as the kubernetes client reads a kubeconfig: the data, else the file)
    cafile = creds.ca_file if creds.ca_data is None else None
    context = ssl.create_default_context(cafile=cafile, cadata=creds.ca_data)
    if creds.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if creds.cert_file or creds.cert_data:
        _load_client_certificate(context, creds)
    return context


def _load_client_certificate(context: ssl.SSLContext, creds: Credentials) -> None:
    if creds.cert_data is None and creds.key_data is None:
        context.load_cert_chain(str(creds.cert_file), creds.key_file)
        return
    cert = creds.cert_data or Path(str(creds.cert_file)).read_bytes()
    key = creds.key_data or Path(str(creds.key_file or creds.cert_file)).read_bytes()
    pem.load_pair(context, cert, key)
