"""The one package that talks to the Kubernetes API server.

Everything else in kbatch calls it with plain data (paths, dicts) and gets plain data
back; only this package imports the ``kubernetes`` client (an import-linter contract
says so; kopf handler modules talk through kopf):

- ``client``: the kubernetes client, for everything that lists, watches and writes.
  Its names are this package's (``kubeapi.request``, ``kubeapi.api_client``, ...),
  imported when first used: the client's import takes 0.3 to 0.6 s, which a command
  that asks one question would pay for nothing.
- ``once``: one GET with the standard library (``kbatch explain`` asking the
  scheduler).
- ``errors``: what both raise, ``ApiError`` with the server's own message and
  ``Unreachable`` when no answer came.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

from kbatch.kubeapi.errors import ApiError, Gone, Unreachable

if TYPE_CHECKING:
    from kbatch.kubeapi.client import JSON as JSON
    from kbatch.kubeapi.client import JSON_PATCH as JSON_PATCH
    from kbatch.kubeapi.client import MERGE_PATCH as MERGE_PATCH
    from kbatch.kubeapi.client import STRATEGIC_MERGE_PATCH as STRATEGIC_MERGE_PATCH
    from kbatch.kubeapi.client import ApiClient as ApiClient
    from kbatch.kubeapi.client import Client as Client
    from kbatch.kubeapi.client import Configuration as Configuration
    from kbatch.kubeapi.client import Exchanges as Exchanges
    from kbatch.kubeapi.client import Timeout as Timeout
    from kbatch.kubeapi.client import TokenRefresh as TokenRefresh
    from kbatch.kubeapi.client import api_client as api_client
    from kbatch.kubeapi.client import client_for as client_for
    from kbatch.kubeapi.client import exchanges_of as exchanges_of
    from kbatch.kubeapi.client import list_items as list_items
    from kbatch.kubeapi.client import openapi_schemas as openapi_schemas
    from kbatch.kubeapi.client import pages as pages
    from kbatch.kubeapi.client import raw_get as raw_get
    from kbatch.kubeapi.client import (
        refresh_tokens_at_most_every_second as refresh_tokens_at_most_every_second,
    )
    from kbatch.kubeapi.client import request as request

__all__ = ["ApiError", "Gone", "Unreachable"]
SUBMODULES = ("client", "errors", "once")
CLIENT = "kbatch.kubeapi.client"


def __getattr__(name: str) -> Any:
    """The client's ``name``, importing the client on first use (PEP 562)."""
    if name.startswith("__"):
        raise AttributeError(name)
    if name in SUBMODULES:  # ``from kbatch.kubeapi import once`` asks here first
        return importlib.import_module(f"{__name__}.{name}")
    client = sys.modules.get(CLIENT) or importlib.import_module(CLIENT)
    try:  # (not kept here: a test's stand-in for a client function is seen by all)
        return getattr(client, name)
    except AttributeError:
        raise AttributeError(f"module 'kbatch.kubeapi' has no attribute {name!r}") from None
