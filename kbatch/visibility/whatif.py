"""What if these were submitted now: ``kbatch simulate --from-cluster FILE...``.

The files' objects are added to what was read of the live cluster, as if created now
(a second apart, in the files' order), and the same forward simulation as the ETA's
(``kbatch.visibility.eta``) answers for each group they make (a PodGroup, or a pod of
its own): whether the first session admits it and what it is told, on which nodes its
pods start, and when, with the ETA's confidence. Nothing is written anywhere: objects
in, answers out.

The files may hold Pods, PodGroups, Queues, Nodes, PriorityClasses, ResourceQuotas,
PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes (a Node or a Queue asks
"what if the cluster had it"), batch/v1 Jobs and JobSets,
admitted as kbatch's webhooks admit them: the PodGroup made for a labelled Job or
JobSet, the Job held for its group or its pods made (``kbatch.visibility.whatif_jobs``).
"""

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kbatch.api import DEFAULT_SCHEDULER_NAMES
from kbatch.api.podgroup import PodGroupPhase
from kbatch.config import ETA_BUDGET_SECONDS, SchedulerConf
from kbatch.sim import clock
from kbatch.visibility import eta, standing, whatif_jobs

Object = dict[str, Any]
KINDS = (
    "Node", "PriorityClass", "Queue", "ResourceQuota", "PodGroup", "Pod", "Job", "JobSet",
    "StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CSINode",
)  # fmt: skip
NAMESPACED = ("ResourceQuota", "PodGroup", "Pod", "Job", "JobSet", "PersistentVolumeClaim")
ADMITTED_KINDS = ("Job", "JobSet")  # through ``whatif_jobs``
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
ADMITTED = (PodGroupPhase.INQUEUE, PodGroupPhase.RUNNING, PodGroupPhase.COMPLETED)


class WhatIfError(ValueError):
    """A file's object that cannot be added: the message names it and the field."""


@dataclass(frozen=True)
class Answer:
    """What would become of one group of the files' objects."""

    kind: str  # PodGroup | Pod (a pod of its own) | Job (a suspended Job of no group)
    namespace: str
    name: str
    queue: str
    admitted: bool  # by the first session (a pod of its own: it would be bound)
    phase: str  # after the first session
    reason: str  # what it is told, in words ('' when it starts at once)
    nodes: list[str]  # where its pods start ([] when it does not start)
    estimate: eta.Estimate

    def to_json(self, now: float) -> dict[str, Any]:
        data: dict[str, Any] = {
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "queue": self.queue,
            "admitted": self.admitted,
            "phase": self.phase,
            "reason": self.reason,
            "nodes": self.nodes,
            "eta": self.estimate.to_json(),
        }
        if self.estimate.seconds is not None:
            data["eta"]["startsAt"] = clock.timestamp(now + self.estimate.seconds, kept=False)
        return data


def added(
    objects: standing.ClusterObjects,
    documents: Iterable[tuple[str, Any]],
    scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES),
) -> tuple[standing.ClusterObjects, list[str], dict[str, str]]:
    """``objects`` with the ``documents`` (source, object) added as created now, the
    uids of the groups they make, in the files' order, and why a labelled Job's group
    would not be made (by uid); WhatIfError for one that cannot be added (a kind kbatch
    does not read here, no name, a name taken, a Job refused)."""
    read = objects.by_kind()
    existing = {(kind, _key(obj)) for kind, items in read.items() for obj in items}
    by_kind: dict[str, list[Object]] = {kind: list(items) for kind, items in read.items()}
    groups: list[str] = []
    listed = list(documents)
    admission = None
    if any(isinstance(doc, Mapping) and doc.get("kind") in ADMITTED_KINDS for _, doc in listed):
        admission = whatif_jobs.JobAdmission(read, scheduler_names)
    for i, (source, document) in enumerate(listed):
        # created a second apart, in the files' order, the last now: ties of creation
        # time fall by name, and the first given should go first
        obj = _new_object(source, document, objects.now - (len(listed) - 1 - i))
        made: list[Object] = [obj]
        made_groups: Sequence[str | None] = [_group_of(obj)]
        if admission is not None and obj["kind"] in ADMITTED_KINDS:
            admit = admission.admit if obj["kind"] == "Job" else admission.admit_jobset
            try:
                made, made_groups = admit(obj, i)
            except whatif_jobs.JobRefused as exc:
                raise WhatIfError(f"{source}: {obj['kind']} {_key(obj)}: {exc}") from None
        elif admission is not None:
            admission.given(obj)
        for new in made:
            kind, key = new["kind"], _key(new)
            if (kind, key) in existing:
                raise WhatIfError(f"{source}: {kind} {key}: metadata.name: in the cluster already")
            existing.add((kind, key))
            by_kind[kind].append(new)
        groups += [g for g in made_groups if g is not None and g not in groups]
    merged = standing.ClusterObjects(
        objects.now,
        nodes=by_kind["Node"],
        pods=by_kind["Pod"],
        pod_groups=by_kind["PodGroup"],
        queues=by_kind["Queue"],
        priority_classes=by_kind["PriorityClass"],
        quotas=by_kind["ResourceQuota"],
        jobs=by_kind["Job"],  # (those the files add are held for their groups)
        claims=by_kind["PersistentVolumeClaim"],
        volumes=by_kind["PersistentVolume"],
        storage_classes=by_kind["StorageClass"],
        csi_nodes=by_kind["CSINode"],
    )
    return merged, groups, admission.unmade if admission is not None else {}


