"""An Armada WorkloadSpec's queues and job templates, read and checked: ids unique,
dependencies named and acyclic, ``repeat`` expanded as Armada expands it, float queue
weights as integers of the same ratios.
"""

from dataclasses import dataclass, replace
from fractions import Fraction
from math import gcd, lcm

from kbatch.api.errors import shown
from kbatch.sim.armada_spec import (
    DEFAULT_CLASS,
    QUEUE_KEYS,
    REQUIREMENT_KEYS,
    TEMPLATE_KEYS,
    Object,
    Reader,
    slug,
)


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


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    original: str
    weight: float
    templates: list[Template]


def read_queue(reader: Reader, raw: object, at: str) -> QueueSpec:
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
    return QueueSpec(slug(original), original, float(weight), templates)


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


def check_templates(reader: Reader, templates: list[Template]) -> None:
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
