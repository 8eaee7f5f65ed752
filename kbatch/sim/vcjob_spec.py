"""What the simulated Volcano Job controller reads of a vcjob (``batch.volcano.sh/v1alpha1``
Job) and what it makes of one, as Volcano v1.15.1's controller and admission webhooks do.

Read (``vcjob_spec``), with the defaults Volcano's mutating webhook writes: ``tasks``
(``name``, default ``default<i>``; ``replicas``; ``minAvailable``, default the task's
replicas; ``template``), ``minAvailable`` (absent or 0: the sum of the tasks'),
``minSuccess``, ``queue`` (default ``default``), ``schedulerName`` (default ``volcano``),
``priorityClassName``. Refused naming the field, as Volcano's validating webhook refuses
them: no task, a task without a name, two of one name, a negative count, a
``minAvailable`` above the replicas.

Lifecycle ``policies`` and ``maxRetry`` (default 3): ``kbatch.sim.vcjob_policies``.
Read but not simulated (``not_simulated``): the fields whose effect the simulator does not
play (``plugins``, ``volumes``, a task's ``dependsOn``, ``topologyPolicy``, ``maxRetry``,
the policies ``vcjob_policies`` does not play); each is named in a warning on the vcjob,
and the rest runs. A ``networkTopology``, and a task's ``partitionPolicy`` (a
``subGroupPolicy``), go to the PodGroup as the controller puts them there, where kbatch
refuses them (``kbatch.cluster.volcano``), as it does on a cluster.

Made: the PodGroup (``pod_group``; ``<job>-<uid>``, owned by the vcjob, its labels and
annotations, ``minMember`` the job's ``minAvailable``, ``minTaskMember`` each task's,
``queue``, ``priorityClassName``, and ``minResources`` as Volcano sums it: the requests of
the first ``minAvailable`` pods, tasks taken highest priority first) and the pods
(``pod_for``: ``<job>-<task>-<index>``, the template's metadata and spec with Volcano's
labels and annotations, ``schedulerName`` and ``priorityClassName`` the job's where the
template names none).
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.api.quantity import format_quantity
from kbatch.cluster import fields, podspec
from kbatch.cluster.errors import ObjectError
from kbatch.sim import manifests, vcjob_policies

Object = dict[str, Any]

API_VERSION = manifests.VCJOB_API_VERSION
POD_GROUP_API = "scheduling.volcano.sh/v1beta1"
DEFAULT_QUEUE = "default"
DEFAULT_SCHEDULER = "volcano"  # Volcano's webhook's default scheduler name
# Volcano's pod labels and annotations (batch.volcano.sh/v1alpha1's keys).
TASK_INDEX = "volcano.sh/task-index"
TASK_SPEC = "volcano.sh/task-spec"
JOB_NAME = "volcano.sh/job-name"
JOB_NAMESPACE = "volcano.sh/job-namespace"
QUEUE_NAME = "volcano.sh/queue-name"
JOB_VERSION = "volcano.sh/job-version"
TEMPLATE_KEY = "volcano.sh/template-uid"
RETRY_COUNT = "volcano.sh/job-retry-count"
# Fields read but not simulated, and why (a warning names each on the vcjob).
DEFAULT_MAX_RETRY = 3  # Volcano's webhook's
NOT_SIMULATED_JOB = {
    "plugins": "Volcano's job plugins (ssh, svc, env, ...) are not simulated",
    "volumes": "the vcjob's volumes are not made",
}
NOT_SIMULATED_TASK = {
    "dependsOn": "task dependencies are not simulated: every task's pods are made at once",
    "topologyPolicy": "NUMA topology policies are not simulated",
    "maxRetry": "a task's maxRetry counts RestartPod, which is not simulated",
}


@dataclass(frozen=True, slots=True)
class Task:
    name: str
    replicas: int
    min_available: int
    template: Object  # the pod template: metadata and spec
    partitioned: bool = False  # has a partitionPolicy
    policies: tuple[vcjob_policies.Policy, ...] = ()


@dataclass(frozen=True, slots=True)
class VcJobSpec:
    tasks: tuple[Task, ...]
    min_available: int
    min_success: int | None
    queue: str
    scheduler_name: str
    priority_class: str
    policies: tuple[vcjob_policies.Policy, ...] = ()
    max_retry: int = DEFAULT_MAX_RETRY

    @property
    def replicas(self) -> int:
        return sum(task.replicas for task in self.tasks)


def is_vcjob(obj: Mapping[str, Any]) -> bool:
    return obj.get("apiVersion") == API_VERSION and obj.get("kind") == "Job"


def vcjob_spec(job: Mapping[str, Any]) -> VcJobSpec:
    """What the controller reads of ``job``, or ObjectError naming the field."""
    try:
        return _read(job)
    except fields.FieldError as exc:
        raise ObjectError(manifests.ref_of(dict(job)), exc.field, exc.why) from exc


def _read(job: Mapping[str, Any]) -> VcJobSpec:
    entries = fields.mappings(job, "spec.tasks")
    if not entries:
        raise fields.FieldError("spec.tasks", "required: at least one task")
    tasks: list[Task] = []
    for i, entry in enumerate(entries):
        task = _task(entry, i)
        if any(t.name == task.name for t in tasks):
            raise fields.FieldError(f"spec.tasks[{i}].name", f"duplicated task name {task.name!r}")
        tasks.append(task)
    total = sum(t.replicas for t in tasks)
    min_available = _count(job, "spec.minAvailable") or sum(t.min_available for t in tasks)
    if min_available > total:
        why = f"{min_available} is more than the tasks' {total} replicas"
        raise fields.FieldError("spec.minAvailable", why)
    max_retry = _count(job, "spec.maxRetry") or DEFAULT_MAX_RETRY
    min_success = fields.integer(job, "spec.minSuccess")
    if min_success is not None and not 1 <= min_success <= total:
        raise fields.FieldError("spec.minSuccess", f"must be 1 to {total}, not {min_success}")
    return VcJobSpec(
        tuple(tasks), min_available, min_success,
        fields.string(job, "spec.queue") or DEFAULT_QUEUE,
        fields.string(job, "spec.schedulerName") or DEFAULT_SCHEDULER,
        fields.string(job, "spec.priorityClassName") or "",
        vcjob_policies.policies(fields.mapping(job, "spec"), "spec"), max_retry,
    )  # fmt: skip


def _task(entry: Mapping[str, Any], i: int) -> Task:
    at = f"spec.tasks[{i}]"
    name = fields.string(entry, "name", at=at) or f"default{i}"
    replicas = _count(entry, "replicas", at) or 0
    min_available = _count(entry, "minAvailable", at)
    if min_available is None:
        min_available = replicas
    if min_available > replicas:
        why = f"{min_available} is more than the task's {replicas} replicas"
        raise fields.FieldError(f"{at}.minAvailable", why)
    template = fields.mapping(entry, "template", at=at)
    if not isinstance(fields.value(template, "spec"), dict):
        raise fields.FieldError(f"{at}.template.spec", "a task needs a pod template")
    fields.string_map(template, "metadata.labels", at=f"{at}.template")
    fields.string_map(template, "metadata.annotations", at=f"{at}.template")
    partitioned = fields.value(entry, "partitionPolicy", at=at) is not None
    given = vcjob_policies.policies(entry, at)
    return Task(name, replicas, min_available, dict(template), partitioned, given)


def _count(obj: Mapping[str, Any], path: str, at: str = "") -> int | None:
    found = fields.integer(obj, path, at=at)
    if found is not None and found < 0:
        raise fields.FieldError(f"{at}.{path}" if at else path, f"must be >= 0, not {found}")
    return found


def not_simulated(job: Mapping[str, Any], spec: VcJobSpec) -> list[str]:
    """``field: why`` for each field of ``job`` the simulator reads but does not play."""
    found = vcjob_policies.not_played(spec.policies, "spec")
    found += [
        f"spec.{key}: {why}" for key, why in NOT_SIMULATED_JOB.items() if _given(job, key, "spec")
    ]
    for i, (task, read) in enumerate(
        zip(fields.mappings(job, "spec.tasks"), spec.tasks, strict=True)
    ):
        found += vcjob_policies.not_played(read.policies, f"spec.tasks[{i}]")
        found += [
            f"spec.tasks[{i}].{key}: {why}"
            for key, why in NOT_SIMULATED_TASK.items()
            if _given(task, key)
        ]
    return found


def _given(obj: Mapping[str, Any], key: str, at: str = "") -> bool:
    found = fields.value(obj, f"{at}.{key}" if at else key)
    return found not in (None, [], {}, 0, "")


# ------------------------------------------------------------------ what it makes
def pod_group_name(job: Object) -> str:
    return f"{job['metadata']['name']}-{job['metadata'].get('uid', '')}"


def _owner(job: Object) -> Object:
    meta = job["metadata"]
    return {"apiVersion": API_VERSION, "kind": "Job", "name": meta["name"],
            "uid": meta.get("uid", ""), "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def pod_group(job: Object, spec: VcJobSpec, priority_of: Callable[[str], int]) -> Object:
    """The Volcano PodGroup the controller makes for ``job`` (``priority_of``: a
    PriorityClass's value by name, 0 for none)."""
    meta = job["metadata"]
    group_spec: Object = {
        "minMember": spec.min_available,
        "minTaskMember": {task.name: task.min_available for task in spec.tasks},
        "queue": spec.queue,
        "minResources": min_resources(spec, priority_of),
    }
    if spec.priority_class:
        group_spec["priorityClassName"] = spec.priority_class
    if job["spec"].get("networkTopology"):
        group_spec["networkTopology"] = job["spec"]["networkTopology"]
    partitioned = [t.name for t in spec.tasks if t.partitioned]
    if partitioned:  # (one entry per such task: kbatch refuses the field whole)
        group_spec["subGroupPolicy"] = [{"name": name} for name in partitioned]
    group_meta: Object = {"name": pod_group_name(job), "namespace": meta["namespace"],
                          "ownerReferences": [_owner(job)]}  # fmt: skip
    for key in ("labels", "annotations"):
        if meta.get(key):
            group_meta[key] = dict(meta[key])
    return {"apiVersion": POD_GROUP_API, "kind": "PodGroup", "metadata": group_meta,
            "spec": group_spec}  # fmt: skip


def min_resources(spec: VcJobSpec, priority_of: Callable[[str], int]) -> dict[str, str]:
    """The requests of the first ``minAvailable`` pods, each task's ``minAvailable`` pods
    first, then its others, tasks taken highest priority first (Volcano's
    ``calcPGMinResources``; only the plain names: the quota-style ones it adds beside,
    ``requests.cpu`` and the like, Volcano's scheduler and kbatch pass over)."""
    tasks = sorted(
        spec.tasks, key=lambda t: -priority_of(str(t.template["spec"].get("priorityClassName")))
    )
    total: dict[str, float] = {}
    left = spec.min_available
    if spec.min_available < sum(t.min_available for t in tasks):
        counts = [(t, t.replicas) for t in tasks]
    else:
        counts = [(t, t.min_available) for t in tasks]
        counts += [(t, t.replicas - t.min_available) for t in tasks]
    for task, count in counts:
        taken = min(count, left)
        for name, amount in podspec.pod_request(task.template["spec"]).items():
            if name != podspec.PODS:
                total[name] = total.get(name, 0.0) + amount * taken
        left -= taken
        if left <= 0:
            break
    return {name: format_quantity(name, amount) for name, amount in sorted(total.items())}


def pod_for(
    job: Object, spec: VcJobSpec, task: Task, index: int, version: int = 0, retries: int = 0
) -> Object:
    """The ``index``-th pod of ``task``, as Volcano's ``createJobPod`` makes it."""
    meta = job["metadata"]
    template = fields.copied(task.template)
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    annotations = dict((template.get("metadata") or {}).get("annotations") or {})
    own = (meta.get("annotations") or {}).get(manifests.DURATION)
    if own is not None:
        annotations.setdefault(manifests.DURATION, own)
    annotations.update({
        TASK_INDEX: str(index), TASK_SPEC: task.name,
        GROUP_NAME_ANNOTATION: pod_group_name(job), JOB_NAME: meta["name"],
        QUEUE_NAME: spec.queue, JOB_VERSION: str(version),
        TEMPLATE_KEY: f"{meta['name']}-{task.name}", RETRY_COUNT: str(retries),
    })  # fmt: skip
    labels.update({TASK_INDEX: str(index), JOB_NAME: meta["name"], TASK_SPEC: task.name,
                   JOB_NAMESPACE: meta["namespace"], QUEUE_NAME: spec.queue})  # fmt: skip
    pod_spec = template["spec"]
    pod_spec["schedulerName"] = pod_spec.get("schedulerName") or spec.scheduler_name
    if not pod_spec.get("priorityClassName") and spec.priority_class:
        pod_spec["priorityClassName"] = spec.priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{meta['name']}-{task.name}-{index}",
            "namespace": meta["namespace"],
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [_owner(job)],
        },
        "spec": pod_spec,
    }
