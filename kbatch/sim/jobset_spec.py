"""What the simulated JobSet controller reads of a JobSet (``jobset.x-k8s.io/v1alpha2``):
its spec (``jobset_spec``, refused naming the field where JobSet's CRD schema or its
webhook would refuse it) and the Jobs it makes (``child_job``).

A JobSet's Jobs are named ``<jobset>-<replicatedJob>-<index>``; each is its replicated
Job's template with the JobSet's labels and annotations (``jobset.sigs.k8s.io/...``:
the JobSet's name and uid, the replicated Job's name and replicas, the Job's index and
global index, the restart attempt, its SHA-1 job key, its group's) on the Job and on
its pod template, an owner
reference to the JobSet, and ``spec.suspend`` the JobSet's.

Read: ``replicatedJobs`` (``name``, ``replicas``, ``template``), ``suspend``,
``successPolicy`` (``operator`` All or Any, ``targetReplicatedJobs``),
``failurePolicy`` (``maxRestarts``, and ``rules``: ``action`` FailJobSet, RestartJobSet
or RestartJobSetAndIgnoreMaxRestarts, ``onJobFailureReasons``,
``targetReplicatedJobs``), ``startupPolicy.startupPolicyOrder`` (AnyOrder or InOrder),
each replicated Job's ``dependsOn`` (another before it, ``Ready`` or ``Complete``), and
``managedBy``. What does not change when pods run (network, coordinator, TTL after
finished, volume claims) is left out. The per-Job restart actions (feature-gated
in JobSet) and rules on failure messages are refused as not simulated, naming the
field: a simulation that ignored them would tell a different story than the cluster.
"""

import hashlib
from dataclasses import dataclass
from typing import Any

from kbatch.cluster import fields
from kbatch.cluster.errors import ObjectError
from kbatch.sim import manifests

Object = dict[str, Any]

API_VERSION = "jobset.x-k8s.io/v1alpha2"
CONTROLLER = "jobset.sigs.k8s.io/jobset-controller"  # spec.managedBy's default
PREFIX = "jobset.sigs.k8s.io/"
SUCCESS_OPERATORS = ("All", "Any")
FAIL, RESTART = "FailJobSet", "RestartJobSet"
RESTART_UNCOUNTED = "RestartJobSetAndIgnoreMaxRestarts"
ACTIONS = (FAIL, RESTART, RESTART_UNCOUNTED)
STARTUP_ORDERS = ("AnyOrder", "InOrder")
DEPENDENCIES = ("Ready", "Complete")


@dataclass(frozen=True, slots=True)
class ReplicatedJob:
    name: str
    replicas: int
    template: Object  # the Job template: metadata and spec
    group: str = "default"  # groupName
    # dependsOn: (replicated Job, Ready or Complete) each, reached before its Jobs come
    depends: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class FailureRule:
    action: str
    reasons: tuple[str, ...] = ()  # onJobFailureReasons (none: any)
    targets: tuple[str, ...] = ()  # targetReplicatedJobs (none: all)
    name: str = ""

    def matches(self, replicated: str, reason: str) -> bool:
        return (not self.reasons or reason in self.reasons) and (
            not self.targets or replicated in self.targets
        )


@dataclass(frozen=True, slots=True)
class JobSetSpec:
    replicated: tuple[ReplicatedJob, ...]
    suspend: bool = False
    any_succeeds: bool = False  # successPolicy.operator Any
    success_targets: tuple[str, ...] = ()  # successPolicy.targetReplicatedJobs (none: all)
    has_failure_policy: bool = False  # without one, the first failed Job fails the JobSet
    max_restarts: int = 0
    rules: tuple[FailureRule, ...] = ()
    in_order: bool = False  # startupPolicy InOrder
    managed: bool = True  # managedBy is JobSet's own controller

    def to_succeed(self) -> int:
        """How many of the targeted Jobs must complete for the JobSet to."""
        if self.any_succeeds:
            return 1
        targets = self.success_targets
        return sum(r.replicas for r in self.replicated if not targets or r.name in targets)


