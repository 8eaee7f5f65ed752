"""Reading the simulator's input: multi-document YAML files of ordinary Kubernetes objects.

Kinds the simulator models (by API group, so that Volcano's ``batch.volcano.sh``
Job is not mistaken for a ``batch/v1`` Job): Namespace, Node, Pod,
ResourceQuota, PersistentVolumeClaim, PersistentVolume, StorageClass
(``storage.k8s.io``: the simulated PV controller binds and provisions volumes,
``kbatch.sim.volume_controller``), CSINode (``storage.k8s.io``: how many volumes of
each CSI driver a node may attach, as the CSI node plugin registers them),
ResourceClaim, DeviceClass and ResourceSlice (``resource.k8s.io/v1``: the devices a
pod's claims may have, as a DRA driver publishes them; a claim made from a pod's
template is not made by the simulator: name claims directly), batch Job,
JobSet (``jobset.x-k8s.io``), PriorityClass, PodGroup, Queue, upstream's own PodGroup
(``scheduling.k8s.io/v1beta1`` or ``v1alpha3``, read as the kbatch PodGroup it is scheduled as:
``kbatch.cluster.upstream_groups``), Volcano's PodGroup and Queue
(``scheduling.volcano.sh/v1beta1``, read as kbatch's own: ``kbatch.cluster.volcano``;
the Volcano fields left out as harmless are counted in ``ignored``), and a ConfigMap
annotated ``kbatch.io/sim-scheduler-conf: "true"`` whose single data value is
the scheduler configuration. Other kinds are collected in ``skipped`` (the
caller names each once) and left out. A ``kind: List`` is read item by item.

A manifest of an object that an earlier one created, due later, updates it (the
simulator's ``kubectl apply``); two of one object due at the same time are an
error (``check_unique``).

A document that is not a Kubernetes object (not a mapping; no apiVersion, kind or
metadata.name) is a ManifestError naming the file and the document (numbered from 1,
as the ``---`` separators count them): the input cannot be read. An object of a bad
shape or with bad values is read as it is, and refused when it is due, as the API
server would refuse it (``kbatch.sim.validation``); a bad ``kbatch.io/sim-submit-at``
makes it due at 0, to be refused then.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kbatch.api import yaml_text
from kbatch.cluster import fields, upstream_groups, volcano
from kbatch.cluster.errors import ManifestError as ManifestError  # manifests.ManifestError
from kbatch.cluster.errors import ObjectError
from kbatch.sim import clock

SUBMIT_AT = "kbatch.io/sim-submit-at"
DURATION = "kbatch.io/sim-duration"
SCHEDULER_CONF = "kbatch.io/sim-scheduler-conf"
VCJOB_API_VERSION = "batch.volcano.sh/v1alpha1"  # Volcano's Job (``kbatch.sim.vcjobs``)

# Modelled kinds by API group ("" is the core group).
MODELLED: dict[str, frozenset[str]] = {
    "": frozenset(
        {"Namespace", "Node", "Pod", "ResourceQuota", "PersistentVolumeClaim", "PersistentVolume"}
    ),
    "storage.k8s.io": frozenset({"StorageClass", "CSINode"}),
    "resource.k8s.io": frozenset({"ResourceClaim", "DeviceClass", "ResourceSlice"}),
    "batch": frozenset({"Job"}),
    "jobset.x-k8s.io": frozenset({"JobSet"}),
    "batch.volcano.sh": frozenset({"Job"}),
    "scheduling.k8s.io": frozenset({"PriorityClass", "PodGroup"}),
    "scheduling.incubator.k8s.io": frozenset({"PodGroup", "Queue"}),
    volcano.API_GROUP: volcano.KINDS,
}
CLUSTER_SCOPED = frozenset(
    {"Namespace", "Node", "Queue", "PriorityClass", "PersistentVolume", "StorageClass", "CSINode"}
    | {"DeviceClass", "ResourceSlice"}
)
# Objects due at the same time are created in this order, as Helm installs a chart:
# what others name (a namespace, a priority class, a queue, a storage class, a volume, a
# claim) before what names it. A Job
# comes before its PodGroup: PodGroupMinResources fills the group from its Job's pods
# when the group is admitted, and a Job whose group is not admitted yet is held anyway.
CREATE_ORDER = (
    "Namespace",
    "PriorityClass",
    "Queue",
    "StorageClass",
    "Node",
    "CSINode",
    "DeviceClass",
    "ResourceSlice",
    "PersistentVolume",
    "ResourceQuota",
    "PersistentVolumeClaim",
    "ResourceClaim",
    "Job",
    "JobSet",
    "PodGroup",
    "Pod",
)

Object = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Manifest:
    """One object to create at ``submit_at`` (seconds); ``order`` is its place in the input."""

    obj: Object
    source: str
    submit_at: float
    order: int

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace", ""))

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])

    @property
    def due(self) -> tuple[float, int, int]:
        """When it is created: its time, then its kind's place in CREATE_ORDER, then input order."""
        return self.submit_at, CREATE_ORDER.index(self.kind), self.order

    @property
    def ref(self) -> str:
        """``"Pod default/x"`` or ``"Node n1"``: how messages name the object."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


@dataclass(slots=True)
class Manifests:
    objects: list[Manifest] = field(default_factory=list)
    # (conf text, where it came from), from an annotated ConfigMap.
    scheduler_conf: tuple[str, str] | None = None
    # Kinds left out, in order of first appearance, with how many objects of each.
    skipped: dict[str, int] = field(default_factory=dict)
    # Volcano fields left out as harmless ("Queue spec.type"), with how many objects had each.
    ignored: dict[str, int] = field(default_factory=dict)

    def extend(self, other: "Manifests") -> None:
        offset = len(self.objects)
        for item in other.objects:
            self.objects.append(
                Manifest(item.obj, item.source, item.submit_at, item.order + offset)
            )
        if other.scheduler_conf is not None:
            self._set_conf(*other.scheduler_conf)
        for kind, count in other.skipped.items():
            self.skipped[kind] = self.skipped.get(kind, 0) + count
        for what, count in other.ignored.items():
            self.ignored[what] = self.ignored.get(what, 0) + count

    def _set_conf(self, text: str, source: str) -> None:
        if self.scheduler_conf is not None:
            raise ManifestError(
                f"{source}: a second scheduler conf (the first is {self.scheduler_conf[1]})"
            )
        self.scheduler_conf = (text, source)


def check_unique(loaded: Manifests) -> None:
    """A later manifest of an object (a later ``sim-submit-at``) updates it, as ``kubectl
    apply`` would; two due at the same time are a ManifestError naming both, since one
    would silently undo the other."""
    first: dict[tuple[str, str, str, str, float], Manifest] = {}
    for item in loaded.objects:
        group = _group(str(item.obj["apiVersion"]))  # (a vcjob is a Job too, of its own)
        key = (group, item.kind, item.namespace, item.name, item.submit_at)
        seen = first.setdefault(key, item)
        if seen is not item:
            raise ManifestError(
                f"{item.source}: {item.ref} is already defined by {seen.source}, due at the "
                "same time (to update it, give the update a later kbatch.io/sim-submit-at)"
            )


def load_files(paths: Sequence[Path]) -> Manifests:
    """Read every file in order; a missing or unreadable file is a ManifestError."""
    result = Manifests()
    for path in paths:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        except UnicodeDecodeError as exc:
            raise ManifestError(f"{path}: not UTF-8 text: {exc.reason}") from exc
        result.extend(load_text(text, str(path)))
    return result


def load_text(text: str, source: str) -> Manifests:
    try:
        documents = yaml_text.safe_load_all(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ManifestError(f"{source}{line}: not valid YAML: {problem}") from exc
    return load_documents(documents, source)


def load_documents(documents: Iterable[object], source: str = "<documents>") -> Manifests:
    """Sort parsed documents into objects, the scheduler conf and skipped kinds."""
    result = Manifests()
    for number, document in enumerate(documents, start=1):
        if document is None:
            continue
        where = f"{source}, document {number}"
        if isinstance(document, dict) and document.get("kind") == "List":
            items = document.get("items")
            if not isinstance(items, list):
                raise ManifestError(f"{where}: a List needs a list of items")
            for index, item in enumerate(items):
                _add(result, item, f"{where}, item {index}")
        else:
            _add(result, document, where)
    return result


def _add(result: Manifests, document: object, where: str) -> None:
    obj = _checked_object(document, where)
    group = _group(obj["apiVersion"])
    kind = obj["kind"]
    if kind == "ConfigMap" and group == "" and _is_conf(obj):
        result._set_conf(*_conf_of(obj, where))
        return
    upstream = group == upstream_groups.API_GROUP and kind == "PodGroup"
    if kind not in MODELLED.get(group, frozenset()) or (
        (upstream and obj["apiVersion"] not in upstream_groups.API_VERSIONS)
        or (group == volcano.API_GROUP and not volcano.is_volcano(obj))
        or (group == "batch.volcano.sh" and obj["apiVersion"] != VCJOB_API_VERSION)
    ):
        label = f"{kind} ({obj['apiVersion']})"
        result.skipped[label] = result.skipped.get(label, 0) + 1
        return
    normalised = _normalised(obj)
    if upstream:
        normalised = _upstream_group(normalised)
    elif volcano.is_volcano(normalised):
        normalised = _volcano_object(normalised, result)
    submit_at = _submit_at(normalised)
    result.objects.append(Manifest(normalised, where, submit_at, len(result.objects)))


def _upstream_group(obj: Object) -> Object:
    """Upstream's PodGroup ``obj`` as the kbatch PodGroup it is scheduled as (its own
    annotations, the simulator's among them, kept); one that cannot be is kept as it is,
    to be refused when due naming its field (``kbatch.sim.validation``)."""
    try:
        made = upstream_groups.kbatch_object(obj)
    except ObjectError:
        return obj
    if "status" not in obj:
        del made["status"]
    return made


def _volcano_object(obj: Object, result: Manifests) -> Object:
    """Volcano's PodGroup or Queue ``obj`` as kbatch's own, the harmless fields it left
    out counted in ``result.ignored``; one that cannot be is kept as it is, to be refused
    when due naming its field (``kbatch.sim.validation``)."""
    try:
        made, ignored = volcano.kbatch_object(obj)
    except ObjectError:
        return obj
    for path in ignored:
        what = f"{obj['kind']} {path}"
        result.ignored[what] = result.ignored.get(what, 0) + 1
    return made


def _checked_object(document: object, where: str) -> Object:
    if not isinstance(document, dict):
        kind = type(document).__name__
        raise ManifestError(
            f"{where}: not a Kubernetes object (a {kind}; expected a mapping with "
            "apiVersion, kind and metadata.name)"
        )
    for key in ("apiVersion", "kind"):
        if not isinstance(document.get(key), str) or not document[key]:
            raise ManifestError(f"{where}: not a Kubernetes object: no {key}")
    metadata = document.get("metadata")
    if not isinstance(metadata, dict):
        raise ManifestError(f"{where}: not a Kubernetes object: no metadata")
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        raise ManifestError(f"{where}: {document['kind']} has no metadata.name")
    return document


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def _annotations(obj: Object) -> dict[str, Any]:
    """The object's annotations, {} when they are not a map (validation says why)."""
    annotations = obj["metadata"].get("annotations")
    return annotations if isinstance(annotations, dict) else {}