def _new_object(source: str, document: Any, now: float) -> Object:
    if not isinstance(document, Mapping):
        raise WhatIfError(f"{source}: expected an object, not {type(document).__name__}")
    kind = document.get("kind")
    meta = document.get("metadata")
    if not isinstance(meta, Mapping):
        meta = {}
    name = meta.get("name")
    where = f"{source}: {kind} {name or '?'}"
    if kind not in KINDS:
        raise WhatIfError(f"{where}: kind: expected one of {', '.join(KINDS)}")
    if not isinstance(name, str) or not name:
        raise WhatIfError(f"{where}: metadata.name: required")
    new_meta = {**meta, "creationTimestamp": clock.timestamp(now, kept=False)}
    if kind in NAMESPACED:
        new_meta["namespace"] = meta.get("namespace") or "default"
    dropped = ("metadata",) if kind == "Node" else ("metadata", "status")  # a Node's is its size
    obj = {k: v for k, v in document.items() if k not in dropped}
    obj["metadata"] = new_meta
    return obj


def _group_of(obj: Mapping[str, Any]) -> str | None:
    """The uid of the group ``obj`` makes or joins (as a session names jobs)."""
    meta = obj["metadata"]
    if obj["kind"] == "PodGroup":
        return f"{meta['namespace']}/{meta['name']}"
    if obj["kind"] != "Pod":
        return None
    group = (meta.get("annotations") or {}).get(GROUP_ANNOTATION)
    return f"{meta['namespace']}/{group}" if group else f"pod:{meta['namespace']}/{meta['name']}"


def answer(
    objects: standing.ClusterObjects,
    documents: Iterable[tuple[str, Any]],
    conf: SchedulerConf,
    *,
    period: float = 1.0,
    budget: float = ETA_BUDGET_SECONDS,
    scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES),
) -> tuple[list[Answer], list[str]]:
    """Each group of ``documents`` added to ``objects``: what would become of it; and
    the lines to warn with (objects kbatch refuses)."""
    merged, groups, unmade = added(objects, documents, scheduler_names)
    session, warnings = standing.open_session(merged, conf, scheduler_names)
    targets = [uid for uid in groups if uid in session.jobs]
    forecast = eta.forecast(
        session, merged, conf, targets, period=period, budget=budget,
        scheduler_names=scheduler_names,
    )  # fmt: skip
    answers = []
    for uid in groups:
        kind = {"pod": "Pod", "job": "Job"}.get(uid.partition(":")[0], "PodGroup")
        namespace, name = uid.split(":")[-1].split("/", 1)
        job = session.jobs.get(uid)
        if job is None or uid in unmade:  # (a group made for a suspended owner: no pods)
            answers.append(_unseen(kind, namespace, name, unmade.get(uid)))
            continue
        estimate = forecast.estimates[uid]
        phase, told = forecast.first.get(uid, ("Pending", ""))
        started = estimate.seconds == 0
        admitted = started or (kind == "PodGroup" and PodGroupPhase(phase) in ADMITTED)
        reason = "" if started else (told or standing.reason_of(session, job))
        nodes = forecast.nodes.get(uid, [])
        answers.append(
            Answer(kind, namespace, name, job.queue, admitted, phase, reason, nodes, estimate)
        )
    return answers, warnings


def _unseen(kind: str, namespace: str, name: str, unmade: str | None) -> Answer:
    """The answer for a group the session does not hold: ``unmade``, why a labelled
    Job's group would not be made (the Job would wait, suspended)."""
    if unmade is not None:
        never = eta.Estimate(None, "never", "never while it waits so (see why)", "none")
        return Answer(kind, namespace, name, "", False, "-", unmade, [], never)
    unseen = eta.Estimate(None, "never", "kbatch does not schedule it", "none")
    why = "kbatch does not schedule it (a PodGroup without pods, or pods another "
    why += "scheduler serves, or refused: see the warnings)"
    return Answer(kind, namespace, name, "", False, "-", why, [], unseen)


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def documents_of(texts: Sequence[tuple[str, str]]) -> list[tuple[str, Any]]:
    """The YAML documents of each (source, text), as (source, document); empty ones
    left out. A file that is not YAML raises WhatIfError naming it."""
    import yaml

    found = []
    for source, text in texts:
        try:
            loaded = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            raise WhatIfError(f"{source}: not YAML: {exc}") from exc
        for document in loaded:
            if document is None:
                continue
            if isinstance(document, Mapping) and document.get("kind") == "List":
                found += [(source, item) for item in document.get("items") or []]
            else:
                found.append((source, document))
    return found
