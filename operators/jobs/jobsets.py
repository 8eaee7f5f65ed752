"""The held-JobSet controller (DESIGN §15): a JobSet labelled ``kbatch.io/queue`` gets
its PodGroup made (``groups.GroupMaker`` with the JobSet as owner) and, held by the
JobSet webhook (``kbatch.webhooks.admission.jobsetgroup``), is resumed whole once that
group is admitted: on the JobSet's events, on its group's events, and by a sweep
every ``controller.SWEEP_SECONDS`` while this replica leads (what events missed: a
group not made because its queue did not exist yet, a release that failed).

JobSet's own controller does the rest: it makes the JobSet's Jobs suspended while
the JobSet is, and resumes them when the JobSet is. Only the leader makes groups and
releases. Where JobSet's CRD is not installed, kopf serves none of these handlers
(it notices the CRD when it comes); the handlers read kopf's JobSet index
``jobsets_by_group`` (``kbatch.webhooks.jobsets``).
"""

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import kopf

from kbatch.api import GROUP, VERSION
from kbatch.operators.jobs import controller, groups
from kbatch.webhooks import jobs, jobsets
from kbatch.webhooks.admission import job, jobgroup, jobsetgroup
from kbatch.webhooks.admission.view import StateView

if TYPE_CHECKING:
    from kbatch.operators.process import Runtime

log = logging.getLogger("kbatch.jobs")

JOBSETS = (
    f"/apis/{jobsetgroup.GROUP}/{jobsetgroup.VERSION}/namespaces/{{namespace}}/jobsets/{{name}}"
)
JOBSET = groups.Owner(
    jobsetgroup.API_VERSION, jobsetgroup.KIND, jobsetgroup.makes_group, jobsetgroup.pod_group_for
)


def register(
    registry: kopf.OperatorRegistry, runtime: "Runtime", delayed: jobs.DelayedPodCreation
) -> None:
    """The maker of JobSets' PodGroups, the release handlers and the sweep."""
    sweeper: dict[str, asyncio.Task[None]] = {}
    maker = groups.GroupMaker(runtime, JOBSET)

    @kopf.on.startup(registry=registry)
    async def start_jobset_sweep(
        jobsets_by_group: jobsets.JobSetIndex = jobsets.NO_JOBSETS, **_: Any
    ) -> None:
        sweeper["task"] = asyncio.create_task(
            sweep_forever(runtime, delayed, jobsets_by_group, maker)
        )

    @kopf.on.cleanup(registry=registry)
    async def stop_jobset_sweep(**_: Any) -> None:
        task = sweeper.pop("task", None)
        if task is not None:
            task.cancel()

    @kopf.on.event(
        jobsetgroup.GROUP,
        jobsetgroup.VERSION,
        jobsetgroup.RESOURCE,
        id="make-jobset-pod-group",
        labels={jobgroup.QUEUE_LABEL: kopf.PRESENT},
        registry=registry,
    )
    def jobset_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        """The JobSet's PodGroup, made once the JobSet exists; the JobSet released when
        its group is admitted already."""
        if type == "DELETED" or not runtime.leads() or not runtime.synced():
            return
        if maker.ensure(dict(body)) and delayed.supported:
            release(runtime, [dict(body)], StateView(runtime.state))

    @kopf.on.event(GROUP, VERSION, "podgroups", id="release-held-jobsets", registry=registry)
    def group_event(
        type: str,
        body: kopf.Body,
        namespace: str | None,
        name: str,
        jobsets_by_group: jobsets.JobSetIndex = jobsets.NO_JOBSETS,
        **_: Any,
    ) -> None:
        if type == "DELETED" or not delayed.supported or not runtime.leads():
            return
        namespace = namespace or "default"
        held = [j for j in jobsets_by_group.get((namespace, name), ()) if job.is_held(j)]
        if held and controller.group_of_event(body, namespace, name).phase in job.ADMITTED:
            released = controller.release_held_jobs(runtime.api, held, JOBSETS)
            for one in released:
                log.info("released JobSet %s: PodGroup %s/%s is admitted", one, namespace, name)


def release(runtime: "Runtime", candidates: list[Mapping[str, Any]], view: StateView) -> None:
    """Resume the held JobSets among ``candidates`` whose group is admitted."""
    decided = [(one, why) for one in candidates if (why := jobsetgroup.to_release(one, view))]
    if not decided:
        return
    try:
        released = controller.release_held_jobs(runtime.api, [j for j, _ in decided], JOBSETS)
    except Exception as exc:  # the next event, or the sweep, tries again
        log.warning("could not release held JobSets: %s", exc)
        return
    reasons = {
        f"{j['metadata'].get('namespace') or 'default'}/{j['metadata']['name']}": reason
        for j, reason in decided
    }
    for name in released:
        log.info("released JobSet %s: %s", name, reasons[name])


def sweep_held_jobsets(
    runtime: "Runtime", index: Mapping[tuple[str, str], Any], maker: groups.GroupMaker
) -> None:
    """Make the missing PodGroups of held JobSets and release those whose group is
    admitted: what events may have missed."""
    held = [j for entries in index.values() for j in entries if job.is_held(j)]
    for one in held:
        maker.ensure(one)
    if held:
        release(runtime, held, StateView(runtime.state))


async def sweep_forever(
    runtime: "Runtime",
    delayed: jobs.DelayedPodCreation,
    index: jobsets.JobSetIndex,
    maker: groups.GroupMaker,
) -> None:
    """The JobSet sweep, in kopf's loop beside the index it reads. Whether Jobs can be
    held at all is learned by the Job sweep; this one waits for it."""
    schedule = controller.SweepSchedule(controller.SWEEP_SECONDS)
    while True:
        try:
            leads = bool(delayed.supported) and runtime.leads() and runtime.synced()
            if schedule.due(leads, time.monotonic()):
                keys = {key for key, entries in index.items() if any(map(job.is_held, entries))}
                snapshot = {key: list(index.get(key, ())) for key in keys}
                await asyncio.to_thread(sweep_held_jobsets, runtime, snapshot, maker)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the sweep of held JobSets failed; it runs again")
        await asyncio.sleep(controller.SWEEP_TICK_SECONDS)
