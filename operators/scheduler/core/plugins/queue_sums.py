"""What a job adds to its queue's allocated, request and reserved at the proportion
plugin's session open (its *part*), for all jobs asked at once: a module of its own, so
that the sums can be kept from one session to the next by the parts of the jobs that
changed (issue 12)."""

from collections.abc import Sequence

import numpy as np

from kbatch.api.podgroup import PodGroupPhase
from kbatch.operators.scheduler.core.framework.info import JobInfo

# A part's rows: what it adds to its queue's allocated, request and reserved.
ALLOCATED, REQUEST, RESERVED = range(3)
_INQUEUE = PodGroupPhase.INQUEUE  # read once: an Enum member off its class is slow


def parts(jobs: Sequence[JobInfo], mask: np.ndarray) -> np.ndarray:
    """Each job's part, masked: a (jobs × 3 × dims) array, rows ALLOCATED, REQUEST and
    RESERVED. Element by element the same floats whichever jobs are asked together.
    A job's request is what it holds and what its unplaced tasks ask for; a job with no
    pods yet (most of a long line) holds nothing and asks for its minResources, if it
    says any: its rows are filled in one step with the others of its kind."""
    allocated = np.zeros((len(jobs), len(mask)))
    pending = np.zeros((len(jobs), len(mask)))
    with_pods = [i for i, job in enumerate(jobs) if job.tasks]
    if with_pods:
        held = np.array([jobs[i].allocated for i in with_pods])
        asked = np.array([jobs[i].total_request for i in with_pods])
        allocated[with_pods] = held
        pending[with_pods] = np.maximum(asked - held, 0)
    asking = [i for i, job in enumerate(jobs) if not job.tasks and job.min_resources is not None]
    if asking:
        pending[asking] = np.array([jobs[i].min_resources for i in asking])
    out = np.zeros((len(jobs), 3, len(mask)))
    out[:, ALLOCATED] = allocated * mask
    out[:, REQUEST] = (allocated + pending) * mask
    reserving = [i for i, job in enumerate(jobs) if _reserves(job)]
    if reserving:
        minimums = np.array([jobs[i].min_resources for i in reserving])
        out[reserving, RESERVED] = np.maximum(minimums - allocated[reserving], 0) * mask
    return out


def _reserves(job: JobInfo) -> bool:
    return job.phase is _INQUEUE and job.min_resources is not None
