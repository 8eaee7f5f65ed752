"""A batch/v1 Job in a what-if (``kbatch simulate --from-cluster``): what kbatch's
webhooks and the job controller would make of it, created now.

The Job goes through the API server's own checks (``kbatch.sim.validation``) and the
same admission functions as on a cluster (``kbatch.webhooks.admission.chain``), over a
view of the Queues, PodGroups and ResourceQuotas read of the cluster and given before
it in the files (in their order, as ``kubectl apply`` creates them). Then:

- a Job labelled ``kbatch.io/queue`` gets the PodGroup kbatch makes for it
  (``jobgroup.pod_group_for``), through the PodGroup's admission as the held-Job
  controller makes it. Where that is refused (a queue that does not exist, or with
  child queues), the Job would wait suspended, its group not made: the answer says so
  and why (``unmade``). A queue the namespace may not use refuses the Job itself;
- a Job held for its group (the usual case: a new group is not admitted yet) goes into
  the forecast as a held Job: the forward run makes its pods once it admits the group,
  as on a cluster;
- a Job not held (its group admitted already, or none: its pods are jobs of their own)
  has its pods made now, as the job controller makes them (``kbatch.sim.jobs.pod_for``).

The answers are for the Job's group, or for each of its pods when they are jobs of
their own; a Job its owner suspended makes no pods, and is answered so.

A JobSet (``admit_jobset``) goes through the same checks and its own webhook. A labelled
one gets the PodGroup kbatch makes for it, as a Job does; held for that group, its Jobs
(those JobSet's controller makes, ``kbatch.sim.jobset_spec.child_job``) go into the
forecast held with it, released together once the forward run admits the group, as
kbatch releases the JobSet. Not held, each of its Jobs is admitted as a Job of the
files; suspended by its owner, it makes no Jobs, and is answered so.
"""

import contextlib
import functools
from collections.abc import Mapping, Sequence
from typing import Any

from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState
from kbatch.sim import job_indexes, jobset_spec, validation
from kbatch.sim import jobs as controller
from kbatch.webhooks.admission import chain, jobgroup, jobsetgroup
from kbatch.webhooks.admission import job as holding
from kbatch.webhooks.admission.view import StateView

Object = dict[str, Any]
VIEWED = ("Queue", "PodGroup", "ResourceQuota")  # what admission reads, besides Jobs


class JobRefused(ValueError):
    """A Job the API server or kbatch's admission would refuse: the message names the
    field and says why."""