def _is_conf(obj: Object) -> bool:
    return str(_annotations(obj).get(SCHEDULER_CONF, "")).lower() == "true"


def _conf_of(obj: Object, where: str) -> tuple[str, str]:
    name = obj["metadata"]["name"]
    data = obj.get("data")
    if not isinstance(data, dict) or len(data) != 1:
        raise ManifestError(
            f"{where}: ConfigMap {name}: a scheduler conf ConfigMap needs exactly one data value"
        )
    ((key, text),) = data.items()
    if not isinstance(text, str):
        raise ManifestError(f"{where}: ConfigMap {name}: data.{key} must be a string")
    return text, f"{where} (ConfigMap {name}, data.{key})"


def _normalised(obj: Object) -> Object:
    """A private copy; namespaced kinds get ``default`` if they name none, others lose theirs."""
    result = fields.copied(obj)
    metadata = result["metadata"]
    if result["kind"] in CLUSTER_SCOPED:
        metadata.pop("namespace", None)
    elif not metadata.get("namespace"):
        metadata["namespace"] = "default"
    if metadata.get("annotations") is None:
        metadata.pop("annotations", None)
    return result


def ref_of(obj: Object) -> str:
    metadata = obj["metadata"]
    namespace = metadata.get("namespace")
    return f"{obj['kind']} {f'{namespace}/' if namespace else ''}{metadata['name']}"


def annotation_duration(obj: Object, key: str, where: str) -> float | None:
    """The duration in annotation ``key`` of ``obj``, None if absent; DurationError if bad."""
    annotations = obj["metadata"].get("annotations") or {}
    if key not in annotations:
        return None
    text = annotations[key]
    known = clock.known_duration(text)  # (most are: the message below is made only if not)
    if known is not None:
        return known
    return clock.parse_duration(text, f"{where}: {ref_of(obj)}: annotation {key}")


def _submit_at(obj: Object) -> float:
    """Its ``kbatch.io/sim-submit-at`` in seconds; 0 when absent or unreadable (it is
    then refused at 0, naming the annotation)."""
    try:
        return clock.parse_duration(_annotations(obj)[SUBMIT_AT], SUBMIT_AT)
    except (KeyError, clock.DurationError):
        return 0.0


def template_annotations(job: Object) -> dict[str, str]:
    """The annotations of a Job's pod template ({} when it has none); FieldError if misshapen."""
    return fields.string_map(job, "spec.template.metadata.annotations")
