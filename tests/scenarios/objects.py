"""Small builders of Kubernetes manifests (plain dicts) for simulator tests."""

from typing import Any

Obj = dict[str, Any]
PG_API = "scheduling.incubator.k8s.io/v1alpha1"
GROUP = "scheduling.k8s.io/group-name"


def at(obj: Obj, submit_at: str) -> Obj:
    """``obj`` appearing at ``submit_at``."""
    annotations = obj["metadata"].setdefault("annotations", {})
    annotations["kbatch.io/sim-submit-at"] = submit_at
    return obj


def node(name: str = "node-1", cpu: str = "4", memory: str = "16Gi") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }


def pod_spec(cpu: str = "1", scheduler: str | None = "kbatch", **extra: Any) -> Obj:
    spec: Obj = {
        "containers": [
            {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}
        ]
    }
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    spec.update(extra)
    return spec


def pod(
    name: str,
    cpu: str = "1",
    group: str | None = None,
    duration: str | None = None,
    namespace: str | None = None,
    scheduler: str | None = "kbatch",
    **extra: Any,
) -> Obj:
    annotations = {}
    if group:
        annotations[GROUP] = group
    if duration:
        annotations["kbatch.io/sim-duration"] = duration
    metadata: Obj = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": pod_spec(cpu, scheduler, **extra),
    }


def job(
    name: str,
    parallelism: int | None = 1,
    completions: int | None = None,
    cpu: str = "1",
    group: str | None = None,
    duration: str | None = None,
    suspend: bool | None = None,
) -> Obj:
    annotations = {}
    if group:
        annotations[GROUP] = group
    if duration:
        annotations["kbatch.io/sim-duration"] = duration
    spec: Obj = {
        "template": {
            "metadata": {"annotations": annotations},
            "spec": {**pod_spec(cpu), "restartPolicy": "Never"},
        }
    }
    if parallelism is not None:
        spec["parallelism"] = parallelism
    if completions is not None:
        spec["completions"] = completions
    if suspend is not None:
        spec["suspend"] = suspend
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def pod_group(name: str, min_member: int = 1, queue: str | None = None) -> Obj:
    spec: Obj = {"minMember": min_member}
    if queue:
        spec["queue"] = queue
    return {"apiVersion": PG_API, "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def queue(name: str, weight: int = 1) -> Obj:
    return {
        "apiVersion": PG_API,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
    }


def conf_map(text: str, name: str = "kbatch-conf") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "annotations": {"kbatch.io/sim-scheduler-conf": "true"}},
        "data": {"conf.yaml": text},
    }
