"""kbatch's admission webhooks under kopf (DESIGN §7): ``register(registry, runtime,
delayed)`` adds them, and the kopf index of kbatch's Jobs by PodGroup that they read,
to ``kbatch run``'s one kopf registry when ``--webhook-address`` is given. (The held
Jobs' release is a controller's: ``kbatch.operators.jobs``.)

The handlers are thin: they gather what the admission functions read (the
scheduler's watched ClusterState; the pod templates of Jobs from a kopf index of
Jobs by PodGroup) and answer with what those functions decide. Paths, rules and
failure policies: ``configuration.py`` and webhooks/README.md.

Reads that the watches may not have caught up with are confirmed with the API:
a Queue created a moment before its first PodGroup, the Job created a moment
before its PodGroup. Until the watches have synced, kbatch's own resources are
refused (fail closed, "try again") and Jobs are never held.
"""

import asyncio
import logging
import time
import types
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
from kbatch.webhooks import configuration, endpoint, jobs
from kbatch.webhooks.admission import job, jobgroup, podgroup, queue
from kbatch.webhooks.admission.result import Admission
from kbatch.webhooks.admission.view import StateView

log = logging.getLogger("kbatch.webhooks")

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
JobIndex = jobs.JobIndex
NO_JOBS: JobIndex = types.MappingProxyType({})


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


class RefusalsAreAnswers(logging.Filter):
    """kopf logs each refusal of a webhook as an error ("Webhook 'validate-queue' failed
    permanently: ..."); for kbatch a refusal is an answer: INFO. Other failures stay errors."""

    PREFIXES = tuple(f"Webhook '{hook.path}' failed permanently: " for hook in configuration.HOOKS)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and record.getMessage().startswith(self.PREFIXES):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


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


def register(
    registry: kopf.OperatorRegistry, runtime: Runtime, delayed: jobs.DelayedPodCreation
) -> None:
    """The admission handlers and the Job index (when webhooks are on). ``delayed``:
    whether Jobs are held (learned at start when not known yet)."""
    settings = runtime.settings
    if not settings.webhook_address:
        return
    kopf_objects = logging.getLogger("kopf.objects")
    if not any(isinstance(f, RefusalsAreAnswers) for f in kopf_objects.filters):
        kopf_objects.addFilter(RefusalsAreAnswers())

    @kopf.on.startup(registry=registry)
    def webhook_server(settings: kopf.OperatorSettings, **_: Any) -> None:
        skip = ("kube-system", runtime.settings.lock_namespace)

        def serving(client_config: Object) -> None:
            """The server listens: point the configurations at it (when kbatch keeps
            them), and redo what was refused while it could not answer."""
            if runtime.settings.manage_webhooks:
                configuration.apply(runtime.api, configuration.configurations(client_config, skip))
            runtime.webhooks_serving()

        if runtime.settings.manage_webhooks:  # a killed run's, refusing all at a dead address
            configuration.remove_stale(runtime.api)
        settings.admission.server = endpoint.server(
            runtime.settings.webhook_address,
            runtime.settings.webhook_cert_dir,
            runtime.settings.webhook_host,
            serving,
        )
        settings.admission.managed = None  # kbatch writes its own (configuration.py)
        delayed.learn(runtime.api, time.monotonic())

    if settings.manage_webhooks:

        @kopf.on.cleanup(registry=registry)
        def remove_webhook_configurations(**_: Any) -> None:
            configuration.remove(runtime.api)

    # The id is the keyword the handlers read it by (kopf's default, the qualified
    # name "register.<locals>.jobs_by_group", is no keyword: they would get NO_JOBS).
    @kopf.index("batch", "v1", "jobs", id="jobs_by_group", registry=registry)
    def jobs_by_group(
        body: kopf.Body, namespace: str | None, name: str, **_: Any
    ) -> dict[tuple[str, str], Object] | None:
        group = job.kbatch_group_of(body, runtime.state.scheduler_names)
        namespace = namespace or "default"
        return None if group is None else {(namespace, group): jobs.slim_job(body, namespace, name)}

    @kopf.on.mutate(
        GROUP,
        VERSION,
        "podgroups",
        id=configuration.MUTATE_POD_GROUP,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )
    async def mutate_pod_group(
        body: kopf.Body,
        patch: kopf.Patch,
        warnings: list[str],
        old: kopf.Body | None = None,
        jobs_by_group: JobIndex = NO_JOBS,
        **_: Any,
    ) -> None:
        budget = Budget(REVIEW_SECONDS)
        await _wait_synced(runtime, budget)
        obj = dict(body)
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        group_jobs: Sequence[Object] = ()
        malformed = not isinstance(meta, dict) or not isinstance(spec, dict)  # mutate says so
        if not malformed and spec.get("minResources") is None:
            namespace = str(meta.get("namespace") or "default")
            name = str(meta.get("name"))
            group_jobs = await _group_jobs(runtime, jobs_by_group, namespace, name, budget)
        view = await _view(runtime, budget, group_jobs=group_jobs)
        _respond(podgroup.mutate(obj, _dict(old), view), warnings, patch)

    @kopf.on.validate(
        GROUP,
        VERSION,
        "podgroups",
        id=configuration.VALIDATE_POD_GROUP,
        operations=["CREATE", "UPDATE"],
        registry=registry,
    )
    async def validate_pod_group(
        body: kopf.Body, warnings: list[str], old: kopf.Body | None = None, **_: Any
    ) -> None:
        budget = Budget(REVIEW_SECONDS)
        await _wait_synced(runtime, budget)
        obj = dict(body)
        spec = obj.get("spec")
        queue_name = spec.get("queue") if isinstance(spec, dict) else None  # validate says so
        view = await _view(runtime, budget, queue_name=queue_name)
        _respond(podgroup.validate(obj, _dict(old), view), warnings)

    @kopf.on.validate(
        GROUP,
        VERSION,
        "queues",
        id=configuration.VALIDATE_QUEUE,
        operations=["CREATE", "UPDATE", "DELETE"],
        registry=registry,
    )
    async def validate_queue(
        body: kopf.Body, warnings: list[str], operation: str = "", **_: Any
    ) -> None:
        budget = Budget(REVIEW_SECONDS)
        await _wait_synced(runtime, budget)
        view = await _view(runtime, budget)
        check = queue.validate_delete if operation == "DELETE" else queue.validate
        _respond(check(dict(body), view), warnings)

    @kopf.on.mutate(
        "batch",
        "v1",
        "jobs",
        id=configuration.MUTATE_JOB,
        operations=["CREATE"],
        ignore_failures=True,
        registry=registry,
    )
    async def mutate_job(
        body: kopf.Body,
        patch: kopf.Patch,
        warnings: list[str],
        jobs_by_group: JobIndex = NO_JOBS,
        **_: Any,
    ) -> None:
        if job.group_of(body) is None and jobgroup.queue_of(body) is None:
            return
        hold = bool(delayed.supported) and runtime.synced()  # unsure of the group: never hold
        view = jobs.index_view(runtime.state, jobs_by_group)
        _respond(job.mutate(dict(body), view, hold), warnings, patch)


