"""kbatch's admission webhooks under kopf (DESIGN §7), and the release side of delayed
pod creation (DESIGN §6): ``register(registry, runtime)`` adds them to ``kbatch run``'s
one kopf registry when ``--webhook-address`` is given.

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
import threading
import time
import types
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import kopf
import urllib3

from kbatch.api import DEFAULT_QUEUE, GROUP, VERSION
from kbatch.api.podgroup import PodGroupPhase
from kbatch.api.queue import Queue
from kbatch.operators.queue import controller as queue_operator
from kbatch.operators.scheduler.kube import ApiError, request
from kbatch.webhooks import configuration, endpoint, jobs
from kbatch.webhooks.admission import job, podgroup, queue
from kbatch.webhooks.admission.result import Admission
from kbatch.webhooks.admission.view import StateView

if TYPE_CHECKING:
    from kbatch.operators.scheduler.operator import Runtime

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
DEFAULT_QUEUE_SECONDS = 120.0
Object = dict[str, Any]
JobIndex = Mapping[tuple[str, str], Sequence[Object]]
NO_JOBS: JobIndex = types.MappingProxyType({})


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
    registry: kopf.OperatorRegistry,
    runtime: "Runtime",
    delayed: jobs.DelayedPodCreation | None = None,
) -> None:
    """The admission handlers, the Job index and the release handlers (when webhooks are on).
    ``delayed``: whether Jobs are held, when known already (else learned at start)."""
    settings = runtime.settings
    if not settings.webhook_address:
        return
    delayed = delayed or jobs.DelayedPodCreation()
    sweeper: dict[str, asyncio.Task[None]] = {}
    kopf_objects = logging.getLogger("kopf.objects")
    if not any(isinstance(f, RefusalsAreAnswers) for f in kopf_objects.filters):
        kopf_objects.addFilter(RefusalsAreAnswers())

    @kopf.on.startup(registry=registry)
    def webhook_server(settings: kopf.OperatorSettings, **_: Any) -> None:
        skip = ("kube-system", runtime.settings.lock_namespace)

        def serving(client_config: Object) -> None:
            """The server listens: point the configurations at it (when kbatch keeps
            them), and make what was refused while it could not answer."""
            if runtime.settings.manage_webhooks:
                configuration.apply(runtime.api, configuration.configurations(client_config, skip))
            threading.Thread(
                target=_ensure_default_queue,
                args=(runtime,),
                name="kbatch-default-queue",
                daemon=True,
            ).start()

        settings.admission.server = endpoint.server(
            runtime.settings.webhook_address,
            runtime.settings.webhook_cert_dir,
            runtime.settings.webhook_host,
            serving,
        )
        settings.admission.managed = None  # kbatch writes its own (configuration.py)
        delayed.learn(runtime.api, time.monotonic())

    @kopf.on.startup(registry=registry)
    async def start_release_sweep(jobs_by_group: JobIndex = NO_JOBS, **_: Any) -> None:
        sweeper["task"] = asyncio.create_task(jobs.sweep_forever(runtime, delayed, jobs_by_group))

    @kopf.on.cleanup(registry=registry)
    async def stop_release_sweep(**_: Any) -> None:
        task = sweeper.pop("task", None)
        if task is not None:
            task.cancel()

    if settings.manage_webhooks:

        @kopf.on.cleanup(registry=registry)
        def remove_webhook_configurations(**_: Any) -> None:
            configuration.remove(runtime.api)

    @kopf.index("batch", "v1", "jobs", registry=registry)
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
        if spec.get("minResources") is None:
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
        view = await _view(runtime, budget, queue_name=(obj.get("spec") or {}).get("queue"))
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
        if job.group_of(body) is None:
            return
        hold = bool(delayed.supported) and runtime.synced()  # unsure of the group: never hold
        view = jobs.index_view(runtime, jobs_by_group)
        _respond(job.mutate(dict(body), view, hold), warnings, patch)

    @kopf.on.event(GROUP, VERSION, "podgroups", id="release-held-jobs", registry=registry)
    def release_for_group(
        type: str,
        body: kopf.Body,
        namespace: str | None,
        name: str,
        jobs_by_group: JobIndex = NO_JOBS,
        **_: Any,
    ) -> None:
        if type == "DELETED" or not delayed.supported or not runtime.leads():
            return
        namespace = namespace or "default"
        held = [j for j in jobs_by_group.get((namespace, name), ()) if job.is_held(j)]
        if held:
            group = jobs.group_of_event(body, namespace, name)
            view = jobs.index_view(runtime, jobs_by_group)
            jobs.release(runtime, job.to_release(held, view, group))

    @kopf.on.event(
        "batch",
        "v1",
        "jobs",
        id="release-held-job",
        annotations={job.HELD_ANNOTATION: kopf.PRESENT},
        registry=registry,
    )
    def release_job(
        type: str, body: kopf.Body, jobs_by_group: JobIndex = NO_JOBS, **_: Any
    ) -> None:
        if type == "DELETED" or not delayed.supported or not runtime.leads():
            return
        if job.is_held(body):
            view = jobs.index_view(runtime, jobs_by_group)
            jobs.release(runtime, job.to_release([dict(body)], view))

    @kopf.on.event("batch", "v1", "jobs", id="fill-pod-group-min-resources", registry=registry)
    def fill_min_resources(
        type: str | None, body: kopf.Body, jobs_by_group: JobIndex = NO_JOBS, **_: Any
    ) -> None:
        """PodGroupMinResources for a PodGroup created before its Job (kube-batch's
        usual order): filled when the Job comes, as an update through its admission."""
        if type not in (None, "ADDED") or not runtime.leads() or not runtime.synced():
            return
        if job.group_of(body) is None:
            return
        fill = podgroup.fill_from_job(dict(body), jobs.index_view(runtime, jobs_by_group))
        if fill is not None:
            jobs.fill_min_resources(runtime, *fill)


# --------------------------------------------------------------------------- helpers
def _ensure_default_queue(runtime: "Runtime") -> None:
    """The leader makes the default queue when it takes the lead; with the webhooks on,
    that can come before they answer (validate-queue fails closed) and be refused.
    Once they answer, the leader tries again until it is done (or it no longer leads):
    the API server may yet route the review to a replica that does not answer."""
    delay, deadline = 0.5, time.monotonic() + DEFAULT_QUEUE_SECONDS
    while runtime.leads():
        try:
            queue_operator.ensure_default_queue(runtime.api)
            return
        except Exception as exc:
            if time.monotonic() > deadline:
                log.error("could not create the default queue: %s", exc)
                return
            log.info("the default queue is not made yet (%s); trying again", exc)
        time.sleep(delay)
        delay = min(delay * 2, 5.0)


def _respond(answer: Admission, warnings: list[str], patch: kopf.Patch | None = None) -> None:
    warnings.extend(answer.warnings)
    if not answer.allowed:
        raise kopf.AdmissionError(answer.message, code=answer.code or 422)
    if patch is not None:
        for key, value in answer.patch.items():
            patch[key] = value


def _dict(body: kopf.Body | None) -> Object | None:
    return None if body is None else dict(body)


def _phase(value: object) -> PodGroupPhase | None:
    try:
        return PodGroupPhase(str(value or PodGroupPhase.PENDING))
    except ValueError:
        return None


async def _wait_synced(
    runtime: "Runtime",
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
    runtime: "Runtime", budget: Budget, queue_name: object = None, group_jobs: Sequence[Object] = ()
) -> StateView:
    """The scheduler's (synced) state, with the Queue ``queue_name`` read from the API if
    the watch has not brought it yet (a 503 when it cannot be read in the time left)."""
    queues: dict[str, Queue] = {}
    name = str(queue_name or DEFAULT_QUEUE)
    if name not in runtime.state.queues():
        timeout = budget.lookup_timeout()
        try:
            if not timeout:
                raise TimeoutError("no time left in this review")
            fetched = await asyncio.to_thread(_read_queue, runtime, name, timeout)
        except (ApiError, OSError, urllib3.exceptions.HTTPError) as exc:
            raise kopf.AdmissionError(
                f"kbatch could not read Queue {name!r} from the API server ({exc}); try again",
                code=503,
            ) from exc
        if fetched is not None:
            queues[name] = fetched
    return StateView(runtime.state, lambda namespace, group: group_jobs, queues)


def _read_queue(runtime: "Runtime", name: str, timeout: float) -> Queue | None:
    try:
        raw = request(runtime.api, "GET", f"/apis/{GROUP}/{VERSION}/queues/{name}", timeout=timeout)
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return Queue.model_validate(raw)


async def _group_jobs(
    runtime: "Runtime", index: JobIndex, namespace: str, group: str, budget: Budget
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


def _listed_jobs(runtime: "Runtime", namespace: str, group: str, timeout: float) -> list[Object]:
    query = urllib.parse.urlencode({"labelSelector": f"{job.GROUP_LABEL}={group}"})
    path = f"/apis/batch/v1/namespaces/{namespace}/jobs?{query}"
    listed = request(runtime.api, "GET", path, timeout=timeout)
    names = runtime.state.scheduler_names
    return [item for item in listed.get("items") or [] if job.kbatch_group_of(item, names) == group]
