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
evicted pod, as Armada resubmits a preempted job. Runtimes are Armada's shifted
exponential, ``minimum`` + Exp(mean ``tailMean``) — just ``minimum`` for gangs, whose
jobs Armada ends together — drawn from ``random.Random(randomSeed)`` in input order
(absent seed: 0, so a run repeats), as ``kbatch.io/sim-duration``;
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
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from math import gcd, lcm
from pathlib import Path
from typing import Any

import yaml

from kbatch.api import API_VERSION, GROUP_NAME_ANNOTATION, LIFETIME_ANNOTATION
from kbatch.api.errors import shown
from kbatch.cluster.quantity import amount
from kbatch.sim import clock, jobs, manifests

NAMESPACE = "armada"
CLUSTER_LABEL = "armadaproject.io/clusterName"
POOL_LABEL = "armadaproject.io/pool"
QUEUE_ANNOTATION = "kbatch.io/armada-queue"
TEMPLATE_LABEL = "kbatch.io/armada-template"
JOB_SET_LABEL = "kbatch.io/armada-job-set"
TOPOLOGY_REQUIRED = "kbatch.io/topology-required"
PREEMPTIBLE, DEFAULT_CLASS = "armada-preemptible", "armada-default"
ARMADA_PRIORITY = 30000
DEFAULT_PODS = "10000"

Object = dict[str, Any]


def _keys(*names: str) -> dict[str, str]:
    """Known field names by their lowercase (Armada's decoder matches them so)."""
    return {name.lower(): name for name in names}


WORKLOAD_KEYS = _keys("name", "randomSeed", "queues")
QUEUE_KEYS = _keys("name", "weight", "jobTemplates")
TEMPLATE_KEYS = _keys(
    *["id", "number", "priorityClassName", "requirements", "runtimeDistribution"],
    *["earliestSubmitTime", "earliestSubmitTimeFromDependencyCompletion", "gangCardinality"],
    *["gangNodeUniformityLabel", "dependencies", "repeat", "jobSet", "queuePriority"],
)
REQUIREMENT_KEYS = _keys(
    "resourceRequirements", "nodeSelector", "tolerations", "affinity", "annotations"
)
CLUSTER_SPEC_KEYS = _keys(
    "name", "clusters", "workflowManagerDelayDistribution", "pendingDelayDistribution"
)
# Armada's fields that kbatch reads past (named in the warning, as unknown ones are).
NOT_MODELLED = ("queuePriority", "workflowManagerDelayDistribution", "pendingDelayDistribution")


