"""The held-Job controller: the release side of delayed pod creation (DESIGN §6).

A batch/v1 Job of a PodGroup not admitted yet is created suspended by the Job
webhook (``kbatch.webhooks.admission.job``); this controller resumes it once it is
no longer to be held (its group is admitted, or holding it can no longer end well):
on events of the group or the Job, and by a sweep on taking the lead and every
``SWEEP_SECONDS`` (an event missed while another replica led, or a release that
failed, is not waited for for ever). It also fills the ``minResources`` of a
PodGroup created before its Job (kube-batch's usual order) when the Job comes, and
makes the PodGroup of a Job labelled ``kbatch.io/queue`` that names none
(``groups``): on the Job's events, and in the sweep for a held Job whose group
could not be made yet.

The decisions are the admission functions'; this module does the API calls, through
``kbatch.kubeapi``. Only the leader releases and fills. ``register`` adds the
handlers to ``kbatch run``'s registry when the webhooks are on (without them no Job
is ever held); they read kopf's Job index ``jobs_by_group``, which the webhooks
register (``kbatch.webhooks.jobs``).
"""

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import kopf

from kbatch import kubeapi
from kbatch.api import GROUP, VERSION
from kbatch.api.podgroup import PodGroup
from kbatch.cluster.records import parse_pod_group, ref_of
from kbatch.cluster.state import ClusterState
from kbatch.operators.jobs import groups
from kbatch.operators.scheduler.core.framework import podgroup_status as pod_group_status
from kbatch.webhooks import jobs
from kbatch.webhooks.admission import job, jobgroup, podgroup
from kbatch.webhooks.admission.view import StateView

if TYPE_CHECKING:
    from kbatch.operators.process import Runtime

log = logging.getLogger("kbatch.jobs")

SWEEP_SECONDS = 30.0
SWEEP_TICK_SECONDS = 1.0
JOBS = "/apis/batch/v1/namespaces/{namespace}/jobs/{name}"
Object = dict[str, Any]
NO_JOBS: jobs.JobIndex = {}


def register(
    registry: kopf.OperatorRegistry, runtime: "Runtime", delayed: jobs.DelayedPodCreation
) -> None:
    """The release handlers, the sweep, the minResources filler and the maker of the
    PodGroups of Jobs labelled ``kbatch.io/queue``."""
    sweeper: dict[str, asyncio.Task[None]] = {}
    maker = groups.GroupMaker(runtime)

    @kopf.on.startup(registry=registry)
    async def start_release_sweep(jobs_by_group: jobs.JobIndex = NO_JOBS, **_: Any) -> None:
        sweeper["task"] = asyncio.create_task(sweep_forever(runtime, delayed, jobs_by_group, maker))

    @kopf.on.cleanup(registry=registry)
    async def stop_release_sweep(**_: Any) -> None:
        task = sweeper.pop("task", None)
        if task is not None:
            task.cancel()

    @kopf.on.event(GROUP, VERSION, "podgroups", id="release-held-jobs", registry=registry)
    def release_for_group(
        type: str,
        body: kopf.Body,
        namespace: str | None,
        name: str,
        jobs_by_group: jobs.JobIndex = NO_JOBS,
        **_: Any,
    ) -> None:
        if type == "DELETED" or not delayed.supported or not runtime.leads():
            return
        namespace = namespace or "default"
        held = [j for j in jobs_by_group.get((namespace, name), ()) if job.is_held(j)]
        if held:
            group = group_of_event(body, namespace, name)
            view = jobs.index_view(runtime.state, jobs_by_group)
            release(runtime, job.to_release(held, view, group))

    @kopf.on.event(
        "batch",
        "v1",
        "jobs",
        id="release-held-job",
        annotations={job.HELD_ANNOTATION: kopf.PRESENT},
        registry=registry,
    )
    def release_job(
        type: str, body: kopf.Body, jobs_by_group: jobs.JobIndex = NO_JOBS, **_: Any
    ) -> None:
        if type == "DELETED" or not delayed.supported or not runtime.leads():
            return
        if job.is_held(body):
            view = jobs.index_view(runtime.state, jobs_by_group)
            release(runtime, job.to_release([dict(body)], view))

    @kopf.on.event(
        "batch",
        "v1",
        "jobs",
        id="make-job-pod-group",
        labels={jobgroup.QUEUE_LABEL: kopf.PRESENT},
        registry=registry,
    )
    def make_pod_group(type: str | None, body: kopf.Body, **_: Any) -> None:
        """The PodGroup of a Job labelled kbatch.io/queue, made once the Job exists."""
        if type == "DELETED" or not runtime.leads() or not runtime.synced():
            return
        maker.ensure(dict(body))

    @kopf.on.event("batch", "v1", "jobs", id="fill-pod-group-min-resources", registry=registry)
    def fill_min_resources_from_job(
        type: str | None, body: kopf.Body, jobs_by_group: jobs.JobIndex = NO_JOBS, **_: Any
    ) -> None:
        """PodGroupMinResources for a PodGroup created before its Job: filled when the
        Job comes, as an update through its admission."""
        if type not in (None, "ADDED") or not runtime.leads() or not runtime.synced():
            return
        if job.group_of(body) is None:
            return
        fill_min_resources(runtime, dict(body), jobs_by_group)


