"""The PodGroup controller the simulator plays (the podgroup operator's job in a cluster).

After every tick it recounts each PodGroup's running, succeeded and failed
pods and moves its phase by the shared rules (``kbatch.api.podgroup.next_phase``),
from a fresh snapshot, so that it counts exactly as the scheduler does. Only
changed statuses are written; conditions are the scheduler's and kept as they are.
"""

from kbatch.api.podgroup import PodGroupPhase, PodGroupStatus, next_phase
from kbatch.operators.scheduler.framework.info import JobInfo, TaskStatus
from kbatch.operators.scheduler.framework.interface import Snapshot, StatusWriter


def status_of(job: JobInfo) -> PodGroupStatus:
    """What ``job``'s PodGroup status should say about its pods now."""
    old = job.old_status or PodGroupStatus()
    succeeded = job.count(TaskStatus.SUCCEEDED)
    failed = job.count(TaskStatus.FAILED)
    phase = next_phase(
        job.phase,
        min_member=job.min_member,
        scheduled=job.count(TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING),
        succeeded=succeeded,
        unfinished=len(job.tasks) - succeeded - failed,
        admitted=job.phase is PodGroupPhase.INQUEUE,
    )
    return old.model_copy(
        update={
            "phase": phase,
            "running": job.count(TaskStatus.RUNNING),
            "succeeded": succeeded,
            "failed": failed,
        }
    )


def reconcile(snapshot: Snapshot, writer: StatusWriter) -> None:
    """Write every PodGroup status that no longer matches its pods."""
    for job in snapshot.jobs.values():
        if not job.has_pod_group:
            continue
        status = status_of(job)
        if status != job.old_status:
            writer.update_pod_group(job.namespace, job.name, status)
