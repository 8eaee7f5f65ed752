"""Build a session's snapshot from parsed records, keeping from the last snapshot what
nothing changed since.

What each object works out to (a pod's template and task, a group's parts, a node's
allocatable row) is kept per object (``reuse.per_object``), worked out as objects
arrive. A snapshot keeps the last one's jobs that nothing changed (``kept_jobs``) and
its nodes while no Node was written (``kept_nodes``); it then walks only the pods of
the other jobs (``_pods_to_pass``), and says what changed since the last snapshot in
its ``Delta``.
"""

import functools
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet

from kbatch.api.podgroup import PodGroup
from kbatch.api.queue import Queue
from kbatch.cluster.job_accounts import JobAccounts, complete_groups
from kbatch.cluster.pod_pass import PodPass
from kbatch.cluster.records import NodeRecord, PodRecord, PriorityClassRecord
from kbatch.cluster.reuse.group_parts import gives_again, job_info
from kbatch.cluster.reuse.kept_jobs import JobContext, KeptJobs, own_groups_in_order
from kbatch.cluster.reuse.kept_nodes import KeptNodes
from kbatch.cluster.reuse.kept_tasks import Priorities, TaskContext
from kbatch.cluster.reuse.next_jobs import NextJobs, changed_uids, next_jobs
from kbatch.cluster.reuse.per_object import PerObjectCaches
from kbatch.cluster.reuse.pod_units import ShownPods
from kbatch.cluster.reuse.settled import OrderChanges
from kbatch.cluster.snapshot_inputs import queue_info, resource_names
from kbatch.operators.scheduler.core.framework.delta import Delta
from kbatch.operators.scheduler.core.framework.info import JobInfo, TaskInfo
from kbatch.operators.scheduler.core.framework.interface import OrphanPod, Snapshot
from kbatch.operators.scheduler.core.framework.nodes import NodeInfo, NodeSet
from kbatch.operators.scheduler.core.framework.resources import Dims
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts


class SnapshotBuilder:
    """Snapshots made one after another, each from what the last one kept.
    ``shortcuts``: which of that keeping it does (the cluster state's)."""

    def __init__(self, shortcuts: Shortcuts = ALL) -> None:
        self._shortcuts = shortcuts
        # The last snapshot's jobs, kept unchanged while nothing changed them (kept_jobs), and
        # its nodes, while no Node was written (kept_nodes).
        self._kept_jobs = KeptJobs(shortcuts)
        self._kept_nodes = KeptNodes(shortcuts)
        # What each object works out to, kept per object and worked out as it arrives: the
        # state hands pods, groups and nodes to ``objects`` as they are applied. (Told
        # to forget the kept jobs and nodes by a function of those, not of the builder:
        # no cycle, so a state is freed as soon as nothing refers to it.)
        forget = functools.partial(_forget_kept, self._kept_jobs, self._kept_nodes)
        self.objects = PerObjectCaches(forget, shortcuts)
        # The units of pods of the last snapshot that are in no job (an orphan, a pod of
        # no group of ours on a node): no job kept unchanged holds them, so every pass
        # walks them.
        self._jobless: set[str] = set()
        self._made = 0  # snapshots made (the last one's generation)
        # The last snapshot's Node set's static version and Queue objects, for its delta.
        self._last_nodes: object = None
        self._last_queues: Mapping[str, Queue] = {}

    def build(
        self,
        nodes: list[NodeRecord],
        pods: list[PodRecord] | ShownPods,
        pod_groups: Mapping[str, PodGroup],
        queues: Mapping[str, Queue],
        priority_classes: Mapping[str, PriorityClassRecord],
        scheduler_names: frozenset[str],
        names: Iterable[str] | None = None,
        changed_units: AbstractSet[str] | None = None,
        group_order: OrderChanges | None = None,
    ) -> Snapshot:
        """The snapshot of these objects. ``names``: every resource name the cluster's
        objects mention, when the caller keeps them (the objects given may be fewer).
        ``changed_units``: the units (PodGroup keys, ``PodRecord.unit``) whose objects
        were written since this builder's last snapshot, when the caller knows them;
        ``group_order``: how ``pod_groups``' order changed since then, when it does.
        It shares the tasks, and the jobs, no session changed with the snapshot before
        it: it is good until this builder's next snapshot (``kept_tasks``,
        ``kept_jobs``). ``pods``: in snapshot order, or a ShownPods that lists them, or
        those of some units (``_pods_to_pass``), as far as asked."""
        if not isinstance(pods, ShownPods):
            pods = ShownPods.of_list(pods)
        if names is None:
            names = resource_names(nodes, pods.every(), pod_groups, queues)
        dims = self.objects.dims_for(names)
        node_set = self._kept_nodes.node_set(
            nodes,
            lambda: NodeSet(
                [
                    NodeInfo(n.name, n.labels, n.taints, n.unschedulable, dict(n.conditions))
                    for n in nodes
                ],
                self.objects.allocatable(nodes, dims),
            ),
        )
        resolver = Priorities(priority_classes)
        self.objects.made_under(TaskContext(dims, dict(node_set.index), resolver, scheduler_names))
        context = JobContext.of(dims, node_set.names, resolver, scheduler_names)
        queue_infos = {name: queue_info(q, dims) for name, q in queues.items()}
        self.objects.forget_groups_but(pod_groups)
        self.objects.forget_templates_but(pods)
        walk = self._next_jobs(context, changed_units, pod_groups, group_order, dims, resolver)
        if walk is None:  # every group walked
            kept_jobs = self._kept_jobs.reusable(context, changed_units)
            jobs, taken, without_tasks = self._jobs(pod_groups, dims, resolver, kept_jobs)
            if taken < len(kept_jobs):  # of groups this snapshot shows, and pods' own groups
                kept_jobs = {
                    unit: job
                    for unit, job in kept_jobs.items()
                    if not job.has_pod_group or jobs.get(unit) is job
                }
        else:
            jobs, kept_jobs, without_tasks = walk.jobs, walk.kept, walk.without_tasks
            self._kept_jobs.not_kept = walk.not_kept
        orphans: list[OrphanPod] = []
        accounts = self._pass_pods(
            pods, jobs, kept_jobs, walk, changed_units, node_set, (dims, resolver, scheduler_names),
            orphans,
        )  # fmt: skip
        accounts.requests.add_to(accounts.owners, self._shortcuts.sums_by_bincount)
        complete_groups(self.objects.groups, jobs, accounts)
        self._kept_jobs.made(jobs, len(pod_groups), walk)
        self._made += 1
        return Snapshot(
            dims=dims,
            nodes=node_set,
            jobs=jobs,
            queues=queue_infos,
            orphans=orphans,
            delta=self._delta(
                walk, _unchanged(kept_jobs, without_tasks), jobs, pod_groups, node_set, queues
            ),
        )

    def _delta(
        self,
        walk: NextJobs | None,
        unchanged: dict[str, JobInfo],
        jobs: Mapping[str, JobInfo],
        pod_groups: Mapping[str, PodGroup],
        node_set: NodeSet,
        queues: Mapping[str, Queue],
    ) -> Delta | None:
        """What changed since this builder's last snapshot (None: this is its first).
        A node set made of the last one's nodes keeps its static version (the same
        Node records); the Queues are few, compared one by one."""
        last_nodes, self._last_nodes = self._last_nodes, node_set.static_version
        last_queues, self._last_queues = self._last_queues, dict(queues)
        if self._made == 1:
            return None
        changed_queues = {name for name, q in queues.items() if last_queues.get(name) is not q}
        return Delta(
            generation=(self, self._made),
            unchanged_jobs=unchanged,
            changed=changed_uids(walk, unchanged, len(jobs) - len(pod_groups)),
            changed_by_sessions=self._kept_jobs.log,
            nodes_unchanged=node_set.static_version is last_nodes,
            changed_queues=frozenset(changed_queues.union(last_queues.keys() - queues.keys())),
        )

    def _pass_pods(
        self,
        pods: ShownPods,
        jobs: dict[str, JobInfo],
        kept_jobs: dict[str, JobInfo],
        walk: NextJobs | None,
        changed_units: AbstractSet[str] | None,
        node_set: NodeSet,
        under: tuple[Dims, Priorities, frozenset[str]],
        orphans: list[OrphanPod],
    ) -> JobAccounts:
        """The pod pass (``PodPass.tasks``) over every pod, or over the pods of the jobs
        not kept unchanged when it may (``_pods_to_pass``), and the tasks put on the
        nodes; the accounting of the jobs it made. ``under``: the snapshot's dimensions,
        priorities and scheduler names."""
        dims, resolver, scheduler_names = under
        made: list[TaskInfo] = []
        passing = self._pods_to_pass(pods, kept_jobs, changed_units, node_set)
        self._jobless = set()
        objects = self.objects
        pod_pass = PodPass(
            objects.templates, objects.template, objects.tasks, self._jobless, self._shortcuts
        )
        if passing is None:  # every pod
            accounts, placed, nominated = pod_pass.tasks(
                pods.every(), jobs, kept_jobs, node_set, dims, resolver, scheduler_names,
                orphans, made,
            )  # fmt: skip
            # The tasks on nodes and the room kept for nominated ones, all at once (nothing
            # reads the node set before it is complete); those of jobs kept unchanged are
            # mostly where they were (kept_nodes).
            self._kept_nodes.place(node_set, placed, nominated, made, kept_jobs)
            return accounts
        accounts, _, _ = pod_pass.tasks(
            passing, jobs, {}, node_set, dims, resolver, scheduler_names, orphans, made
        )
        if walk is None:  # (else the last snapshot had no job of a pod's own)
            own_groups_in_order(jobs, kept_jobs, pods)
        # (the units not kept unchanged: where the pass may have left nodes to place again)
        units = None if walk is None else walk.looked_at | walk.gone
        self._kept_nodes.place_made(node_set, made, kept_jobs, pods.place, units)
        return accounts

    def _next_jobs(
        self,
        context: JobContext,
        changed_units: AbstractSet[str] | None,
        pod_groups: Mapping[str, PodGroup],
        group_order: OrderChanges | None,
        dims: Dims,
        resolver: Priorities,
    ) -> NextJobs | None:
        """The groups' jobs from the last snapshot's by what changed (``next_jobs``), when
        they may be; None: walk every group (``_jobs``)."""
        last = self._kept_jobs.last(context, changed_units)
        if last is None:
            return None
        return next_jobs(
            last,
            pod_groups,
            group_order,
            changed_units or set(),
            self.objects.groups.get,
            lambda key, group, kept: self._job(key, group, dims, resolver, kept),
            resolver.of_class,
            self._shortcuts.job_order_from_changes,
        )

    def _pods_to_pass(
        self,
        pods: ShownPods,
        kept_jobs: Mapping[str, JobInfo],
        changed_units: AbstractSet[str] | None,
        node_set: NodeSet,
    ) -> list[PodRecord] | None:
        """The pods the pass must walk, in snapshot order, when it need not walk all: the
        pods of every unit whose job is not kept unchanged (written since, touched, new,
        or in no job). None: walk every pod (no job is kept unchanged, the nodes are made
        anew, or the pods can only be listed whole). The pods of the jobs kept unchanged
        would only put the same tasks on the same nodes again (``kept_nodes``)."""
        if (
            not kept_jobs
            or changed_units is None
            or not pods.lists_units
            or not self._kept_nodes.places_again(node_set)
            or not self._shortcuts.pods_of_changed_units_only
        ):
            return None
        units = self._kept_jobs.not_kept | changed_units | self._jobless
        # A unit of a job kept unchanged has a jobless pod? (Asked of the few units: a set's
        # isdisjoint of a dict walks every key of the dict, a dict's keys' of the set.)
        if not kept_jobs.keys().isdisjoint(units):
            return None
        return pods.of_units(units)

    def _jobs(
        self,
        pod_groups: Mapping[str, PodGroup],
        dims: Dims,
        resolver: Priorities,
        kept_jobs: Mapping[str, JobInfo],
    ) -> tuple[dict[str, JobInfo], int, list[tuple[str, JobInfo]]]:
        """The groups' jobs, in their order: ``_job`` of each, a job kept unchanged (most
        of a busy cluster's) found inline (this runs for every group of every snapshot);
        how many of them are ``kept_jobs``' (all of them: every job kept unchanged is of a
        group shown); and the jobs without tasks kept unchanged (``KeptJobs.without_tasks``
        given again by their group's parts)."""
        jobs: dict[str, JobInfo] = {}
        kept_job, parts_of = kept_jobs.get, self.objects.groups.get
        kept_bare = self._kept_jobs.without_tasks if self._shortcuts.jobs_without_tasks else {}
        kept_without_tasks: list[tuple[str, JobInfo]] = []
        taken = 0
        for key, group in pod_groups.items():
            kept = kept_job(key)
            if kept is not None:
                parts = parts_of(key)
                if parts is not None and parts.group is group and parts.job is kept:
                    kept.phase = parts.tail[3]  # (as _job sets it)
                    jobs[key] = kept
                    taken += 1
                    continue
            elif (bare := kept_bare.get(key)) is not None:
                # What ``_job`` gives when it keeps such a job unchanged (``job_info``), without
                # its call: most of a long backlog. (When this finds it changed, ``_job``
                # makes it anew.)
                priority = resolver.of_class(group.spec.priority_class_name)
                if gives_again(parts_of(key), group, bare, priority):
                    jobs[key] = bare
                    kept_without_tasks.append((key, bare))
                    continue
            made = jobs[key] = self._job(key, group, dims, resolver, kept_jobs)
            taken += made is kept
        return jobs, taken, kept_without_tasks

    def _job(
        self,
        key: str,
        group: PodGroup,
        dims: Dims,
        resolver: Priorities,
        kept_jobs: Mapping[str, JobInfo],
    ) -> JobInfo:
        """The job of ``group``: the last snapshot's, if ``kept_jobs`` has it (its phase
        set back to what the group says: a session may have moved it), else made."""
        parts = self.objects.parts_of(key, group, dims)
        job = kept_jobs.get(key)
        if job is None or parts.job is not job:  # (not: parts made anew for a new object)
            return job_info(group, parts, resolver, self._shortcuts.jobs_without_tasks)
        job.phase = parts.tail[3]
        return job


def _forget_kept(jobs: KeptJobs, nodes: KeptNodes) -> None:
    """Drop the last snapshot's jobs and nodes (the resource dimensions changed)."""
    jobs.forget()
    nodes.forget()


def _unchanged(
    kept_jobs: dict[str, JobInfo], without_tasks: list[tuple[str, JobInfo]]
) -> dict[str, JobInfo]:
    """The jobs a snapshot keeps unchanged from the last one (``Delta.unchanged_jobs``):
    the jobs with tasks kept whole (``kept_jobs``, a dict the build made and is done
    with: added to in place, not copied every snapshot), and those without tasks its
    groups' parts gave again that are still without (no pod of theirs came: their unit
    was not written)."""
    kept_jobs.update((unit, job) for unit, job in without_tasks if not job.tasks)
    return kept_jobs
