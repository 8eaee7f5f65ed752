"""The snapshot's pass over the pods (``SnapshotBuilder.build``): each pod's task, in pod
order, in its job, with the job's counts and sums gathered (``job_accounts``), and the
tasks on nodes and nominated to them, for the node set.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kbatch.api import DEFAULT_QUEUE
from kbatch.api.podgroup import PodGroupPhase
from kbatch.cluster.job_accounts import JobAccounts
from kbatch.cluster.podspec import ParsedSpec
from kbatch.cluster.records import PodRecord
from kbatch.cluster.reuse.kept_tasks import KeptTasks, Priorities, made_task
from kbatch.operators.scheduler.core.framework.info import (
    FINISHED_STATUSES,
    NO_NODE,
    JobInfo,
    TaskInfo,
    TaskStatus,
)
from kbatch.operators.scheduler.core.framework.interface import OrphanPod
from kbatch.operators.scheduler.core.framework.nodes import NodeSet
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate
from kbatch.operators.scheduler.core.framework.resources import Dims
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

PENDING = TaskStatus.PENDING  # (a member read off its Enum class costs a Python call)
INQUEUE = PodGroupPhase.INQUEUE


@dataclass(slots=True)
class PodPass:
    """What a snapshot's pass works with besides the pods: its builder's templates (and
    how it makes one), its kept tasks, and the units of pods found in no job (added to,
    for the builder: ``SnapshotBuilder._pods_to_pass``). ``shortcuts``: ``task_runs`` off,
    each task accounted on its own (a run of one); ``lookup_runs`` off, each pod's
    template, class priority and job looked up anew."""

    templates: dict[str, PodTemplate]
    template_of: Callable[[ParsedSpec, Dims], PodTemplate]
    keeper: KeptTasks
    jobless: set[str]
    shortcuts: Shortcuts = ALL

    def tasks(
        self,
        pods: list[PodRecord],
        jobs: dict[str, JobInfo],
        kept_jobs: Mapping[str, JobInfo],
        node_set: NodeSet,
        dims: Dims,
        resolver: Priorities,
        scheduler_names: frozenset[str],
        orphans: list[OrphanPod],
        made: list[TaskInfo],
    ) -> tuple[JobAccounts, list[TaskInfo], list[TaskInfo]]:
        """The pods' tasks, in pod order: those of our jobs in their jobs (the rest of
        their accounting gathered), every task on a node, ours or not (its ``node`` set),
        and the pending ones nominated to a node. Pending pods of our groups that have
        no PodGroup go to ``orphans``. One pass over the pods does it all, hand-inlined
        in this one long function: a pass over 50,000 pods costs some 10 ms, and a call
        per pod would add to that. The pods of ``kept_jobs`` (kept unchanged: tasks,
        counts and sums) only put their tasks in those lists; the others' tasks on a
        node or nominated to one also go to ``made``."""
        accounts = JobAccounts()
        owners, rows, kinds = accounts.owners, accounts.rows, accounts.kinds
        requests = accounts.requests
        placed: list[TaskInfo] = []
        nominated: list[TaskInfo] = []
        last_job, last_template, last_role, last_priority, row, at = None, None, "", 0, 0, 0
        run_status: TaskStatus | None = None
        joining: TaskStatus | None = None
        run = 0  # the tasks of the run so far
        task_runs, lookup_runs = self.shortcuts.task_runs, self.shortcuts.lookup_runs
        # The spec and unit of the pod before, what they gave it (``lookup_runs``).
        last_spec: ParsedSpec | None = None
        last_unit, unit_job, unit_job_uid = "", None, ""
        job_tasks: dict[str, TaskInfo] = {}
        node_index, templates = node_set.index, self.templates
        keeper = self.keeper
        class_values, default_priority = resolver.values, resolver.default  # its of_class
        for pod in pods:
            status = pod.task_status
            if status is None:
                continue
            if kept_jobs and pod.scheduler_name in scheduler_names:
                job = kept_jobs.get(pod.unit)
                if job is not None:
                    kept = job.tasks[pod.uid]
                    if kept.nominated != NO_NODE:
                        nominated.append(kept)
                    elif kept.node != NO_NODE:
                        placed.append(kept)
                    if not job.has_pod_group:  # a pod's own group: made where it is met
                        job.phase = INQUEUE
                        jobs[pod.unit] = job
                    continue
            # Its template; its own priority, else its class's; its job (the common cases
            # inline: this runs for every pod of every snapshot). The pods of a Job share
            # one spec (records share equal specs) and the pods of a gang are mostly met
            # in a row: the template and the class's value are worked out once per run of
            # pods of one spec, and the job once per run of one unit.
            spec = pod.spec
            if spec is not last_spec:
                last_spec = spec if lookup_runs else None
                template = templates.get(spec.key) or self.template_of(spec, dims)
                class_priority = class_values.get(spec.priority_class_name or "", default_priority)
            priority = pod.priority
            if priority is None:
                priority = class_priority
            if pod.scheduler_name in scheduler_names:  # its job: the pod before's, same unit
                unit = pod.unit
                if unit != last_unit:
                    last_unit = unit if lookup_runs else ""
                    unit_job = jobs.get(unit)
                    unit_job_uid = "" if unit_job is None else unit_job.uid
                job, job_uid = unit_job, unit_job_uid
            else:
                job, job_uid = None, ""
            if job is None:  # (looked up again: a pod's own group is made here)
                job = job_of(pod, priority, jobs, dims, scheduler_names)
                if job is None and status is PENDING:
                    if pod.group and pod.scheduler_name in scheduler_names:
                        orphans.append(OrphanPod(pod.namespace, pod.name, pod.group))
                        self.jobless.add(pod.unit)
                    continue  # another scheduler's pending pod, or an orphan: takes no room
                job_uid = "" if job is None else job.uid
            # Its kept task (see kbatch.cluster.reuse.kept_tasks), if that is still what this
            # snapshot would make: its node and nominated node as kept_tasks.where says,
            # inline (this runs for every pod of every snapshot).
            node = nominated_at = NO_NODE
            if status is PENDING:
                if pod.nominated_node:
                    nominated_at = node_index.get(pod.nominated_node, NO_NODE)
            elif pod.node_name and status not in FINISHED_STATUSES:
                node = node_index.get(pod.node_name, NO_NODE)
            task = pod.kept_task if pod.kept_by is keeper else None  # (KeptTasks.task_of)
            if (
                task is None
                or task.status is not status
                or task.node != node
                or task.nominated != nominated_at
                or task.template is not template
                or task.priority != priority
                or task.job != job_uid
            ):
                task = made_task(pod, status, template, job_uid, priority, node, nominated_at)
                keeper.keep(pod, task)
            if nominated_at != NO_NODE:
                nominated.append(task)  # (a pending task here has a job)
                made.append(task)
            elif node != NO_NODE:
                placed.append(task)
                made.append(task)
            if job is None:
                self.jobless.add(pod.unit)
                continue
            # JobInfo.add_task, inline: the task in its job, and its count, readiness and
            # request (``at``: its index in ``requests``) accounted per run of tasks of one
            # job, template, role, priority and status, once the run ends (a gang's pods
            # mostly make one run: this runs for every pod of every snapshot).
            role = pod.role
            same_kind = (
                job is last_job
                and template is last_template
                and role == last_role
                and priority == last_priority
            )
            if same_kind and status is joining:
                job_tasks[pod.uid] = task
                run += 1
                continue
            if run:
                accounts.add_run(last_job, run_status, run, row, at)
            if not same_kind:
                if job is not last_job:
                    row = rows.setdefault(id(job), len(owners))
                    if row == len(owners):
                        owners.append(job)
                        kinds.append([])
                    job_tasks = job.tasks
                last_job, last_template, last_role, last_priority = job, template, role, priority
                kinds[row].append((template, role, priority))
                at = requests.index(template.request)
            job_tasks[pod.uid] = task
            run_status, run = status, 1
            joining = status if task_runs else None  # the status a task joins the run in
        if run:
            accounts.add_run(last_job, run_status, run, row, at)
        return accounts, placed, nominated


def job_of(
    pod: PodRecord,
    priority: int,
    jobs: dict[str, JobInfo],
    dims: Dims,
    scheduler_names: frozenset[str],
) -> JobInfo | None:
    """The pod's job: its PodGroup's, or (no group annotation) its own group of one,
    which takes the pod's priority. None for another scheduler's pod or an orphan."""
    if pod.scheduler_name not in scheduler_names:
        return None
    uid = pod.unit
    job = jobs.get(uid)
    if job is None and not pod.group:
        job = JobInfo(
            uid=uid,
            namespace=pod.namespace,
            name=pod.name,
            queue=DEFAULT_QUEUE,
            min_member=1,
            created=pod.created,
            dims_len=len(dims),
            priority=priority,
            phase=PodGroupPhase.INQUEUE,
            has_pod_group=False,
        )
        jobs[uid] = job
    return job