def jobset_spec(jobset: Object) -> JobSetSpec:
    """What the controller reads of ``jobset``, or ObjectError naming the field."""
    ref = manifests.ref_of(jobset)
    try:
        return _read(jobset)
    except fields.FieldError as exc:
        raise ObjectError(ref, exc.field, exc.why) from exc


def _read(jobset: Object) -> JobSetSpec:
    entries = fields.mappings(jobset, "spec.replicatedJobs")
    if not entries:
        raise fields.FieldError("spec.replicatedJobs", "required: at least one replicated Job")
    replicated: list[ReplicatedJob] = []
    names: set[str] = set()
    for i, entry in enumerate(entries):
        replicated.append(_replicated(entry, f"spec.replicatedJobs[{i}]", names))
    suspend = fields.value(jobset, "spec.suspend")
    if not isinstance(suspend, bool | None):
        raise fields.FieldError("spec.suspend", f"expected true or false, not {suspend!r}")
    operator = fields.string(jobset, "spec.successPolicy.operator") or "All"
    _one_of("spec.successPolicy.operator", operator, SUCCESS_OPERATORS)
    success_targets = _names(jobset, "spec.successPolicy.targetReplicatedJobs", names)
    policy = fields.value(jobset, "spec.failurePolicy")
    max_restarts = fields.integer(jobset, "spec.failurePolicy.maxRestarts") or 0
    if max_restarts < 0:
        raise fields.FieldError("spec.failurePolicy.maxRestarts", "must be >= 0")
    rules = tuple(
        _rule(rule, f"spec.failurePolicy.rules[{i}]", names)
        for i, rule in enumerate(fields.mappings(jobset, "spec.failurePolicy.rules"))
    )
    order = fields.string(jobset, "spec.startupPolicy.startupPolicyOrder") or "AnyOrder"
    _one_of("spec.startupPolicy.startupPolicyOrder", order, STARTUP_ORDERS)
    if order == "InOrder" and any(r.depends for r in replicated):
        why = "InOrder and a replicated Job's dependsOn exclude each other"
        raise fields.FieldError("spec.startupPolicy.startupPolicyOrder", why)
    managed_by = fields.string(jobset, "spec.managedBy") or CONTROLLER
    return JobSetSpec(
        tuple(replicated), bool(suspend), operator == "Any", success_targets,
        policy is not None, max_restarts, rules, order == "InOrder", managed_by == CONTROLLER,
    )  # fmt: skip


def _replicated(entry: Any, at: str, names: set[str]) -> ReplicatedJob:
    name = fields.string(entry, "name", at=at)
    if not name:
        raise fields.FieldError(f"{at}.name", "required")
    if name in names:
        raise fields.FieldError(f"{at}.name", f"{name!r} names another replicated Job too")
    depends = _depends(entry, at, names)
    names.add(name)
    replicas = fields.integer(entry, "replicas", at=at)
    if replicas is not None and replicas < 0:
        raise fields.FieldError(f"{at}.replicas", f"must be >= 0, not {replicas}")
    template = fields.mapping(entry, "template", at=at)
    if not isinstance(fields.value(template, "spec.template.spec"), dict):
        raise fields.FieldError(f"{at}.template.spec.template.spec", "a Job needs a pod template")
    group = fields.string(entry, "groupName", at=at) or "default"
    replicas = 1 if replicas is None else replicas
    return ReplicatedJob(name, replicas, dict(template), group, depends)


def _depends(entry: Any, at: str, before: set[str]) -> tuple[tuple[str, str], ...]:
    """Its ``dependsOn``: replicated Jobs before it, each Ready or Complete."""
    found = []
    for i, item in enumerate(fields.mappings(entry, "dependsOn", at=at)):
        where = f"{at}.dependsOn[{i}]"
        if not before:
            raise fields.FieldError(where, "the first replicated Job depends on none")
        name = fields.string(item, "name", at=where) or ""
        if name not in before:
            raise fields.FieldError(f"{where}.name", f"no replicated Job before it is {name!r}")
        status = fields.string(item, "status", at=where) or ""
        _one_of(f"{where}.status", status, DEPENDENCIES)
        found.append((name, status))
    return tuple(found)


