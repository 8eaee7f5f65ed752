"""Armada's simulator input as kbatch manifests: a WorkloadSpec and a ClusterSpec, the
YAML files of armadaproject/armada ``internal/scheduler/simulator/testdata``, unchanged.

    plan = load(Path("workload.yaml"), Path("cluster.yaml"))
    plan.loaded      # Manifests: PriorityClasses, Queues, Nodes, Jobs and PodGroups
    plan.dependent   # templates submitted only when the templates they name are done

ClusterSpec: every ``clusters[].nodeTemplates[]`` makes ``number`` Nodes named
``<cluster>-<template index>-<i>`` (Armada's node ids), with the template's labels plus
``armadaproject.io/clusterName`` and ``armadaproject.io/pool``, its taints, and
``totalResources.resources`` as allocatable (``pods`` 10000 unless given: Armada counts
no pods). WorkloadSpec: each queue is a kbatch Queue (names lowercased; the weight, a
float in Armada, scaled to the smallest integers of the same ratios). Each job template
(``repeat`` expanded into ``<id>-repeat-<i>`` as Armada does; a template without an id
is ``<queue>-<index>``) makes ``number`` Armada jobs in namespace ``armada``: one
batch/v1 Job and one PodGroup per job, or per gang of ``gangCardinality`` jobs
(``minMember`` = the cardinality), named ``<template id>-<n>``. The Job replaces an
evicted pod, as Armada resubmits a preempted job: its ``podFailurePolicy`` ignores
kbatch's evictions (the ``DisruptionTarget`` condition), so however often it is evicted
it is not failed, and the replacement waits the job controller's backoff. Runtimes
are Armada's shifted exponential, ``minimum`` + Exp(mean ``tailMean``) — just
``minimum`` for gangs, whose jobs Armada ends together — drawn from
``random.Random(randomSeed)`` in input order (absent seed: 0, so a run repeats), as
``kbatch.io/sim-duration``;
``earliestSubmitTime`` is ``kbatch.io/sim-submit-at``. A template with ``dependencies``
is submitted once every job of the templates it names has succeeded, after
max(earliestSubmitTime, earliestSubmitTimeFromDependencyCompletion) (Armada's rule).
``armada-preemptible`` gives the PodGroup ``kbatch.io/lifetime: "0"``; the priority
classes named are created (value 30000, as in Armada's configs). A given
``gangNodeUniformityLabel`` becomes ``kbatch.io/topology-required``. Not modelled: pools
(kbatch schedules every node as one pool), ``queuePriority``, and the ClusterSpec's
delay distributions.

Fields kbatch does not read are named in one warning per file; a file that is missing,
not YAML, or has a field of the wrong type is a ManifestError naming file and field.
"""

import random
from dataclasses import dataclass, field
from pathlib import Path

from kbatch.api import API_VERSION, GROUP_NAME_ANNOTATION, LIFETIME_ANNOTATION
from kbatch.sim import clock, jobs, manifests
from kbatch.sim.armada_spec import (
    ARMADA_PRIORITY,
    CLUSTER_LABEL,
    CLUSTER_SPEC_KEYS,
    DEFAULT_PODS,
    JOB_SET_LABEL,
    NAMESPACE,
    POOL_LABEL,
    PREEMPTIBLE,
    QUEUE_ANNOTATION,
    TEMPLATE_LABEL,
    TOPOLOGY_REQUIRED,
    WORKLOAD_KEYS,
    Object,
    Reader,
    read_yaml,
    slug,
)
from kbatch.sim.armada_templates import (
    Template,
    check_templates,
    expand_repeats,
    integer_weights,
    read_queue,
)

__all__ = ["CLUSTER_LABEL", "NAMESPACE", "Dependencies", "Plan", "load"]


@dataclass(slots=True)
class Dependent:
    """A template waiting for others: its objects, made when it is released."""

    template: Template
    waits_for: set[str]
    units: list[tuple[str, float]]  # (name, runtime) per Job


@dataclass(slots=True)
class Plan:
    loaded: manifests.Manifests = field(default_factory=manifests.Manifests)
    dependent: list[Dependent] = field(default_factory=list)
    # template id -> the names of its Jobs (those of dependent templates, too)
    job_names: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def add(self, obj: Object, source: str, submit_at: float = 0.0) -> None:
        objects = self.loaded.objects
        objects.append(manifests.Manifest(obj, source, submit_at, len(objects)))