class JobAdmission:
    """Admits the files' Jobs in turn over what was read and given before them."""

    def __init__(self, read: Mapping[str, Sequence[Object]], names: frozenset[str]) -> None:
        self.names = names
        self.state = ClusterState(names)
        for kind in VIEWED:
            self.state.replace(kind, read.get(kind, ()), owned=True)
        self.jobs: list[Object] = list(read.get("Job", ()))
        self.unmade: dict[str, str] = {}  # group uid -> why it is not made (the Job waits)
        self.view = StateView(self.state, functools.partial(_jobs_of_group, self.jobs))

    def given(self, obj: Object) -> None:
        """A file's object of another kind, added before the next Job: admission sees it."""
        if obj["kind"] in VIEWED:
            # (one refused: the session refuses it too and warns; admission goes on)
            with contextlib.suppress(ObjectError):
                self.state.apply(obj)

    def admit(self, job: Object, number: int | str) -> tuple[list[Object], list[str]]:
        """The objects the Job makes (a PodGroup, the held Job, or its pods) and the
        uids of the groups to answer for; JobRefused when it would be refused."""
        meta = job["metadata"]
        admitted = self._admitted(job, f"what-if-job-{number}")
        self.jobs.append(admitted)
        namespace = str(meta["namespace"])
        group = holding.kbatch_group_of(admitted, self.names)
        made: list[Object] = []
        if (
            group is not None
            and jobgroup.makes_group(admitted, self.names)
            and self.view.pod_group(namespace, group) is None
        ):
            why, made_group = self._group_made(admitted)
            if made_group is None:
                self.unmade[f"{namespace}/{group}"] = why
                return [admitted], [f"{namespace}/{group}"]
            made.append(made_group)
        if holding.is_held(admitted):
            return [*made, admitted], [f"{namespace}/{group}"]
        if admitted["spec"].get("suspend") is True:  # (by its owner: it makes no pods)
            uid = f"{namespace}/{group}" if group is not None else f"job:{namespace}/{meta['name']}"
            self.unmade[uid] = "the Job is suspended (spec.suspend): it makes no pods until resumed"
            return [*made, admitted], [uid]
        pods = [_pod(admitted, index) for index in range(holding.pods_made(admitted))]
        if group is not None:
            return [*made, *pods], [f"{namespace}/{group}"]
        return pods, [f"pod:{namespace}/{pod['metadata']['name']}" for pod in pods]

    def admit_jobset(self, jobset: Object, number: int) -> tuple[list[Object], list[str]]:
        """The objects a JobSet makes (its PodGroup, its Jobs held with it, or what its
        Jobs make) and the uids of the groups to answer for; JobRefused as ``admit``."""
        meta = jobset["metadata"]
        admitted = self._admitted(jobset, f"what-if-jobset-{number}")
        spec = jobset_spec.jobset_spec(admitted)
        namespace, name = str(meta["namespace"]), str(meta["name"])
        uid = f"{namespace}/{name}"
        made: list[Object] = []
        if (
            jobsetgroup.makes_group(admitted, self.names)
            and self.view.pod_group(namespace, name) is None
        ):
            why, made_group = self._group_made(admitted, "JobSet")
            if made_group is None:
                self.unmade[uid] = why
                return [], [uid]
            made.append(made_group)
        held = holding.is_held(admitted)
        if spec.suspend and not held:
            why = "the JobSet is suspended (spec.suspend): it makes no pods until resumed"
            self.unmade[uid] = why
            return made, [uid]
        uids = [uid] if held else []
        for k, job in enumerate(_jobs_of(admitted, spec)):
            if held:  # (released with the JobSet, as one: its group's)
                job["metadata"]["annotations"][holding.HELD_ANNOTATION] = "its JobSet is held"
                job["metadata"]["uid"] = f"what-if-jobset-{number}-{k}"
                self.jobs.append(job)
                made.append(job)
                continue
            objs, found = self.admit(job, f"{number}-{k}")
            made += objs
            uids += [u for u in found if u not in uids]
        return made, uids

    def _admitted(self, obj: Object, uid: str) -> Object:
        """``obj``, created with ``uid``, as the API server's checks and kbatch's
        webhooks leave it; JobRefused (naming the field) when they would refuse it."""
        why = validation.refusal(obj)
        if why is not None:
            raise JobRefused(why)
        obj = {**obj, "metadata": {**obj["metadata"], "uid": uid}}
        answer = chain.admit(obj, None, self.view)
        if not answer.allowed:
            raise JobRefused(answer.message)
        return answer.applied_to(obj)

    def _group_made(self, owner: Object, kind: str = "Job") -> tuple[str, Object | None]:
        """The PodGroup kbatch makes for the labelled ``owner`` (a Job, or a JobSet:
        ``kind``), as its admission leaves it; or why it is not made (None)."""
        not_leaf = jobgroup.queue_not_leaf(owner, self.view, kind)
        if not_leaf is not None:
            return not_leaf, None
        if kind == "Job":
            made = jobgroup.pod_group_for(owner, holding.pods_made(owner))
        else:
            made = jobsetgroup.pod_group_for(owner)
        made["metadata"]["creationTimestamp"] = owner["metadata"]["creationTimestamp"]
        answer = chain.admit(made, None, self.view)
        if not answer.allowed:
            return jobgroup.refusal_message(owner, answer.message, kind), None
        group = answer.applied_to(made)
        self.state.apply(group)
        return "", group


def _jobs_of(jobset: Object, spec: jobset_spec.JobSetSpec) -> list[Object]:
    """The Jobs JobSet's controller makes for ``jobset`` when it starts (InOrder: the
    first replicated Job's only; never those that ``dependsOn`` another): the rest come
    once those run, and a forecast of them would need JobSet's controller, which the
    forecast does not play. The group's start is the first ones'."""
    made = []
    for which, replicated in enumerate(spec.replicated):
        if replicated.depends:
            continue
        for index in range(replicated.replicas):
            job = jobset_spec.child_job(jobset, spec, which, index, 0)
            job["metadata"]["creationTimestamp"] = jobset["metadata"]["creationTimestamp"]
            made.append(job)
        if spec.in_order:
            break
    return made


def _pod(job: Object, index: int) -> Object:
    """The ``index``-th pod the job controller makes for ``job``, created with it (of
    completion index ``index`` in an Indexed Job)."""
    pod = controller.pod_for(job, index)
    if job["spec"].get("completionMode") == "Indexed":
        pod = job_indexes.indexed(pod, str(job["metadata"]["name"]), index)
    pod["metadata"]["creationTimestamp"] = job["metadata"]["creationTimestamp"]
    return pod


def _jobs_of_group(jobs: list[Object], namespace: str, group: str) -> list[Object]:
    """The Jobs whose pods join the PodGroup ``namespace/group``, in name order."""
    found = [
        job
        for job in jobs
        if (job.get("metadata") or {}).get("namespace", "default") == namespace
        and holding.group_of(job) == group
    ]
    return sorted(found, key=lambda job: str(job["metadata"]["name"]))