def _rule(rule: Any, at: str, names: set[str]) -> FailureRule:
    action = fields.string(rule, "action", at=at) or ""
    if action in ("RestartJob", "RestartJobAndIgnoreMaxRestarts"):
        raise fields.FieldError(f"{at}.action", f"{action}: not simulated (a feature gate)")
    _one_of(f"{at}.action", action, ACTIONS)
    reasons = fields.sequence(rule, "onJobFailureReasons", at=at)
    if fields.value(rule, "onJobFailureMessagePatterns", at=at) is not None:
        why = "not simulated: a simulated Job's failure messages are kbatch's own"
        raise fields.FieldError(f"{at}.onJobFailureMessagePatterns", why)
    targets = _names(rule, "targetReplicatedJobs", names, at)
    name = fields.string(rule, "name", at=at) or ""
    return FailureRule(action, tuple(str(r) for r in reasons), targets, name)


def _names(obj: Any, path: str, known: set[str], at: str = "") -> tuple[str, ...]:
    """A list of replicated Jobs' names, each one of the JobSet's."""
    found = fields.sequence(obj, path, at=at)
    for i, name in enumerate(found):
        if name not in known:
            where = f"{at}.{path}" if at else path
            raise fields.FieldError(f"{where}[{i}]", f"no replicated Job is named {name!r}")
    return tuple(str(name) for name in found)


def _one_of(path: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise fields.FieldError(path, f"must be {' or '.join(allowed)}, not {value!r}")


# ----------------------------------------------------------------------------- its Jobs
def job_name(jobset: Object, replicated: str, index: int) -> str:
    return f"{jobset['metadata']['name']}-{replicated}-{index}"


def child_job(jobset: Object, spec: JobSetSpec, which: int, index: int, restarts: int) -> Object:
    """The ``index``-th Job of the ``which``-th replicated Job, at restart ``restarts``."""
    replicated = spec.replicated[which]
    meta = jobset["metadata"]
    namespace = meta.get("namespace") or "default"
    name = job_name(jobset, replicated.name, index)
    template = fields.copied(replicated.template)
    before = spec.replicated[:which]
    same_group = [r for r in spec.replicated if r.group == replicated.group]
    marks = {
        "jobset-name": meta["name"],
        "jobset-uid": meta.get("uid", ""),
        "replicatedjob-name": replicated.name,
        "restart-attempt": str(restarts),
        "replicatedjob-replicas": str(replicated.replicas),
        "global-replicas": str(sum(r.replicas for r in spec.replicated)),
        "job-index": str(index),
        "job-key": hashlib.sha1(f"{namespace}/{name}".encode(), usedforsecurity=False).hexdigest(),
        "job-global-index": str(sum(r.replicas for r in before) + index),
        "group-name": replicated.group,
        "group-replicas": str(sum(r.replicas for r in same_group)),
        "job-group-index": str(
            sum(r.replicas for r in before if r.group == replicated.group) + index
        ),
    }
    marks = {PREFIX + key: value for key, value in marks.items()}
    pod_template = template["spec"]["template"]
    pod_template["metadata"] = _marked(pod_template.get("metadata") or {}, marks)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            **_marked(template.get("metadata") or {}, marks),
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": API_VERSION,
                    "kind": "JobSet",
                    "name": meta["name"],
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {**template["spec"], "suspend": spec.suspend},
    }


def _marked(meta: Object, marks: dict[str, str]) -> Object:
    labels = {**(meta.get("labels") or {}), **marks}
    annotations = {**(meta.get("annotations") or {}), **marks}
    return {**meta, "labels": labels, "annotations": annotations}