def load(workload: Path | None, cluster: Path | None) -> Plan:
    """Both files as one Plan (either may be None)."""
    plan = Plan()
    if cluster is not None:
        reader = Reader(str(cluster))
        nodes = cluster_nodes(read_yaml(cluster), reader)
        for node in nodes:
            plan.add(node, str(cluster))
        _note(plan, reader)
        if not nodes:
            plan.warnings.append(f"{cluster}: no node templates: the cluster has no nodes")
    if workload is not None:
        reader = Reader(str(workload))
        add_workload(plan, read_yaml(workload), reader)
        _note(plan, reader)
    return plan


def _note(plan: Plan, reader: Reader) -> None:
    warning = reader.warning()
    if warning is not None:
        plan.warnings.append(warning)


# --------------------------------------------------------------------------- ClusterSpec
def cluster_nodes(document: object, reader: Reader) -> list[Object]:
    spec = reader.fields(document, "", CLUSTER_SPEC_KEYS)
    nodes: list[Object] = []
    for c, raw in enumerate(reader.items(spec.get("clusters"), "clusters")):
        at = f"clusters[{c}]"
        cluster = reader.fields(raw, at, {"name": "name", "pool": "pool", "nodetemplates": "t"})
        name = reader.string(cluster.get("name", f"cluster-{c}"), f"{at}.name")
        pool = reader.string(cluster.get("pool", ""), f"{at}.pool")
        for t, template in enumerate(reader.items(cluster.get("t"), f"{at}.nodeTemplates")):
            nodes.extend(_nodes(reader, template, f"{at}.nodeTemplates[{t}]", name, pool, t))
    return nodes


def _nodes(reader: Reader, raw: object, at: str, cluster: str, pool: str, t: int) -> list[Object]:
    known = {k.lower(): k for k in ("number", "labels", "taints", "totalResources")}
    template = reader.fields(raw, at, known)
    number = reader.integer(template.get("number", 0), f"{at}.number")
    labels = reader.string_map(template.get("labels"), f"{at}.labels")
    taint_keys = {"key": "key", "value": "value", "effect": "effect"}
    taints = [
        {"value": "", **reader.fields(taint, f"{at}.taints[{i}]", taint_keys)}
        for i, taint in enumerate(reader.items(template.get("taints"), f"{at}.taints"))
    ]
    total = reader.fields(
        template.get("totalResources"), f"{at}.totalResources", {"resources": "resources"}
    )
    resources = reader.quantities(total.get("resources"), f"{at}.totalResources.resources")
    allocatable = {"pods": DEFAULT_PODS, **resources}
    labels = {**labels, CLUSTER_LABEL: cluster, POOL_LABEL: pool}
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": slug(f"{cluster}-{t}-{i}"), "labels": dict(labels)},
            "spec": {"taints": [dict(taint) for taint in taints]} if taints else {},
            "status": {
                "allocatable": dict(allocatable),
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
        for i in range(number)
    ]


# --------------------------------------------------------------------------- WorkloadSpec
def add_workload(plan: Plan, document: object, reader: Reader) -> None:
    spec = reader.fields(document, "", WORKLOAD_KEYS)
    seed = reader.integer(spec.get("randomSeed", 0), "randomSeed", minimum=-(2**63))
    raw_queues = reader.items(spec.get("queues"), "queues")
    queues = [read_queue(reader, raw, f"queues[{q}]") for q, raw in enumerate(raw_queues)]
    names = [queue.name for queue in queues]
    if len(set(names)) != len(names):
        raise reader.error("queues", f"two queues of one name (lowercased): {names}")
    source = reader.source
    weights = integer_weights([queue.weight for queue in queues])
    for queue, weight in zip(queues, weights, strict=True):
        metadata = {"name": queue.name, "annotations": {QUEUE_ANNOTATION: queue.original}}
        plan.add(
            {"apiVersion": API_VERSION, "kind": "Queue", "metadata": metadata,
             "spec": {"weight": weight}},
            source,
        )  # fmt: skip
    templates = expand_repeats([t for queue in queues for t in queue.templates])
    check_templates(reader, templates)
    for name in sorted({t.priority_class for t in templates}):
        plan.add(
            {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
             "metadata": {"name": name}, "value": ARMADA_PRIORITY},
            source,
        )  # fmt: skip
    draw = random.Random(seed)
    for template in templates:
        units = [(name, runtime(template, draw)) for name in unit_names(template)]
        plan.job_names[template.id] = [name for name, _ in units]
        if template.dependencies:
            plan.dependent.append(Dependent(template, set(template.dependencies), units))
            continue
        for name, seconds in units:
            for obj in job_objects(template, name, seconds, template.earliest):
                plan.add(obj, source, template.earliest)