# --------------------------------------------------------------------------- helpers
def _respond(answer: Admission, warnings: list[str], patch: kopf.Patch | None = None) -> None:
    warnings.extend(answer.warnings)
    if not answer.allowed:
        raise kopf.AdmissionError(answer.message, code=answer.code or 422)
    if patch is not None:
        for key, value in answer.patch.items():
            patch[key] = value


def _dict(body: kopf.Body | None) -> Object | None:
    return None if body is None else dict(body)


async def _wait_synced(
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


async def _view(
    runtime: Runtime, budget: Budget, queue_name: object = None, group_jobs: Sequence[Object] = ()
) -> StateView:
    """The scheduler's (synced) state, with the Queue ``queue_name`` read from the API if
    the watch has not brought it yet (a 503 when it cannot be read in the time left)."""
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
    return StateView(runtime.state, lambda namespace, group: group_jobs, queues, refused)


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


async def _group_jobs(
    runtime: Runtime, index: JobIndex, namespace: str, group: str, budget: Budget
) -> Sequence[Object]:
    """The group's Jobs: from the index, else (a Job the watch has not brought yet) listed
    by the label the Job webhook gives them, when the review has time for it."""
    found = list(index.get((namespace, group), ()))
    if found:
        return found
    timeout = budget.lookup_timeout()
    if not timeout:
        log.warning("no time left to list the Jobs of PodGroup %s/%s", namespace, group)
        return ()
    try:
        return await asyncio.to_thread(_listed_jobs, runtime, namespace, group, timeout)
    except Exception as exc:  # minResources stays unset; admission goes on
        log.warning("could not list the Jobs of PodGroup %s/%s: %s", namespace, group, exc)
        return ()


def _listed_jobs(runtime: Runtime, namespace: str, group: str, timeout: float) -> list[Object]:
    query = urllib.parse.urlencode({"labelSelector": f"{job.GROUP_LABEL}={group}"})
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs?{query}"
    listed = kubeapi.request(runtime.api, "GET", path, timeout=timeout)
    names = runtime.state.scheduler_names
    return [item for item in listed.get("items") or [] if job.kbatch_group_of(item, names) == group]
