"""A Volcano user keeps Volcano's Job controller and runs kbatch as the scheduler, on a
real API server: Volcano's CRDs installed, its controller-manager (v1.15.1, the Job
controller alone, tests/e2e/volcano.py) and ``kbatch run --scheduler-name volcano``
with the scheduler conf Volcano's chart installs (``volcano-scheduler.conf``: overcommit,
binpack, ...) against the test control plane, and a ``batch.volcano.sh/v1alpha1`` Job
submitted as a Volcano user writes one (a master of 1 and workers of 3,
``minAvailable: 4``, a queue).

Volcano's controller makes the Job's PodGroup (minMember 4, minTaskMember per task, the
queue, minResources); kbatch admits it (the Volcano PodGroup's ``status.phase``
Inqueue), which is what the controller waits for before it makes the pods
``<job>-<task>-<index>``; kbatch binds the four, none before all four exist; the test
kubelet runs them, and the controller sets the Job's ``status.state.phase`` Running. A
second Job that does not fit beside the first is not admitted: its PodGroup stays
Pending, whole (the controller makes no pod of it), its condition saying why in
kbatch's words. Once the first Job's pods succeed (the test says so, as their kubelet
would), the controller says it Completed (and deletes its PodGroup), and the second
is admitted, bound whole and Running. An elastic Job (``minAvailable: 2`` of the four)
starts with two pods on a node that holds two, as under Volcano's scheduler.

The scheduler name is Volcano's own, ``volcano``, as a user would keep it; the test's
two Nodes must be the cluster's only ones (kbatch admits by what the whole cluster
holds). Not in the 1.20 smoke set (tests/e2e/smoke.py): Volcano v1.15.1 is built on
client-go v0.35, for servers far newer than 1.20.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e import volcano
from e2e.cluster_backend import delete, poll
from e2e.kubelet import Watch
from e2e.test_ha import MERGE, Corner
from kbatch.api import GROUP_NAME_ANNOTATION, VOLCANO_TASK_ANNOTATION
from kbatch.kubeapi import request

pytestmark = pytest.mark.e2e

Json = dict[str, Any]
SCHEDULER = "volcano"  # Volcano's default, kept


@pytest.fixture(scope="session")
def volcano_assets() -> Path:
    """Volcano's built release, or a skip saying why (before a control plane starts)."""
    try:
        return volcano.assets()
    except volcano.Unavailable as why:
        pytest.skip(f"e2e: {why}")


@pytest.fixture
def controllers(
    volcano_assets: Path, corner: Corner, kbatch_runs: Any, control_plane: Any, tmp_path: Path
) -> Iterator[tuple[volcano.Controller, Any]]:
    """Volcano's CRDs and Job controller, and ``kbatch run`` serving ``volcano``."""
    folder = volcano_assets
    others = {n["metadata"]["name"] for n in request(corner.api, "GET", "/api/v1/nodes")["items"]}
    assert not others, f"the test's two Nodes are the cluster; it has {sorted(others)} too"
    with (
        volcano.installed_crds(corner.api, folder),
        volcano.controller(folder, control_plane.kubeconfig, SCHEDULER, tmp_path) as running,
    ):
        run = kbatch_runs.start(
            f"volcano-{corner.suffix}",
            conf=folder / volcano.CONF,
            scheduler_names=(SCHEDULER,),
            leader_elect=False,
        )
        try:
            yield running, run
        finally:
            run.stop()
            for path in (volcano.JOBS, volcano.POD_GROUPS):
                delete(corner.api, path.format(namespace=corner.namespace))
            delete(corner.api, f"{volcano.QUEUES}/{queue_name(corner)}")


def queue_name(corner: Corner) -> str:
    return f"vc-{corner.suffix}"


def vcjob(corner: Corner, name: str, cpu: str, min_available: int = 4) -> Json:
    """A Volcano Job of a master and three workers of ``cpu`` each, ``minAvailable: 4``
    unless given, with what Volcano's defaulting webhook would have added written out."""

    def task(role: str, replicas: int) -> Json:
        container = {"name": role, "image": "x", "resources": {"requests": {"cpu": cpu}}}
        return {
            "name": role,
            "replicas": replicas,
            "template": {"spec": {"containers": [container], "restartPolicy": "Never"}},
        }

    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": corner.namespace},
        "spec": {
            "schedulerName": SCHEDULER,
            "minAvailable": min_available,
            "queue": queue_name(corner),
            "tasks": [task("master", 1), task("worker", 3)],
        },
    }