class Reader:
    """One file's fields, type-checked with their paths; what it ignores, collected."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.ignored: list[str] = []

    def error(self, path: str, why: str) -> manifests.ManifestError:
        return manifests.ManifestError(f"{self.source}: {path}: {why}")

    def fields(self, value: object, path: str, known: Mapping[str, str] | None) -> dict[str, Any]:
        """A map's known fields by kbatch's spelling (``known`` None: every key)."""
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(path or "(the document)", f"expected a map, not {shown(value)}")
        out = {}
        for key, item in value.items():
            name = str(key) if known is None else known.get(str(key).lower())
            if name is None or name in NOT_MODELLED:
                self.ignored.append(f"{path}.{key}" if path else str(key))
            elif item is not None:
                out[name] = item
        return out

    def items(self, value: object, path: str) -> list[Any]:
        if value is not None and not isinstance(value, list):
            raise self.error(path, f"expected a list, not {shown(value)}")
        return value or []

    def integer(self, value: object, path: str, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise self.error(path, f"expected an integer >= {minimum}, not {shown(value)}")
        return value

    def string(self, value: object, path: str) -> str:
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.error(path, f"expected a string, not {shown(value)}")
        return str(value)

    def duration(self, value: object, path: str) -> float:
        try:
            return 0.0 if value is None else clock.parse_duration(value, f"{self.source}: {path}")
        except clock.DurationError as exc:
            raise manifests.ManifestError(str(exc)) from exc

    def quantities(self, value: object, path: str) -> dict[str, str]:
        out = {}
        for name, quantity in self.fields(value, path, None).items():
            try:
                amount(name, quantity)
            except ValueError as exc:
                raise self.error(f"{path}.{name}", str(exc)) from exc
            out[name] = str(quantity)
        return out

    def string_map(self, value: object, path: str) -> dict[str, str]:
        found = self.fields(value, path, None)
        return {k: self.string(v, f"{path}.{k}") for k, v in found.items()}

    def warning(self) -> str | None:
        if not self.ignored:
            return None
        return f"{self.source}: ignoring fields kbatch does not read: {', '.join(self.ignored)}"


@dataclass(frozen=True, slots=True)
class Template:
    id: str
    queue: str  # the kbatch Queue's name
    number: int
    priority_class: str
    pod_spec: Object  # the pod's requirements (containers, nodeSelector, ...)
    annotations: dict[str, str]
    minimum: float
    tail_mean: float
    earliest: float
    after_dependencies: float
    cardinality: int  # 0: no gang
    uniformity_label: str | None
    job_set: str
    dependencies: tuple[str, ...]
    repeat: tuple[int, float] | None  # (numTimes, period)


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


def read_yaml(path: Path) -> object:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise manifests.ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise manifests.ManifestError(f"{path}: not UTF-8 text: {exc.reason}") from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise manifests.ManifestError(f"{path}{line}: not valid YAML: {problem}") from exc


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
    queues = [_queue(reader, raw, f"queues[{q}]") for q, raw in enumerate(raw_queues)]
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
    _check_templates(reader, templates)
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


@dataclass(frozen=True, slots=True)
class _Queue:
    name: str
    original: str
    weight: float
    templates: list[Template]


def _queue(reader: Reader, raw: object, at: str) -> _Queue:
    queue = reader.fields(raw, at, QUEUE_KEYS)
    original = reader.string(queue.get("name", ""), f"{at}.name")
    if not slug(original):
        raise reader.error(f"{at}.name", "a queue needs a name")
    weight = queue.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
        raise reader.error(f"{at}.weight", f"expected a number > 0, not {shown(weight)}")
    raw_templates = reader.items(queue.get("jobTemplates"), f"{at}.jobTemplates")
    templates = [
        _template(reader, t, f"{at}.jobTemplates[{i}]", original, slug(original), i)
        for i, t in enumerate(raw_templates)
    ]
    return _Queue(slug(original), original, float(weight), templates)


def _template(
    reader: Reader, raw: object, at: str, original: str, queue: str, index: int
) -> Template:
    spec = reader.fields(raw, at, TEMPLATE_KEYS)
    number = reader.integer(spec.get("number", 0), f"{at}.number")
    cardinality = reader.integer(spec.get("gangCardinality", 0), f"{at}.gangCardinality")
    if cardinality and number % cardinality:
        why = f"number {number} is not a multiple of gangCardinality {cardinality}"
        raise reader.error(f"{at}.gangCardinality", why)
    distribution = f"{at}.runtimeDistribution"
    runtime = reader.fields(
        spec.get("runtimeDistribution"), distribution, {"minimum": "min", "tailmean": "tail"}
    )
    dependencies = reader.items(spec.get("dependencies"), f"{at}.dependencies")
    label = spec.get("gangNodeUniformityLabel")
    pod_spec, annotations = _requirements(reader, spec.get("requirements"), f"{at}.requirements")
    after = "earliestSubmitTimeFromDependencyCompletion"
    return Template(
        id=reader.string(spec.get("id") or f"{original}-{index}", f"{at}.id"),
        queue=queue,
        number=number,
        priority_class=reader.string(
            spec.get("priorityClassName") or DEFAULT_CLASS, f"{at}.priorityClassName"
        ),
        pod_spec=pod_spec,
        annotations=annotations,
        minimum=reader.duration(runtime.get("min"), f"{distribution}.minimum"),
        tail_mean=reader.duration(runtime.get("tail"), f"{distribution}.tailMean"),
        earliest=reader.duration(spec.get("earliestSubmitTime"), f"{at}.earliestSubmitTime"),
        after_dependencies=reader.duration(spec.get(after), f"{at}.{after}"),
        cardinality=cardinality,
        uniformity_label=None
        if label is None
        else reader.string(label, f"{at}.gangNodeUniformityLabel"),
        job_set=reader.string(spec.get("jobSet", ""), f"{at}.jobSet"),
        dependencies=tuple(
            reader.string(d, f"{at}.dependencies[{i}]") for i, d in enumerate(dependencies)
        ),
        repeat=_repeat(reader, spec.get("repeat"), f"{at}.repeat"),
    )


def _repeat(reader: Reader, raw: object, at: str) -> tuple[int, float] | None:
    if raw is None:
        return None
    repeat = reader.fields(raw, at, {"numtimes": "numTimes", "period": "period"})
    if "period" not in repeat:
        raise reader.error(f"{at}.period", "required (the time between submissions)")
    times = reader.integer(repeat.get("numTimes", 0), f"{at}.numTimes", minimum=1)
    return times, reader.duration(repeat["period"], f"{at}.period")


def _requirements(reader: Reader, raw: object, at: str) -> tuple[Object, dict[str, str]]:
    """The pod spec's share of Armada's PodRequirements, and the pods' annotations."""
    requirements = reader.fields(raw, at, REQUIREMENT_KEYS)
    where = f"{at}.resourceRequirements"
    resources = reader.fields(
        requirements.get("resourceRequirements"),
        where,
        {"requests": "requests", "limits": "limits"},
    )
    container: Object = {"name": "main", "image": "armada-job"}
    container["resources"] = {
        kind: reader.quantities(values, f"{where}.{kind}") for kind, values in resources.items()
    }
    spec: Object = {"containers": [container]}
    if "nodeSelector" in requirements:
        spec["nodeSelector"] = reader.string_map(requirements["nodeSelector"], f"{at}.nodeSelector")
    if "tolerations" in requirements:
        spec["tolerations"] = reader.items(requirements["tolerations"], f"{at}.tolerations")
    if "affinity" in requirements:
        spec["affinity"] = reader.fields(requirements["affinity"], f"{at}.affinity", None)
    annotations = reader.string_map(requirements.get("annotations"), f"{at}.annotations")
    return spec, annotations