class SweepSchedule:
    """When the release sweep runs: as soon as this replica leads (with synced caches),
    then every ``interval`` seconds while it does."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._last: float | None = None

    def due(self, leads: bool, now: float) -> bool:
        if not leads:
            self._last = None
            return False
        if self._last is None or now - self._last >= self.interval:
            self._last = now
            return True
        return False


def group_of_event(body: kopf.Body, namespace: str, name: str) -> job.Group:
    """The PodGroup of an event (the watched state may not have it yet)."""
    min_member = (body.get("spec") or {}).get("minMember", 1)
    phase = pod_group_status.phase_of(body)
    return job.Group(namespace, name, phase, min_member if isinstance(min_member, int) else 1)


def release_held_jobs(
    api: kubeapi.ApiClient, held: Iterable[Mapping[str, Any]], path_of: str = JOBS
) -> list[str]:
    """Resume Jobs kbatch holds (``job.to_release`` says which); ``namespace/name`` of
    those released. Each patch first tests that the Job is still held as the caller
    saw it, so a Job its owner has changed since is left alone. ``path_of``: the
    objects' path, for another kind held the same way (JobSets)."""
    released = []
    for one in held:
        if not job.is_held(one):
            continue
        meta = one["metadata"]
        namespace = meta.get("namespace") or "default"
        mark = meta["annotations"][job.HELD_ANNOTATION]
        mark_path = "/metadata/annotations/" + job.HELD_ANNOTATION.replace("/", "~1")
        patch = [
            {"op": "test", "path": mark_path, "value": mark},
            {"op": "remove", "path": mark_path},
            {"op": "replace", "path": "/spec/suspend", "value": False},
        ]
        path = path_of.format(namespace=namespace, name=meta["name"])
        try:
            kubeapi.request(api, "PATCH", path, patch, kubeapi.JSON_PATCH)
        except kubeapi.ApiError as exc:  # the next sweep tries again
            if exc.status not in (404, 409, 422):  # else: gone, or no longer held as seen
                log.warning("could not release held %s/%s: %s", namespace, meta["name"], exc)
            continue
        released.append(f"{namespace}/{meta['name']}")
    return released


def release(runtime: "Runtime", decided: Sequence[tuple[Mapping[str, Any], str]]) -> None:
    why = {
        f"{j['metadata'].get('namespace') or 'default'}/{j['metadata']['name']}": reason
        for j, reason in decided
    }
    try:
        released = release_held_jobs(runtime.api, [j for j, _ in decided])
    except Exception as exc:  # the next event, or the sweep, tries again
        log.warning("could not release held Jobs: %s", exc)
        return
    for name in released:
        log.info("released Job %s: %s", name, why[name])


