"""Watches that keep a ClusterState current: list, then watch from the list's
resourceVersion. The watch remembers the last resourceVersion it saw (from events
and BOOKMARKs) and, when the server ends it after ``watch_seconds``, resumes from
there: no relist. On 410 Gone (that version is too old) it lists again at once; on
any other error (a dropped connection, a read that timed out on a half-open one)
after a short backoff: 0.25 s doubling to at most 1 s, so that the caches are fresh
within a second or two of an API server's return, without hammering it meanwhile. An
outage is logged once per interval per kind, not once per try. A relist *replaces*
the kind, so nothing deleted meanwhile lingers and nothing is counted twice.

Raw JSON over the kubernetes client's ApiClient: no model deserialisation,
which would cost more than the scheduling itself on a large cluster. Each object is
held without what no part of kbatch reads (``kbatch.cluster.kept_fields``: its
managedFields).
"""

import contextlib
import gc
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kbatch import json_codec, kubeapi
from kbatch.api import DEFAULT_SCHEDULER_NAMES, GROUP, VERSION
from kbatch.cluster import kept_fields, upstream_groups
from kbatch.cluster import volcano as volcano_api
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.operators.scheduler.runtime import outage, upstream, volcano

log = logging.getLogger("kbatch.informer")

CONNECT_TIMEOUT = 10.0
READ_SLACK = 30.0  # a watch silent this long past its own timeout is a dead connection
FIRST_BACKOFF = 0.25  # seconds before listing again after a failure; doubling ...
MOST_BACKOFF = 1.0  # ... to at most this: one try a second per kind during an outage
PAGE_SIZE = 500  # objects a list asks for at once (as client-go's pager does)
Gone = kubeapi.Gone


# How often an informer asks again whether the server serves its resource, while not.
NOT_SERVED_RECHECK = 60.0


@dataclass(frozen=True)
class Resource:
    kind: str
    path: str  # the collection across all namespaces
    # Set when the server may not serve it (an alpha or beta API): the group/versions
    # whose discovery documents may list the collection, the preferred first; the first
    # that does is watched. While none does, or kbatch may not list it, the kind is
    # empty and its informer counts as synced (``Informer``).
    group_versions: tuple[str, ...] = ()

    @property
    def plural(self) -> str:
        return self.path.rpartition("/")[2]


