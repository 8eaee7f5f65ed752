"""What ``kbatch run`` does about Jobs besides admitting them (DESIGN §6): the Job index's
entries, releasing held Jobs (on events, and by a periodic sweep), and filling the
minResources of a PodGroup created before its Job.

The decisions are the admission functions' (``kbatch.webhooks.admission``); this
module does the API calls. Only the leader releases and fills.
"""

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import kopf
import urllib3

from kbatch.api import GROUP, VERSION
from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.podgroup import controller as podgroups
from kbatch.operators.scheduler.kube import ApiError, request
from kbatch.webhooks.admission import job
from kbatch.webhooks.admission.view import StateView

if TYPE_CHECKING:
    from kbatch.operators.scheduler.operator import Runtime

log = logging.getLogger("kbatch.webhooks")

# Held Jobs no longer to be held are released on events of their group or Job, and by a
# sweep: on taking the lead, then every SWEEP_SECONDS (an event missed while another
# replica led, or a release that failed, is not waited for forever).
SWEEP_SECONDS = 30.0
SWEEP_TICK_SECONDS = 1.0
VERSION_RETRY_MAX_SECONDS = 60.0
Object = dict[str, Any]
JobIndex = Mapping[tuple[str, str], Sequence[Object]]


class DelayedPodCreation:
    """Whether Jobs are held (None: not known yet), from the API server's version. A
    version that could not be read is asked again, backing off, until it is: a passing
    failure at start must not turn delayed pod creation off for the process's life."""

    def __init__(self) -> None:
        self.supported: bool | None = None
        self._next_try = 0.0
        self._delay = 1.0

    def learn(self, api: Any, now: float) -> None:
        if self.supported is not None or now < self._next_try:
            return
        self.supported, why = podgroups.job_suspend_support(api)
        if self.supported is None:
            self._next_try, self._delay = (
                now + self._delay,
                min(self._delay * 2, VERSION_RETRY_MAX_SECONDS),
            )
            log.warning(
                "Jobs are not held until kbatch knows whether the API server has Job "
                "spec.suspend: %s; asking again",
                why,
            )
        elif not self.supported:
            log.warning(
                "delayed pod creation is unavailable: %s; Jobs are created as they are "
                "(their pods are still scheduled as gangs)",
                why,
            )


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


def slim_job(body: kopf.Body, namespace: str, name: str) -> Object:
    """What the index keeps of a Job: enough to fill minResources, to decide whether to
    hold it or its siblings, and to release it."""
    annotations = body.get("metadata", {}).get("annotations") or {}
    held = {job.HELD_ANNOTATION: annotations[job.HELD_ANNOTATION]} if job.is_held(body) else {}
    spec = body.get("spec") or {}
    return {
        "metadata": {"name": name, "namespace": namespace, "annotations": held},
        "spec": {
            "suspend": spec.get("suspend"),
            "parallelism": spec.get("parallelism"),
            "completions": spec.get("completions"),
            "template": spec.get("template") or {},
        },
    }


def index_view(runtime: "Runtime", index: JobIndex) -> StateView:
    return StateView(
        runtime.state, lambda namespace, group: list(index.get((namespace, group), ()))
    )


def group_of_event(body: kopf.Body, namespace: str, name: str) -> job.Group:
    """The PodGroup of an event (the watched state may not have it yet)."""
    min_member = (body.get("spec") or {}).get("minMember", 1)
    phase = _phase((body.get("status") or {}).get("phase")) or PodGroupPhase.UNKNOWN
    return job.Group(namespace, name, phase, min_member if isinstance(min_member, int) else 1)


def release(runtime: "Runtime", decided: Sequence[tuple[Mapping[str, Any], str]]) -> None:
    why = {
        f"{j['metadata'].get('namespace') or 'default'}/{j['metadata']['name']}": reason
        for j, reason in decided
    }
    try:
        released = podgroups.release_held_jobs(runtime.api, [j for j, _ in decided])
    except Exception as exc:  # the next event, or the sweep, tries again
        log.warning("could not release held Jobs: %s", exc)
        return
    for name in released:
        log.info("released Job %s: %s", name, why[name])


def sweep_held_jobs(runtime: "Runtime", index: JobIndex) -> None:
    """Release every held Job in ``index`` that is no longer to be held (its group is
    admitted, or holding it can no longer end well): what events may have missed."""
    held = [j for entries in index.values() for j in entries if job.is_held(j)]
    if held:
        release(runtime, job.to_release(held, index_view(runtime, index)))


async def sweep_forever(runtime: "Runtime", delayed: DelayedPodCreation, index: JobIndex) -> None:
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
                await asyncio.to_thread(sweep_held_jobs, runtime, snapshot)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the sweep of held Jobs failed; it runs again")
        await asyncio.sleep(SWEEP_TICK_SECONDS)


def fill_min_resources(runtime: "Runtime", namespace: str, group: str, patch: Object) -> None:
    """Send PodGroupMinResources' patch as an update of the PodGroup: through its admission
    (the quota), and only if the PodGroup is still as the state saw it."""
    seen = runtime.state.get("PodGroup", namespace, group) or {}
    version = (seen.get("metadata") or {}).get("resourceVersion")
    body = {**patch, "metadata": {"resourceVersion": version}} if version else patch
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/podgroups/{group}"
    try:
        request(runtime.api, "PATCH", path, body, "application/merge-patch+json")
    except (ApiError, OSError, urllib3.exceptions.HTTPError) as exc:
        log.warning("PodGroup %s/%s: spec.minResources not filled from its Job: %s",
                    namespace, group, exc)  # fmt: skip
        return
    log.info("PodGroup %s/%s: spec.minResources filled from its Job", namespace, group)


def _phase(value: object) -> PodGroupPhase | None:
    try:
        return PodGroupPhase(str(value or PodGroupPhase.PENDING))
    except ValueError:
        return None
