"""A small cluster for admission tests: objects in, a ClusterView out.

world = World().queue("q1").quota("rq", {"requests.cpu": "8"})
world.pod_group("a", min_member=2, min_resources={"cpu": "4"})
answer = podgroup.mutate(pod_group_obj("b", min_member=2), None, world.view)
"""

from __future__ import annotations

from typing import Any

from kbatch.api import API_VERSION, GROUP_NAME_ANNOTATION
from kbatch.cluster.state import ClusterState
from kbatch.webhooks.admission.view import StateView

Obj = dict[str, Any]


def pod_group_obj(
    name: str,
    namespace: str = "default",
    min_member: object = 1,
    queue: str | None = None,
    min_resources: dict[str, str] | None = None,
    phase: str | None = None,
    priority_class: str | None = None,
) -> Obj:
    spec: Obj = {"minMember": min_member}
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    if queue is not None:
        spec["queue"] = queue
    if min_resources is not None:
        spec["minResources"] = min_resources
    obj: Obj = {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def queue_obj(name: str, weight: object = 1, state: str = "Open") -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight, "state": state},
    }


def job_obj(
    name: str,
    group: str | None = None,
    namespace: str = "default",
    cpu: str = "1",
    memory: str | None = None,
    suspend: bool | None = None,
    parallelism: int = 2,
    scheduler: str = "kbatch",
) -> Obj:
    requests = {"cpu": cpu, **({"memory": memory} if memory else {})}
    template: Obj = {
        "spec": {
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
            "restartPolicy": "Never",
            "schedulerName": scheduler,
        }
    }
    if group is not None:
        template["metadata"] = {"annotations": {GROUP_NAME_ANNOTATION: group}}
    spec: Obj = {"parallelism": parallelism, "template": template}
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


class World:
    def __init__(self) -> None:
        self.state = ClusterState()
        self.jobs: list[Obj] = []
        self.queue("default")

    @property
    def view(self) -> StateView:
        return StateView(self.state, self._group_jobs)

    def _group_jobs(self, namespace: str, group: str) -> list[Obj]:
        return [
            job
            for job in self.jobs
            if job["metadata"]["namespace"] == namespace
            and job["spec"]["template"]
            .get("metadata", {})
            .get("annotations", {})
            .get(GROUP_NAME_ANNOTATION)
            == group
        ]

    def queue(self, name: str, weight: int = 1, state: str = "Open") -> World:
        self.state.apply(queue_obj(name, weight, state))
        return self

    def pod_group(self, name: str, **fields: Any) -> World:
        self.state.apply(pod_group_obj(name, **fields))
        return self

    def quota(
        self, name: str, hard: dict[str, str], namespace: str = "default", **scoping: Any
    ) -> World:
        """``scoping``: ``scopes`` and ``scopeSelector`` as a ResourceQuota writes them."""
        self.state.apply(
            {
                "apiVersion": "v1",
                "kind": "ResourceQuota",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"hard": hard, **scoping},
            }
        )
        return self

    def job(self, name: str, group: str, **fields: Any) -> World:
        self.jobs.append(job_obj(name, group, **fields))
        return self