def unit_names(template: Template) -> list[str]:
    """One Job per Armada job, or per gang of them."""
    count = template.number // template.cardinality if template.cardinality else template.number
    return [f"{slug(template.id)}-{n}" for n in range(count)]


def runtime(template: Template, draw: random.Random) -> float:
    """Armada's shifted exponential; a gang's jobs run exactly ``minimum``."""
    if template.cardinality or template.tail_mean <= 0:
        return template.minimum
    return template.minimum + draw.expovariate(1.0) * template.tail_mean


def job_objects(template: Template, name: str, seconds: float, submit_at: float) -> list[Object]:
    """The Job and the PodGroup of one Armada job (or gang), due at ``submit_at``."""
    due = {manifests.SUBMIT_AT: clock.format_duration(submit_at)}
    labels = {TEMPLATE_LABEL: slug(template.id)}
    if template.job_set:
        labels[JOB_SET_LABEL] = slug(template.job_set)
    group_annotations = dict(due)
    if template.priority_class == PREEMPTIBLE:
        group_annotations[LIFETIME_ANNOTATION] = "0"
    if template.uniformity_label is not None:
        group_annotations[TOPOLOGY_REQUIRED] = template.uniformity_label
    size = template.cardinality or 1
    pod_annotations = {
        **template.annotations,
        GROUP_NAME_ANNOTATION: name,
        manifests.DURATION: clock.format_duration(seconds),
    }
    pod_spec = {
        **template.pod_spec,
        "schedulerName": "kbatch",
        "restartPolicy": "Never",
        "priorityClassName": template.priority_class,
    }
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels, "annotations": due},
        "spec": {
            "parallelism": size,
            "completions": size,
            # (kbatch's evictions not counted against backoffLimit: any number of them
            # is resubmitted)
            "podFailurePolicy": {"rules": [IGNORE_EVICTIONS]},
            "template": {
                "metadata": {"labels": dict(labels), "annotations": pod_annotations},
                "spec": pod_spec,
            },
        },
    }
    group = {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": dict(labels),
                     "annotations": group_annotations},
        "spec": {"minMember": size, "queue": template.queue,
                 "priorityClassName": template.priority_class},
    }  # fmt: skip
    return [job, group]


# A podFailurePolicy rule: a pod kbatch evicted (DisruptionTarget) is not a failure.
IGNORE_EVICTIONS = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}


# --------------------------------------------------------------------------- dependencies
class Dependencies:
    """Releases dependent templates once every Job of the templates they name is complete."""

    def __init__(self, plan: Plan, source: str, order: int) -> None:
        self.waiting = list(plan.dependent)
        self.job_names = plan.job_names
        self.done: set[str] = set()
        self.source = source
        self._order = order  # input order of what it releases: after all the rest

    def release(self, controller: jobs.JobController, now: float) -> list[manifests.Manifest]:
        if not self.waiting:
            return []
        self._note_done(controller)
        released: list[manifests.Manifest] = []
        still: list[Dependent] = []
        for dependent in self.waiting:
            if not dependent.waits_for <= self.done:
                still.append(dependent)
                continue
            template = dependent.template
            due = now + max(template.earliest, template.after_dependencies)
            for name, seconds in dependent.units:
                for obj in job_objects(template, name, seconds, due):
                    released.append(manifests.Manifest(obj, self.source, due, self._order))
                    self._order += 1
        self.waiting = still
        return released

    def _note_done(self, controller: jobs.JobController) -> None:
        wanted = {d for dependent in self.waiting for d in dependent.waits_for} - self.done
        for template_id in sorted(wanted):
            records = [controller.jobs.get((NAMESPACE, n)) for n in self.job_names[template_id]]
            if all(r is not None and r.complete for r in records):
                self.done.add(template_id)
