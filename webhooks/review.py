"""One admission review under kopf, as every kbatch webhook answers it: within the
configurations' timeoutSeconds (``Budget``), after the scheduler's watches have synced
(else kbatch's own 503 "try again"), reading the scheduler's state with what the watches
may not have brought yet confirmed from the API server (``view``), and answering with
what the admission functions decided (``respond``).
"""

import asyncio
import time
import urllib.parse
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import kopf

from kbatch import kubeapi
from kbatch.api import DEFAULT_QUEUE, GROUP, VERSION
from kbatch.api.queue import Queue
from kbatch.cluster import records
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.webhooks import configuration
from kbatch.webhooks.admission.result import Admission
from kbatch.webhooks.admission.view import StateView

# A review is answered within the configurations' timeoutSeconds, less a margin for the
# answer to travel back: past it, the caller would get the API server's "context deadline
# exceeded" instead of kbatch's own 503 saying why. Waiting for the caches to sync stops
# while LOOKUP_RESERVE_SECONDS are left, for the reads that may follow (each at most
# LOOKUP_TIMEOUT_SECONDS). The Job webhook (fail open) never waits: it reads only the
# watched state and the Job index.
REVIEW_SECONDS = configuration.TIMEOUT_SECONDS - 1.0
LOOKUP_TIMEOUT_SECONDS = 1.0
LOOKUP_RESERVE_SECONDS = 2 * LOOKUP_TIMEOUT_SECONDS
Object = dict[str, Any]


class WebhookSettings(Protocol):
    """What the webhooks read of ``kbatch run``'s settings."""

    @property
    def webhook_address(self) -> str: ...
    @property
    def webhook_cert_dir(self) -> Path | None: ...
    @property
    def webhook_host(self) -> str | None: ...
    @property
    def manage_webhooks(self) -> bool: ...
    @property
    def lock_namespace(self) -> str: ...


class Runtime(Protocol):
    """What the webhooks read of ``kbatch run``: its settings, its API client and the
    scheduler's watched state."""

    @property
    def settings(self) -> WebhookSettings: ...
    @property
    def api(self) -> kubeapi.ApiClient: ...
    @property
    def state(self) -> ClusterState: ...
    def synced(self) -> bool: ...
    def webhooks_serving(self) -> None:
        """The webhook server answers now: what was refused before it did may be redone."""


class Budget:
    """What is left of one review's time (``clock``: seconds, monotonic)."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.until = clock() + seconds

    def left(self) -> float:
        return self.until - self.clock()

    def lookup_timeout(self) -> float:
        """The timeout of one API read now; 0 when no time is left for one."""
        left = self.left() - 0.05
        return min(LOOKUP_TIMEOUT_SECONDS, left) if left > 0.05 else 0.0


def respond(answer: Admission, warnings: list[str], patch: kopf.Patch | None = None) -> None:
    warnings.extend(answer.warnings)
    if not answer.allowed:
        raise kopf.AdmissionError(answer.message, code=answer.code or 422)
    if patch is not None:
        for key, value in answer.patch.items():
            patch[key] = value


def as_dict(body: kopf.Body | None) -> Object | None:
    return None if body is None else dict(body)


async def wait_synced(
    runtime: Runtime,
    budget: Budget,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> None:
    """Until the scheduler's state is synced; a 503 "try again" once waiting longer would
    leave too little of the review's time for the reads that follow."""
    while not runtime.synced():
        if budget.left() <= LOOKUP_RESERVE_SECONDS:
            raise kopf.AdmissionError(
                "kbatch is starting (its caches are not synced); try again", code=503
            )
        await sleep(0.05)


async def view(
    runtime: Runtime,
    budget: Budget,
    queue_name: object = None,
    group_jobs: Sequence[Object] = (),
    namespace: str | None = None,
) -> StateView:
    """The scheduler's (synced) state, with the Queue ``queue_name`` read from the API if
    the watch has not brought it yet (a 503 when it cannot be read in the time left),
    and likewise the Namespace ``namespace`` where a queue has a namespaceSelector."""
    queues: dict[str, Queue] = {}
    refused: dict[str, str] = {}  # a Queue kbatch cannot use: the refusal says why
    name = str(queue_name or DEFAULT_QUEUE)
    if name not in runtime.state.queues() and runtime.state.refusal("Queue", "", name) is None:
        timeout = budget.lookup_timeout()
        try:
            if not timeout:
                raise TimeoutError("no time left in this review")
            fetched = await asyncio.to_thread(_read_queue, runtime, name, timeout)
        except kubeapi.ApiError as exc:
            raise kopf.AdmissionError(
                f"kbatch could not read Queue {name!r} from the API server ({exc}); try again",
                code=503,
            ) from exc
        if isinstance(fetched, ObjectError):
            refused[name] = f"{fetched.field}: {fetched.why}" if fetched.field else fetched.why
        elif fetched is not None:
            queues[name] = fetched
    namespaces: dict[str, dict[str, str]] = {}
    if (
        namespace is not None
        and _reads_namespaces(runtime.state, queues)
        and runtime.state.namespace_labels(namespace) is None
    ):
        namespaces[namespace] = await _namespace_labels(runtime, budget, namespace)
    return StateView(runtime.state, lambda ns, group: group_jobs, queues, refused, namespaces)


def _reads_namespaces(state: ClusterState, queues: dict[str, Queue]) -> bool:
    """Does any queue say which namespaces may use it?"""
    known = [*state.queues().values(), *queues.values()]
    return any(queue.spec.namespace_selector is not None for queue in known)


async def _namespace_labels(runtime: Runtime, budget: Budget, name: str) -> dict[str, str]:
    """Namespace ``name``'s labels, read from the API server (the watch has not brought
    it yet; listed by name, with the grant the watch has); a 503 when it cannot be read
    in the time left. A namespace the server does not list has no labels but its name."""
    timeout = budget.lookup_timeout()
    query = urllib.parse.urlencode({"fieldSelector": f"metadata.name={name}"})
    try:
        if not timeout:
            raise TimeoutError("no time left in this review")
        listed = await asyncio.to_thread(
            kubeapi.request, runtime.api, "GET", f"/api/v1/namespaces?{query}", timeout=timeout
        )
        items = listed.get("items") or []
        return records.parse_namespace(items[0]) if items else {}
    except (kubeapi.ApiError, TimeoutError, ObjectError) as exc:
        raise kopf.AdmissionError(
            f"kbatch could not read Namespace {name!r} from the API server ({exc}); try again",
            code=503,
        ) from exc


def _read_queue(runtime: Runtime, name: str, timeout: float) -> Queue | ObjectError | None:
    try:
        raw = kubeapi.request(
            runtime.api, "GET", f"/apis/{GROUP}/{VERSION}/queues/{name}", timeout=timeout
        )
    except kubeapi.ApiError as exc:
        if exc.status == 404:
            return None
        raise
    try:
        return records.parse_queue(raw)
    except ObjectError as exc:
        return exc