RESOURCES = (
    Resource("Node", "/api/v1/nodes"),
    Resource("Pod", "/api/v1/pods"),
    Resource("PodGroup", f"/apis/{GROUP}/{VERSION}/podgroups"),
    Resource("Queue", f"/apis/{GROUP}/{VERSION}/queues"),
    Resource("PriorityClass", "/apis/scheduling.k8s.io/v1/priorityclasses"),
    Resource("ResourceQuota", "/api/v1/resourcequotas"),
    # Their labels, which a Queue's spec.namespaceSelector reads (DESIGN §14).
    Resource("Namespace", "/api/v1/namespaces"),
    # Their own activeDeadlineSeconds, which ends their pods: what room may be lent to
    # and when kept room frees (``kbatch.cluster.job_records``). Read where kbatch may
    # list them: an RBAC made for an older kbatch leaves the scheduler without them
    # (their pods are lent no room by the Jobs' deadlines), not without a start.
    Resource("Job", "/apis/batch/v1/jobs", ("batch/v1",)),
    # Whether kbatch holds them, where JobSet's CRD is installed: the Jobs JobSet's
    # controller made suspended with a held JobSet are held too, for its group's
    # published estimate (``kbatch.visibility.eta_input.held_with_jobsets``).
    Resource("JobSet", "/apis/jobset.x-k8s.io/v1alpha2/jobsets", ("jobset.x-k8s.io/v1alpha2",)),
    # Where a pod's volumes let it go, and what its bind writes first (``volumes``).
    Resource("PersistentVolumeClaim", "/api/v1/persistentvolumeclaims"),
    Resource("PersistentVolume", "/api/v1/persistentvolumes"),
    Resource("StorageClass", "/apis/storage.k8s.io/v1/storageclasses"),
    # How many volumes of each CSI driver a node may attach (``volume_use``). Read where
    # kbatch may list them: an RBAC made for an older kbatch leaves the scheduler without
    # the limits, not without a start.
    Resource("CSINode", "/apis/storage.k8s.io/v1/csinodes", ("storage.k8s.io/v1",)),
    # Dynamic Resource Allocation (``kbatch.cluster.devices``), where the server serves
    # resource.k8s.io/v1 (1.34 on) and kbatch may list them: else a pod with resource
    # claims waits, told its claim is not found.
    *(
        Resource(kind, f"/apis/resource.k8s.io/v1/{plural}", ("resource.k8s.io/v1",))
        for kind, plural in (
            ("ResourceClaim", "resourceclaims"),
            ("DeviceClass", "deviceclasses"),
            ("ResourceSlice", "resourceslices"),
        )
    ),
)
# Upstream's PodGroups (KEP-4671), where served: scheduled as kbatch's (``upstream``).
UPSTREAM_POD_GROUPS = Resource(
    "UpstreamPodGroup", upstream_groups.COLLECTION, upstream_groups.API_VERSIONS
)
# Volcano's PodGroups and Queues, where its CRDs are installed: scheduled as kbatch's
# (``volcano``).
VOLCANO_RESOURCES = (
    Resource("VolcanoPodGroup", volcano_api.POD_GROUPS, (volcano_api.API_VERSION,)),
    Resource("VolcanoQueue", volcano_api.QUEUES, (volcano_api.API_VERSION,)),
)


class Store(Protocol):
    """Where an informer puts what it lists and watches: a ClusterState, or a
    translator in front of one (``upstream.UpstreamGroups``)."""

    def apply(self, obj: Mapping[str, Any], owned: bool = False) -> None: ...

    def delete(self, kind: str, namespace: str, name: str) -> None: ...

    def replace(
        self, kind: str, objects: Iterable[Mapping[str, Any]], owned: bool = False
    ) -> list[ObjectError]: ...