def expand_repeats(templates: list[Template]) -> list[Template]:
    """A repeated template as Armada expands it: ``<id>-repeat-<i>``, ``i`` periods later;
    a dependency on a repeated template waits for all its repeats."""
    out: list[Template] = []
    repeated: dict[str, list[str]] = {}
    for t in templates:
        if t.repeat is None:
            out.append(t)
            continue
        times, period = t.repeat
        ids = repeated[t.id] = [f"{t.id}-repeat-{i}" for i in range(times)]
        for i, new_id in enumerate(ids):
            earliest = t.earliest + i * period
            out.append(replace(t, id=new_id, earliest=earliest, repeat=None))
    return [
        replace(
            t, dependencies=tuple(d for dep in t.dependencies for d in repeated.get(dep, [dep]))
        )
        for t in out
    ]


def _check_templates(reader: Reader, templates: list[Template]) -> None:
    """Ids unique (as names, too), dependencies named and acyclic."""
    by_id = {t.id: t for t in templates}
    names: dict[str, str] = {}
    for t in templates:
        seen = names.setdefault(slug(t.id), t.id)
        if seen != t.id:
            raise reader.error("queues", f"job template ids {seen!r} and {t.id!r} clash")
        for dependency in t.dependencies:
            if dependency not in by_id:
                why = f"no job template has id {dependency!r}"
                raise reader.error(f"job template {t.id!r}: dependencies", why)
    if len(by_id) != len(templates):
        raise reader.error("queues", "two job templates share an id")
    done: set[str] = set()

    def visit(template_id: str, path: tuple[str, ...]) -> None:
        if template_id in path:
            cycle = " -> ".join((*path, template_id))
            raise reader.error("dependencies", f"a cycle: {cycle}")
        if template_id not in done:
            for dependency in by_id[template_id].dependencies:
                visit(dependency, (*path, template_id))
            done.add(template_id)

    for t in templates:
        visit(t.id, ())


def integer_weights(weights: list[float]) -> list[int]:
    """Armada's float weights as the smallest integers of (nearly) the same ratios."""
    fractions = [Fraction(w).limit_denominator(1000) for w in weights]
    scale = lcm(*(f.denominator for f in fractions)) if fractions else 1
    scaled = [max(1, int(f * scale)) for f in fractions]
    common = gcd(*scaled) if scaled else 1
    return [w // common for w in scaled]


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


# --------------------------------------------------------------------------- helpers
def slug(text: str) -> str:
    """A Kubernetes name of ``text``: lowercase, [a-z0-9-], no leading or trailing '-'."""
    return re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