def sweep_held_jobs(
    runtime: "Runtime", index: jobs.JobIndex, maker: groups.GroupMaker | None = None
) -> None:
    """Make the missing PodGroups of held labelled Jobs, and release every held Job in
    ``index`` that is no longer to be held: what events may have missed."""
    held = [j for entries in index.values() for j in entries if job.is_held(j)]
    if maker is not None:
        for one in held:
            maker.ensure(one)
    if held:
        release(runtime, job.to_release(held, jobs.index_view(runtime.state, index)))


async def sweep_forever(
    runtime: "Runtime",
    delayed: jobs.DelayedPodCreation,
    index: jobs.JobIndex,
    maker: groups.GroupMaker | None = None,
) -> None:
    """The release sweep (see SWEEP_SECONDS); in kopf's loop, beside the index it reads."""
    schedule = SweepSchedule(SWEEP_SECONDS)
    while True:
        try:
            if delayed.supported is None:
                await asyncio.to_thread(delayed.learn, runtime.api, time.monotonic())
            leads = bool(delayed.supported) and runtime.leads() and runtime.synced()
            if schedule.due(leads, time.monotonic()):
                keys = {key for key, entries in index.items() if any(map(job.is_held, entries))}
                snapshot = {key: list(index.get(key, ())) for key in keys}
                await asyncio.to_thread(sweep_held_jobs, runtime, snapshot, maker)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the sweep of held Jobs failed; it runs again")
        await asyncio.sleep(SWEEP_TICK_SECONDS)


FILL_ATTEMPTS = 3


class FreshGroupView(StateView):
    """The scheduler's state and the Job index, but PodGroups read from the API server:
    a Job may come before the watch brings its PodGroup, or while the PodGroup's initial
    status is being written (a patch made on the watched version would then conflict)."""

    def __init__(self, api: kubeapi.ApiClient, state: ClusterState, index: jobs.JobIndex):
        super().__init__(state, lambda namespace, group: list(index.get((namespace, group), ())))
        self.api = api
        self.versions: dict[tuple[str, str], str] = {}

    def pod_group(self, namespace: str, name: str) -> PodGroup | None:
        try:
            raw = kubeapi.request(self.api, "GET", pod_group_path(namespace, name))
        except kubeapi.ApiError as exc:
            if exc.status == 404:
                return None
            raise
        self.versions[namespace, name] = raw["metadata"]["resourceVersion"]
        return parse_pod_group(raw)


def pod_group_path(namespace: str, name: str) -> str:
    return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups/{name}"


def fill_min_resources(runtime: "Runtime", job_body: Object, index: jobs.JobIndex) -> None:
    """PodGroupMinResources for a PodGroup made before its Job: the patch is sent as an
    update of the PodGroup, through its admission (the quota), and only if the PodGroup
    is still as it was read; when it has changed meanwhile, it is read again."""
    for _ in range(FILL_ATTEMPTS):
        view = FreshGroupView(runtime.api, runtime.state, index)
        try:
            fill = podgroup.fill_from_job(job_body, view)
            if fill is None:
                return
            namespace, group, patch = fill
            body = {**patch, "metadata": {"resourceVersion": view.versions[namespace, group]}}
            kubeapi.request(
                runtime.api, "PATCH", pod_group_path(namespace, group), body, kubeapi.MERGE_PATCH
            )
        except kubeapi.ApiError as exc:
            if exc.status == 409:
                continue
            log.warning("%s: spec.minResources of its PodGroup not filled: %s",
                        ref_of(job_body), exc)  # fmt: skip
            return
        log.info("PodGroup %s/%s: spec.minResources filled from its Job", namespace, group)
        return
    log.warning("%s: spec.minResources of its PodGroup not filled: the PodGroup kept "
                "changing (%d attempts)", ref_of(job_body), FILL_ATTEMPTS)  # fmt: skip