def submit(corner: Corner, job: Json) -> None:
    request(corner.api, "POST", volcano.JOBS.format(namespace=corner.namespace), job)


def group_of(corner: Corner, job: str) -> Json | None:
    """The Volcano PodGroup Volcano's controller made for ``job`` (its owner), if any."""
    listed = request(corner.api, "GET", volcano.POD_GROUPS.format(namespace=corner.namespace))
    for group in listed["items"]:
        owners = group["metadata"].get("ownerReferences") or []
        if any(o["kind"] == "Job" and o["name"] == job for o in owners):
            return dict(group)
    return None


def phase_of(corner: Corner, job: str) -> str:
    return str(((group_of(corner, job) or {}).get("status") or {}).get("phase") or "")


def job_phase(corner: Corner, job: str) -> str:
    """The Volcano Job's ``status.state.phase``, as Volcano's controller keeps it."""
    got = request(corner.api, "GET", f"{volcano.JOBS.format(namespace=corner.namespace)}/{job}")
    return str(((got.get("status") or {}).get("state") or {}).get("phase") or "")


def finish(corner: Corner, pod: Json) -> None:
    """The pod's containers end with exit code 0, as its kubelet would say."""
    meta = pod["metadata"]
    terminated = {"exitCode": 0, "reason": "Completed"}
    status = {
        "phase": "Succeeded",
        "containerStatuses": [
            {"name": c["name"], "image": c["image"], "imageID": "", "ready": False,
             "restartCount": 0, "state": {"terminated": terminated}}
            for c in pod["spec"]["containers"]
        ],
    }  # fmt: skip
    path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
    request(corner.api, "PATCH", path, {"status": status}, MERGE)


