"""What each pod, PodGroup and Node works out to for a snapshot (a pod's template and
task, a group's parts, a node's allocatable row), worked out as the object arrives and
kept while it is the same object; all dropped when the resource dimensions change.

Pods of one template share one PodTemplate (and its request vector), kept by the
template's key; what a PodGroup's job is made from that takes parsing (minResources as
a vector, its lifetime and topology, its creation time) is kept for as long as the
group object is the same one (``group_parts``); each node's row of the allocatable
matrix for as long as its record is the same one; and each pod's task on its record
(``kept_tasks``). The cluster state hands pods, groups and nodes over as they arrive
(``pod_arrived``, ``group_arrived``, ``node_arrived``), as kube-scheduler's cache is
kept current by its informers' events, so that this work is done then rather than by
the next snapshot. Templates and group parts no snapshot shows any more are dropped
once they outnumber the shown ones twice over.
"""

from collections.abc import Callable, Iterable, Mapping

import numpy as np

from kbatch.api.podgroup import PodGroup
from kbatch.cluster.podspec import ParsedSpec
from kbatch.cluster.records import NodeRecord, PodRecord, PriorityClassRecord
from kbatch.cluster.reuse.group_parts import GroupParts, group_parts, status_parts
from kbatch.cluster.reuse.kept_tasks import (
    KeptTasks,
    Priorities,
    TaskContext,
    made_task,
    node_index_of,
    where,
)
from kbatch.cluster.reuse.pod_units import ShownPods
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate
from kbatch.operators.scheduler.core.framework.resources import PODS, Dims
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

PENDING = TaskStatus.PENDING  # (a member read off its Enum class costs a Python call)

# What the state holds that a snapshot's tasks depend on: every resource name its objects
# mention, its nodes, its PriorityClasses, and the scheduler names that are ours.
Inputs = tuple[Iterable[str], list[NodeRecord], Mapping[str, PriorityClassRecord], frozenset[str]]


