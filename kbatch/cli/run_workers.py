"""The workers ``kbatch run`` runs beside its scheduling loop: the ETA publisher
(``--eta-interval``) and the visibility API (``--visibility-address``), which share one
view of the line (``kbatch.visibility.served``): the publisher hands it each round's
session."""

import argparse
import logging
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kbatch.api import duration

if TYPE_CHECKING:
    from kbatch.visibility.served import VisibilityView
    from kbatch.visibility.tls import FrontProxy

log = logging.getLogger("kbatch.visibility")

FRONT_PROXY_CONFIGMAP = (
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication"
)
Maker = Callable[[Any], Any]  # the process's Runtime -> a worker with start() and stop()


class Workers:
    """Makes the workers ``args`` ask for, each handed the process's Runtime."""

    def __init__(self, args: argparse.Namespace, period: float, names: frozenset[str]) -> None:
        self.args = args
        self.period = period
        self.names = names
        self.eta_interval = duration.parse_duration(args.eta_interval, "--eta-interval")
        self.eta_budget = duration.parse_duration(args.eta_budget, "--eta-budget")
        self._view: VisibilityView | None = None

    def makers(self) -> tuple[Maker, ...]:
        """The makers of the workers asked for (the publisher: unless ``--eta-interval``
        is 0; the visibility API: when ``--visibility-address`` is given)."""
        made: list[Maker] = []
        if self.eta_interval > 0:
            made.append(self.publisher)
        if self.args.visibility_address:
            made.append(self.visibility_server)
        return tuple(made)

    def view(self, runtime: Any) -> "VisibilityView | None":
        """The line the visibility API answers from (None: no visibility API)."""
        if not self.args.visibility_address:
            return None
        if self._view is None:
            from kbatch.visibility.served import VisibilityView

            conf = self.args.scheduler_conf
            source = f"kbatch run's --scheduler-conf {conf}" if conf else "kbatch run's default"
            self._view = VisibilityView(runtime.state, runtime.conf.current, source, self.names)
        return self._view

    def publisher(self, runtime: Any) -> Any:
        from kbatch import kubeapi
        from kbatch.operators.scheduler.runtime.status_writer import status_path
        from kbatch.visibility.publisher import EtaPublisher, PublisherSettings

        def write(namespace: str, name: str, patch: dict[str, Any]) -> None:
            if not runtime.leads():
                raise RuntimeError("this replica no longer leads")
            path = status_path(namespace, name)
            kubeapi.request(runtime.api, "PATCH", path, patch, kubeapi.MERGE_PATCH)

        settings = PublisherSettings(self.eta_interval, self.eta_budget, self.period, self.names)
        view = self.view(runtime)
        return EtaPublisher(
            runtime.state, runtime.conf.current, runtime.may_schedule, write,
            runtime.metrics, settings, busy=runtime.cluster.binds_in_flight,
            offer=None if view is None else view.offer,
            unpublished=None if view is None else view.keep_unpublished,
        )  # fmt: skip

    def visibility_server(self, runtime: Any) -> Any:
        from kbatch.visibility import api_server, tls

        view = self.view(runtime)
        assert view is not None
        cert_dir: Path | None = self.args.visibility_cert_dir
        address = self.args.visibility_address
        serving = tls.ServingTls(
            cert_dir, [address.rpartition(":")[0]], lambda: front_proxy(runtime.api)
        )

        def events(namespace: str, group: str, pods: Collection[str]) -> list[dict[str, Any]]:
            return events_of(runtime.api, namespace, group, pods)

        api = api_server.VisibilityApi(view, events, runtime.synced)
        return api_server.VisibilityServer(address, api, serving)


def front_proxy(api: Any) -> "FrontProxy":
    """Who may call the visibility API: what the API server publishes of its front proxy
    (ProxyUnreadable when it cannot be read)."""
    from kbatch import json_codec, kubeapi
    from kbatch.visibility.tls import FrontProxy, ProxyUnreadable

    try:
        data = kubeapi.request(api, "GET", FRONT_PROXY_CONFIGMAP).get("data") or {}
    except kubeapi.ApiError as exc:
        raise ProxyUnreadable(str(exc)) from exc
    ca = data.get("requestheader-client-ca-file") or ""
    try:
        names = json_codec.loads(data.get("requestheader-allowed-names") or "[]")
    except ValueError:
        names = []
    return FrontProxy(ca, frozenset(str(n) for n in names or ()))


def events_of(api: Any, namespace: str, group: str, pods: Collection[str]) -> list[dict[str, Any]]:
    """The events of the PodGroup ``group`` and of ``pods``, each object's asked for by a
    field selector, at once (the namespace's may be thousands: seconds to list). None,
    with a warning logged, when they cannot be listed."""
    from kbatch import kubeapi

    path = f"/api/v1/namespaces/{namespace}/events"
    objects = [("PodGroup", group), *(("Pod", pod) for pod in sorted(pods))]

    def listed(kind_name: tuple[str, str]) -> list[dict[str, Any]]:
        selector = "involvedObject.kind={},involvedObject.name={}".format(*kind_name)
        return kubeapi.list_items(api, path, {"fieldSelector": selector})

    try:
        with ThreadPoolExecutor(len(objects)) as pool:
            return [event for found in pool.map(listed, objects) for event in found]
    except kubeapi.ApiError as exc:
        log.warning("visibility API: cannot list the events of %s: %s", namespace, exc)
        return []


def add_options(parser: argparse.ArgumentParser) -> None:
    """``--visibility-address`` and ``--visibility-cert-dir``."""
    parser.add_argument(
        "--visibility-address",
        default="",
        metavar="HOST:PORT",
        help="serve the visibility API (visibility.kbatch.io, for kbatch explain and jobs "
        "through the API server's aggregation) here over HTTPS (default '': off)",
    )
    parser.add_argument(
        "--visibility-cert-dir",
        type=Path,
        metavar="DIR",
        help="tls.crt and tls.key for the visibility API; default: self-signed",
    )