def pods_of(corner: Corner, group: str) -> list[Json]:
    return [
        p
        for p in corner.pods()
        if (p["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION) == group
    ]


class BindWitness:
    """Watches the namespace's pods: on each pod's first bind, how many pods of its
    group existed (all binds must come after the whole gang exists)."""

    def __init__(self, corner: Corner) -> None:
        self.seen_at_bind: dict[str, int] = {}  # pod name -> pods of its group then
        self.watch = Watch(
            corner.api, f"/api/v1/namespaces/{corner.namespace}/pods", self._on_pod, "binds"
        )

    def _on_pod(self, kind: str, pod: Json) -> None:
        name = pod["metadata"]["name"]
        if kind == "DELETED" or not pod["spec"].get("nodeName") or name in self.seen_at_bind:
            return
        group = (pod["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION)
        with self.watch.lock:
            members = [
                p
                for p in self.watch.objects.values()
                if (p["metadata"].get("annotations") or {}).get(GROUP_NAME_ANNOTATION) == group
            ]
        self.seen_at_bind[name] = len(members)


def add_queue(corner: Corner) -> None:
    request(
        corner.api, "POST", volcano.QUEUES,
        {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
         "metadata": {"name": queue_name(corner)}, "spec": {"weight": 1}},
    )  # fmt: skip


def test_volcanos_job_controller_runs_a_vcjob_under_kbatch(
    volcano_assets: Path, corner: Corner, controllers: tuple[volcano.Controller, Any]
) -> None:
    controller, run = controllers
    corner.add_nodes(2, "4")  # 8 cpu
    add_queue(corner)
    witness = BindWitness(corner)
    witness.watch.start().wait_synced()
    try:
        submit(corner, vcjob(corner, "train", "1"))

        def made() -> Json | None:
            controller.check_alive()
            return group_of(corner, "train")

        group = poll("Volcano's controller makes the Job's PodGroup", made, 60)
        assert group["spec"]["minMember"] == 4
        assert group["spec"]["minTaskMember"] == {"master": 1, "worker": 3}
        assert group["spec"]["queue"] == queue_name(corner)
        assert group["spec"]["minResources"]["cpu"] in ("4", "4000m")
        name = group["metadata"]["name"]
        # The controller makes no pod before the group is admitted, so Inqueue is seen.
        poll("kbatch admits the PodGroup", lambda: phase_of(corner, "train") == "Inqueue", 60)

        poll("the controller makes the four pods", lambda: len(pods_of(corner, name)) == 4, 60)
        pods = {p["metadata"]["name"]: p for p in pods_of(corner, name)}
        assert sorted(pods) == ["train-master-0", "train-worker-0", "train-worker-1",
                                "train-worker-2"]  # fmt: skip
        roles = sorted(p["metadata"]["annotations"][VOLCANO_TASK_ANNOTATION] for p in pods.values())
        assert roles == ["master", "worker", "worker", "worker"]
        assert {p["spec"]["schedulerName"] for p in pods.values()} == {SCHEDULER}

        poll("kbatch binds the four", lambda: len(witness.seen_at_bind) == 4, 60)
        assert witness.seen_at_bind == dict.fromkeys(pods, 4), "a bind before the gang was whole"
        poll("the four run", lambda: len(corner.running()) == 4, 60)
        poll("Volcano's controller says the Job Running",
             lambda: job_phase(corner, "train") == "Running", 60)  # fmt: skip
        poll("kbatch says the PodGroup Running", lambda: phase_of(corner, "train") == "Running", 30)

        # A second Job of 4 x 2 cpu: 8 cpu, with 4 of the 8 held by the first.
        submit(corner, vcjob(corner, "wide", "2"))
        waiting = poll("its PodGroup", lambda: group_of(corner, "wide"), 60)

        def told() -> Json | None:
            conditions = ((group_of(corner, "wide") or {}).get("status") or {}).get("conditions")
            return next(
                (c for c in conditions or [] if "not admitted" in c.get("message", "")), None
            )

        condition = poll("kbatch says why the second Job waits", told, 60)
        assert condition["type"] == "Unschedulable" and condition["status"] == "True"
        assert "cpu" in condition["message"], condition
        assert phase_of(corner, "wide") == "Pending"
        assert pods_of(corner, waiting["metadata"]["name"]) == [], "no pod of a group not admitted"
        assert len(corner.running()) == 4 and run.alive

        # The first Job's pods end: it is Completed, and the second is admitted and runs.
        for pod in pods.values():
            finish(corner, pod)
        poll("Volcano's controller says the first Job Completed",
             lambda: job_phase(corner, "train") == "Completed", 60)  # fmt: skip
        # (Volcano's controller deletes a finished Job's PodGroup, so no phase is left
        # for kbatch to write Completed in.)
        poll("the finished Job's PodGroup removed", lambda: group_of(corner, "train") is None, 30)
        poll("kbatch admits the second", lambda: phase_of(corner, "wide") == "Inqueue", 60)
        wide = waiting["metadata"]["name"]
        poll("its four pods bound", lambda: len([p for p in pods_of(corner, wide)
             if p["spec"].get("nodeName")]) == 4, 60)  # fmt: skip
        bound_wide = {p["metadata"]["name"] for p in pods_of(corner, wide)}
        assert {witness.seen_at_bind[n] for n in bound_wide} == {4}, "a bind before it was whole"
        poll("the second Job Running", lambda: job_phase(corner, "wide") == "Running", 60)
        controller.check_alive()
    finally:
        witness.watch.stop()


def test_an_elastic_vcjob_starts_with_min_available_pods(
    volcano_assets: Path, corner: Corner, controllers: tuple[volcano.Controller, Any]
) -> None:
    # minAvailable 2 of a master and three workers of 1 cpu, on one node of 2 cpu: the
    # controller's PodGroup has minMember 2 and each task's replicas as its minimum (4 in
    # all), which Volcano's scheduler skips then; so does kbatch: two pods run, the rest wait.
    controller, _ = controllers
    corner.add_nodes(1, "2")
    add_queue(corner)
    submit(corner, vcjob(corner, "elastic", "1", min_available=2))
    group = poll("its PodGroup", lambda: group_of(corner, "elastic"), 60)
    assert group["spec"]["minMember"] == 2
    assert group["spec"]["minTaskMember"] == {"master": 1, "worker": 3}
    poll("two of its pods run", lambda: len(corner.running()) == 2, 60)
    poll("Volcano's controller says the Job Running",
         lambda: job_phase(corner, "elastic") == "Running", 60)  # fmt: skip
    assert len(pods_of(corner, group["metadata"]["name"])) == 4
    assert len(corner.bound()) == 2, "no more than the node holds"
    controller.check_alive()