class PerObjectCaches:
    """One snapshot builder's per-object caches. ``on_new_dims``: called when the
    resource dimensions change (the builder drops what it keeps under the old ones);
    ``shortcuts``: the cluster state's (``group_parts_of_status_writes``)."""

    def __init__(self, on_new_dims: Callable[[], None], shortcuts: Shortcuts = ALL) -> None:
        self._on_new_dims = on_new_dims
        self._shortcuts = shortcuts
        self._dims: Dims | None = None
        # Templates by their key, and groups' parts by namespace/name (read by the builder
        # and its pod pass; replaced, not changed, when some are dropped).
        self.templates: dict[str, PodTemplate] = {}
        self.groups: dict[str, GroupParts] = {}
        # The node records of the last snapshot and their allocatable matrix; each node's
        # row, by name, with the record it is of (worked out as nodes arrive).
        self._nodes: tuple[list[NodeRecord], np.ndarray] | None = None
        self._node_rows: dict[str, tuple[NodeRecord, np.ndarray]] = {}
        # Pods' tasks, made as they arrive or first snapshot (kbatch.cluster.reuse.kept_tasks),
        # and what those that arrive are made under: the last snapshot's context, or,
        # before the first, the state's when the first pod arrived (a task made under a
        # context that no longer holds is made again by the snapshot that meets it).
        self.tasks = KeptTasks()
        self._arrival: TaskContext | None = None

    def made_under(self, context: TaskContext) -> None:
        """A snapshot was made under ``context``: objects arriving next are worked out
        under it too."""
        self._arrival = context

    def pod_arrived(self, pod: PodRecord, inputs: Callable[[], Inputs]) -> None:
        """Make the task of ``pod`` (a record just applied) now, as a snapshot would, so
        that the next snapshot finds it made. ``inputs``: the state's, asked for only
        before the first snapshot."""
        status = pod.task_status
        if status is None:
            return
        spec = pod.spec
        template = self.templates.get(spec.key)
        context = self._arrival
        if template is None or context is None:  # (a template kept is of its dimensions)
            context = self._arrival_context([name for name, _ in spec.request], inputs)
            template = self.template(spec, context.dims)
        ours = pod.scheduler_name in context.scheduler_names
        if not ours and status is PENDING:
            return  # another scheduler's pending pod: no snapshot has a task for it
        priority = pod.priority
        if priority is None:
            priority = context.priorities.of_class(spec.priority_class_name)
        node, nominated = where(pod, status, context.node_index)
        task = made_task(pod, status, template, pod.unit if ours else "", priority, node, nominated)
        self.tasks.keep(pod, task)

    def group_arrived(self, key: str, group: PodGroup, inputs: Callable[[], Inputs]) -> None:
        """Work out what the job of ``group`` (a PodGroup just applied, by namespace/name)
        is made from now, as a snapshot would (``parts_of``), so that the next snapshot
        finds it done."""
        context = self._arrival_context(group.spec.min_resources or (), inputs)
        self.parts_of(key, group, context.dims)

    def node_arrived(self, node: NodeRecord, inputs: Callable[[], Inputs]) -> None:
        """Work out ``node``'s row of the allocatable matrix now (a record just applied),
        so that the next snapshot finds it done."""
        context = self._arrival_context(node.allocatable, inputs)
        self._node_rows[node.name] = (node, context.dims.vector(node.allocatable))

    def _arrival_context(self, names: Iterable[str], inputs: Callable[[], Inputs]) -> TaskContext:
        """What an arriving object is worked out under: the last snapshot's context, made
        anew from the state's ``inputs`` before the first snapshot or when the object
        mentions a resource name its dimensions do not have."""
        context = self._arrival
        if context is None or any(name not in context.dims.index for name in names):
            context = self._arrival = self._context_of(*inputs())
        return context

    def _context_of(
        self,
        names: Iterable[str],
        nodes: list[NodeRecord],
        priority_classes: Mapping[str, PriorityClassRecord],
        scheduler_names: frozenset[str],
    ) -> TaskContext:
        """The context a snapshot of these would make its tasks under (NodeSet's order:
        by name)."""
        dims = self.dims_for(names)
        return TaskContext(
            dims, node_index_of(nodes), Priorities(priority_classes), scheduler_names
        )

    def dims_for(self, names: Iterable[str]) -> Dims:
        """The resource dimensions of ``names``; when they differ from the last ones,
        everything kept under those is dropped (here, and the builder's through
        ``on_new_dims``)."""
        dims = Dims.of(names)
        if dims != self._dims:
            self._dims = dims
            self.templates.clear()
            self.groups.clear()
            self._nodes = None
            self._node_rows.clear()
            self._on_new_dims()
        return dims

    def template(self, spec: ParsedSpec, dims: Dims) -> PodTemplate:
        """The template of pods of ``spec``, under ``dims``, the last ``dims_for``'s."""
        template = self.templates.get(spec.key)
        if template is None:
            request = dims.vector(dict(spec.request))
            template = PodTemplate(
                namespace=spec.namespace,
                labels=dict(spec.labels),
                request=request,
                best_effort=all(v <= 0 for name, v in spec.request if name != PODS),
                node_selector=spec.node_selector,
                affinity=spec.affinity,
                tolerations=spec.tolerations,
                host_ports=spec.host_ports,
                priority_class_name=spec.priority_class_name,
                resource_claims=spec.resource_claims,
                preemption_policy=spec.preemption_policy,
                spread=spec.spread,
                images=spec.images,
            )
            self.templates[spec.key] = template
        return template

    def allocatable(self, nodes: list[NodeRecord], dims: Dims) -> np.ndarray:
        """The nodes' allocatable as a (nodes × dims) matrix, kept while they are the same
        records (the snapshot's NodeSet takes its own copy)."""
        if self._nodes is not None:
            known, matrix = self._nodes
            if len(known) == len(nodes) and all(a is b for a, b in zip(known, nodes, strict=True)):
                return matrix
        rows = []
        for node in nodes:
            kept = self._node_rows.get(node.name)
            if kept is None or kept[0] is not node:
                kept = self._node_rows[node.name] = (node, dims.vector(node.allocatable))
            rows.append(kept[1])
        if len(self._node_rows) > 2 * len(nodes) + 100:  # nodes gone: forget their rows
            names = {node.name for node in nodes}
            self._node_rows = {k: v for k, v in self._node_rows.items() if k in names}
        matrix = np.array(rows).reshape(len(nodes), len(dims))
        self._nodes = (nodes, matrix)
        return matrix

    def parts_of(self, key: str, group: PodGroup, dims: Dims) -> GroupParts:
        """The parts of ``group`` under ``dims``, the last ``dims_for``'s: those kept are
        of them (``dims_for`` drops them all when they change), and a version of a kept
        group with its status alone written takes the rest of its parts as they are
        (the scheduler writes a group's status at every move)."""
        parts = self.groups.get(key)
        if parts is None or parts.group is not group:
            keep = self._shortcuts.group_parts_of_status_writes
            kept = None if parts is None else status_parts(parts, group, keep)
            parts = self.groups[key] = kept or group_parts(key, group, dims)
        return parts

    def forget_groups_but(self, keys: Mapping[str, PodGroup]) -> None:
        """Drop the parts of groups this snapshot does not show (gone, or left out)."""
        if len(self.groups) > 2 * len(keys):
            self.groups = {k: v for k, v in self.groups.items() if k in keys}

    def forget_templates_but(self, pods: ShownPods) -> None:
        """Drop the templates no pod of this snapshot has (the pods of each Job have a
        template of their own: a long run would keep one per Job it ever ran)."""
        if len(self.templates) > 2 * pods.count + 100:
            used = {pod.spec.key for pod in pods.every()}
            self.templates = {k: v for k, v in self.templates.items() if k in used}