class Informer:
    """One resource's list+watch loop, on a daemon thread."""

    def __init__(
        self,
        api: kubeapi.ApiClient,
        resource: Resource,
        state: Store,
        on_change: Callable[[], None] = lambda: None,
        watch_seconds: int = 300,
        failures: outage.FailureReport | None = None,
        on_synced: Callable[[], None] = lambda: None,
    ) -> None:
        self.api = api
        self.resource = resource
        self.state = state
        self.on_change = on_change
        self.on_synced = on_synced  # after each (re)list is applied
        self.watch_seconds = watch_seconds
        self.synced = threading.Event()
        self._stop = threading.Event()
        self._relist = threading.Event()
        self._interrupted = False  # by relist(): the watch's error is not a failure
        self._failures = failures or outage.FailureReport(log)
        self._response: Any = None  # the open watch, closed to interrupt it
        self._not_served = ""  # why the resource is not listed, as last logged
        # The collection listed and watched, and the apiVersion its list's items are
        # given ("": as they come): of the version served, for ``group_versions``.
        self._path, self._api_version = resource.path, ""
        self._thread = threading.Thread(
            target=self._run, name=f"informer-{resource.kind}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def relist(self) -> None:
        """Rebuild this kind from a fresh list now (e.g. on taking the lead)."""
        self.synced.clear()
        self._relist.set()
        self._interrupted = True
        self._interrupt()

    def stop(self) -> None:
        self._stop.set()
        self._relist.set()  # (wakes a wait for a resource not served)
        self._interrupt()

    def _interrupt(self) -> None:
        response = self._response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()

    def _run(self) -> None:
        backoff = FIRST_BACKOFF
        version: str | None = None
        kind = self.resource.kind
        while not self._stop.is_set():
            try:
                if version is None or self._relist.is_set():
                    version = self._list()
                    self._failures.succeeded(kind, "watch of %s: listed again", kind)
                version = self._watch(version)
                backoff = FIRST_BACKOFF
            except Gone as exc:  # list again at once: nothing is wrong but the version's age
                version = None
                log.info("watch of %s: %s; listing again", kind, exc)
            except Exception as exc:  # any failure: list again, after a pause
                version = None
                if self._stop.is_set():
                    continue
                if self._interrupted:  # by relist(), on purpose: list again at once
                    self._interrupted = False
                    continue
                self._failures.failed(kind, "watch of %s failed (%s); listing again", kind, exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, MOST_BACKOFF)

    def _list(self) -> str:
        if self.resource.group_versions:
            return self._list_if_served()
        return self._list_served()

    def _list_if_served(self) -> str:
        """List the resource once the server serves it (and lets kbatch list it); until
        then the kind is empty, the informer synced, and it asks again every
        ``NOT_SERVED_RECHECK`` seconds or at once on ``relist``."""
        resource = self.resource
        while not self._stop.is_set():
            why = ""
            served = next(
                (v for v in resource.group_versions
                 if upstream.serves(self.api, v, resource.plural)),
                None,
            )  # fmt: skip
            if served is None:
                versions = " or ".join(resource.group_versions)
                why = f"the server does not serve {versions} {resource.plural}"
            else:
                self._path = f"/apis/{served}/{resource.plural}"
                self._api_version = served
                try:
                    return self._list_served()
                except kubeapi.ApiError as exc:
                    if exc.status != 403:
                        raise
                    why = f"kbatch may not list them ({exc})"
            if why != self._not_served:
                log.info("not watching %s: %s", resource.kind, why)
                self._not_served = why
            self.state.replace(resource.kind, [])
            self._relist.clear()
            self._interrupted = False
            self.synced.set()
            self.on_change()
            self.on_synced()
            self._relist.wait(NOT_SERVED_RECHECK)
        raise RuntimeError("stopped")  # (the loop ends: stop() was called)

    def _list_served(self) -> str:
        """List the kind in pages, and replace it with what they hold: the list's
        resourceVersion. The next page is asked for and decoded on a thread of its own
        while this one applies the last: the server prepares a large list (20,000 pods
        take it seconds) while the pods it sent already are parsed, not after."""
        pages = PageReader(self._get, self.resource.kind)
        pages.start()
        items = self._items(pages)
        for error in self.state.replace(self.resource.kind, items, owned=True):
            log.warning("ignoring %s", error)
        self._relist.clear()
        self._interrupted = False
        self.synced.set()
        self.on_change()
        self.on_synced()
        return pages.version

    def _items(self, pages: "PageReader") -> Iterator[dict[str, Any]]:
        """The listed objects, page after page, each given its kind (and apiVersion)."""
        for page in pages:
            for item in page:
                item["kind"] = self.resource.kind
                if self._api_version:
                    item["apiVersion"] = self._api_version
                yield kept_fields.trim(item)

    def _watch(self, version: str) -> str:
        """Apply events until the watch ends; the last resourceVersion seen."""
        for event in self._stream(version):
            if self._stop.is_set() or self._relist.is_set():
                break
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                message = f"watch error: {obj.get('message', obj)}"
                raise Gone(message) if obj.get("code") == 410 else RuntimeError(message)
            meta = obj.get("metadata") or {}
            version = str(meta.get("resourceVersion") or version)
            if kind == "BOOKMARK":
                continue
            obj["kind"] = self.resource.kind
            if kind == "DELETED":
                self.state.delete(self.resource.kind, meta.get("namespace") or "", meta["name"])
            else:
                try:
                    self.state.apply(kept_fields.trim(obj), owned=True)
                except ObjectError as exc:
                    log.warning("ignoring %s", exc)
            self.on_change()
        return version

    def _stream(self, version: str) -> Iterator[dict[str, Any]]:
        query = {
            "watch": "true",
            "resourceVersion": version,
            "timeoutSeconds": str(self.watch_seconds),
            "allowWatchBookmarks": "true",
        }
        response = self._call(query, timeout=(CONNECT_TIMEOUT, self.watch_seconds + READ_SLACK))
        self._response = response
        if self._relist.is_set() or self._stop.is_set():
            response.release_conn()
            return
        try:
            buffer = b""
            for chunk in response.stream(65536):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield json_codec.loads(line)
        finally:
            self._response = None
            response.release_conn()

    def _get(self, query: dict[str, str]) -> dict[str, Any]:
        return json_codec.loads(self._call(query, timeout=60).data)

    def _call(self, query: dict[str, str], timeout: kubeapi.Timeout) -> Any:
        """GET the resource's collection; the raw urllib3 response (not read yet)."""
        return kubeapi.raw_get(self.api, self._path, query, timeout)


class PageReader:
    """One list's pages (``PAGE_SIZE`` objects each, the last the rest), read and decoded
    on a daemon thread of their own: iterating gives each page's items as it comes,
    and raises what the reading raised (a 410 Gone when the list's continue token has
    expired: the informer lists again). ``version``: the list's resourceVersion, once
    the last page has been given. A server that does not page answers the first
    request whole: one page."""

    def __init__(self, get: Callable[[dict[str, str]], dict[str, Any]], kind: str) -> None:
        self._get = get
        self._pages: queue.SimpleQueue[list[dict[str, Any]] | BaseException | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._read, name=f"list-{kind}", daemon=True)
        self.version = ""

    def start(self) -> None:
        self._thread.start()

    def _read(self) -> None:
        try:
            for body in kubeapi.pages(self._get, page_size=PAGE_SIZE):
                self.version = str(body["metadata"]["resourceVersion"])
                self._pages.put(body.get("items") or [])
        except BaseException as exc:  # handed to the reader of the pages, which raises it
            self._pages.put(exc)
            return
        self._pages.put(None)

    def __iter__(self) -> Iterator[list[dict[str, Any]]]:
        while True:
            page = self._pages.get()
            if page is None:
                return
            if isinstance(page, BaseException):
                raise page
            yield page


class Watches:
    """The informers of every resource in ``RESOURCES``, over one ClusterState.

    ``kbatch run`` starts them before it imports kopf and the scheduler (a second of
    loading), so that the API server prepares the lists meanwhile: 10,000 pods take it
    seconds. ``on_synced`` is called after each informer's (re)list; the runtime sets
    it once it is built (the loop checks the caches when it starts anyway)."""

    def __init__(
        self,
        api: kubeapi.ApiClient,
        scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES),
    ) -> None:
        self.api = api
        self.state = ClusterState(scheduler_names)
        self.on_synced: Callable[[], None] = lambda: None
        self.informers = [
            Informer(api, r, self.state, on_synced=lambda: self.on_synced()) for r in RESOURCES
        ]
        # Upstream's PodGroups, translated into kbatch's as they come (none where not served).
        self.upstream = upstream.UpstreamGroups(self.state)
        self.informers.append(
            Informer(api, UPSTREAM_POD_GROUPS, self.upstream, on_synced=lambda: self.on_synced())
        )
        # Volcano's PodGroups and Queues, likewise (none where its CRDs are not installed).
        self.volcano = volcano.VolcanoObjects(self.state)
        self.informers.extend(
            Informer(api, r, self.volcano, on_synced=lambda: self.on_synced())
            for r in VOLCANO_RESOURCES
        )
        self._started = False

    def start(self) -> None:
        """Start the informers (once)."""
        if self._started:
            return
        self._started = True
        # The cache holds every pod as nested dicts: collect cycles far less often than
        # Python's default, whose full passes over it stall lists and binds for a tenth
        # of a second each.
        gc.set_threshold(100_000, 50, 100)
        for informer in self.informers:
            informer.start()
