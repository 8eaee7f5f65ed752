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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import kopf

from kbatch.api import DEFAULT_QUEUE, GROUP, VERSION
from kbatch.api.podgroup import PodGroupPhase
from kbatch.api.queue import Queue
from kbatch.operators.podgroup import controller as podgroups
from kbatch.operators.queue import controller as queue_operator
from kbatch.operators.scheduler.kube import ApiError, request
from kbatch.webhooks import configuration, endpoint
from kbatch.webhooks.admission import job, podgroup, queue
from kbatch.webhooks.admission.result import Admission
from kbatch.webhooks.admission.view import StateView

if TYPE_CHECKING:
    from kbatch.operators.scheduler.operator import Runtime

log = logging.getLogger("kbatch.webhooks")

SYNC_WAIT_SECONDS = 3.0  # within the webhooks' 5 s timeout
LOOKUP_TIMEOUT_SECONDS = 2.0
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


class DelayedPodCreation:
    """Whether Jobs are held: decided once at start, from the API server's version."""

    supported = False


def register(registry: kopf.OperatorRegistry, runtime: "Runtime") -> None:
    """The admission handlers, the Job index and the release handlers (when webhooks are on)."""
    settings = runtime.settings
    if not settings.webhook_address:
        return
    delayed = DelayedPodCreation()
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
        delayed.supported, why = podgroups.job_suspend_support(runtime.api)
        if not delayed.supported:
            log.warning(
                "delayed pod creation is unavailable: %s; Jobs are created as they are "
                "(their pods are still scheduled as gangs)",
                why,
            )

    if settings.manage_webhooks:

        @kopf.on.cleanup(registry=registry)
        def remove_webhook_configurations(**_: Any) -> None:
            configuration.remove(runtime.api)

    @kopf.index("batch", "v1", "jobs", registry=registry)
    def jobs_by_group(
        body: kopf.Body, namespace: str | None, name: str, **_: Any
    ) -> dict[tuple[str, str], Object] | None:
        group, namespace = job.group_of(body), namespace or "default"
        return None if group is None else {(namespace, group): _slim_job(body, namespace, name)}

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
        obj = dict(body)
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        specs: Sequence[Object] = ()
        if spec.get("minResources") is None:
            namespace = str(meta.get("namespace") or "default")
            specs = await _job_pod_specs(runtime, jobs_by_group, namespace, str(meta.get("name")))
        view = await _view(runtime, pod_specs=specs)
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
        obj = dict(body)
        view = await _view(runtime, queue_name=(obj.get("spec") or {}).get("queue"))
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
        view = await _view(runtime)
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
    async def mutate_job(body: kopf.Body, patch: kopf.Patch, warnings: list[str], **_: Any) -> None:
        if job.group_of(body) is None:
            return
        hold = delayed.supported and runtime.synced()  # unsure of the group's phase: never hold
        _respond(job.mutate(dict(body), StateView(runtime.state), hold), warnings, patch)

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
        phase = _phase((body.get("status") or {}).get("phase"))
        if phase not in job.ADMITTED:
            return
        namespace = namespace or "default"
        held = [j for j in jobs_by_group.get((namespace, name), ()) if job.is_held(j)]
        if held:
            _release(runtime, namespace, held, phase)

    @kopf.on.event(
        "batch",
        "v1",
        "jobs",
        id="release-held-job",
        annotations={job.HELD_ANNOTATION: kopf.PRESENT},
        registry=registry,
    )
    def release_job(type: str, body: kopf.Body, namespace: str | None, **_: Any) -> None:
        if type == "DELETED" or not delayed.supported or not runtime.leads():
            return
        namespace = namespace or "default"
        if job.is_held(body):
            phase = StateView(runtime.state).pod_group_phase(namespace, job.group_of(body) or "")
            _release(runtime, namespace, [dict(body)], phase)


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


def _slim_job(body: kopf.Body, namespace: str, name: str) -> Object:
    """What the index keeps of a Job: enough to fill minResources and to release it."""
    annotations = body.get("metadata", {}).get("annotations") or {}
    held = {job.HELD_ANNOTATION: annotations[job.HELD_ANNOTATION]} if job.is_held(body) else {}
    spec = body.get("spec") or {}
    return {
        "metadata": {"name": name, "namespace": namespace, "annotations": held},
        "spec": {"suspend": spec.get("suspend"), "template": spec.get("template") or {}},
    }


def _release(
    runtime: "Runtime", namespace: str, jobs: Sequence[Object], phase: PodGroupPhase | None
) -> None:
    try:
        released = podgroups.release_held_jobs(runtime.api, namespace, jobs, phase)
    except Exception as exc:  # the next event of the group or the Job tries again
        log.warning("could not release held Jobs in %s: %s", namespace, exc)
        return
    for name in released:
        log.info("released Job %s/%s: its PodGroup is %s", namespace, name, phase)


async def _view(
    runtime: "Runtime", queue_name: object = None, pod_specs: Sequence[Object] = ()
) -> StateView:
    """The scheduler's state once synced (else a refusal to try again), with the Queue
    ``queue_name`` read from the API if the watch has not brought it yet."""
    deadline = time.monotonic() + SYNC_WAIT_SECONDS
    while not runtime.synced():
        if time.monotonic() > deadline:
            raise kopf.AdmissionError(
                "kbatch is starting (its caches are not synced); try again", code=503
            )
        await asyncio.sleep(0.05)
    queues: dict[str, Queue] = {}
    name = str(queue_name or DEFAULT_QUEUE)
    if name not in runtime.state.queues():
        fetched = await asyncio.to_thread(_read_queue, runtime, name)
        if fetched is not None:
            queues[name] = fetched
    return StateView(runtime.state, lambda namespace, group: pod_specs, queues)


def _read_queue(runtime: "Runtime", name: str) -> Queue | None:
    try:
        raw = request(
            runtime.api,
            "GET",
            f"/apis/{GROUP}/{VERSION}/queues/{name}",
            timeout=LOOKUP_TIMEOUT_SECONDS,
        )
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return Queue.model_validate(raw)


async def _job_pod_specs(
    runtime: "Runtime", index: JobIndex, namespace: str, group: str
) -> Sequence[Object]:
    """The pod templates of the group's Jobs: from the index, else (a Job the watch has
    not brought yet) listed by the label the Job webhook gives them."""
    specs = [
        entry["spec"]["template"].get("spec") or {} for entry in index.get((namespace, group), ())
    ]
    if specs:
        return specs
    try:
        return await asyncio.to_thread(_listed_job_pod_specs, runtime, namespace, group)
    except Exception as exc:  # minResources stays unset; admission goes on
        log.warning("could not list the Jobs of PodGroup %s/%s: %s", namespace, group, exc)
        return ()


def _listed_job_pod_specs(runtime: "Runtime", namespace: str, group: str) -> list[Object]:
    query = urllib.parse.urlencode({"labelSelector": f"{job.GROUP_LABEL}={group}"})
    listed = request(
        runtime.api,
        "GET",
        f"/apis/batch/v1/namespaces/{namespace}/jobs?{query}",
        timeout=LOOKUP_TIMEOUT_SECONDS,
    )
    return [
        item["spec"]["template"].get("spec") or {}
        for item in listed.get("items") or []
        if job.group_of(item) == group
    ]
