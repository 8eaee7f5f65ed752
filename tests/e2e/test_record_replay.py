"""A flight recording of ``kbatch run`` on a real API server replays decision for decision.

``kbatch run --record DIR`` schedules gangs in two weighted queues and single pods on a
few nodes of the test's own, the e2e kubelet running and finishing the pods (so gangs
that wait get the room of those that end); once every pod has run, the run is killed
(SIGKILL: no clean-up, the recording is as its last flush left it), and ``kbatch replay
DIR -o json`` must read it up to there, say where it stopped, and find every recorded
bind, eviction, nomination and status made again, with none differing; and so must a
replay shared by two processes, the second starting from a checkpoint.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster_backend import poll
from kbatch.api import GROUP, VERSION
from kbatch.kubeapi import ApiError, request
from kbatch.record.store import segments
from kbatch.record.store.recorder import FLUSH_SECONDS
from kbatch.record.store.segments import Reading

pytestmark = pytest.mark.e2e

KBATCH = Path(sys.executable).with_name("kbatch")
DURATION = "kbatch.io/sim-duration"
MERGE = "application/merge-patch+json"


def _queue(api: Any, name: str, weight: int) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
    }
    request(api, "POST", f"/apis/{GROUP}/{VERSION}/queues", body)


def _group(corner: Any, name: str, size: int, queue: str) -> None:
    body = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": corner.namespace},
        "spec": {"minMember": size, "queue": queue},
    }
    path = f"/apis/{GROUP}/{VERSION}/namespaces/{corner.namespace}/podgroups"
    request(corner.api, "POST", path, body)


def _finishing(pod: dict[str, Any], seconds: int) -> dict[str, Any]:
    pod["metadata"]["annotations"][DURATION] = f"{seconds}s"
    return pod


def test_a_recorded_run_replays_bind_for_bind(
    corner: Any, kbatch_runs: Any, tmp_path: Path
) -> None:
    queues = [f"rec-a-{corner.suffix}", f"rec-b-{corner.suffix}"]
    for weight, queue in enumerate(queues, start=1):
        _queue(corner.api, queue, weight)
    corner.add_nodes(3, "4")  # 12 cpu, a third of what the pods ask at once
    pods = []
    for i in range(8):
        name, size, queue = f"gang-{i}", 2 + i % 3, queues[i % 2]
        _group(corner, name, size, queue)
        pods += [_finishing(corner.pod(f"{name}-{j}", "1", name), 3) for j in range(size)]
    pods += [_finishing(corner.pod(f"single-{i}", "500m"), 2) for i in range(6)]
    recording = tmp_path / "recording"
    run = kbatch_runs.start(
        f"record-{corner.suffix}",
        scheduler_names=(corner.scheduler_name,),
        leader_elect=False,
        extra=("--record", str(recording), "--record-checkpoint-every", "4K"),
    )
    try:
        corner.add_pods(pods)

        def all_ran() -> bool:
            phases = [(p.get("status") or {}).get("phase") for p in corner.pods()]
            return len(phases) == len(pods) and all(p == "Succeeded" for p in phases)

        poll("every pod run to its end", all_ran, 120)
        time.sleep(2 * FLUSH_SECONDS)  # the last binds' records flushed
    finally:
        run.kill()
        run.stop()
        for queue in queues:
            try:
                request(corner.api, "DELETE", f"/apis/{GROUP}/{VERSION}/queues/{queue}")
            except ApiError as exc:
                if exc.status != 404:
                    raise
    done = subprocess.run(
        [str(KBATCH), "replay", str(recording), "-o", "json", "--fail-on-difference"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    shown = json.loads(done.stdout)
    stopped = shown["stopped"]
    assert stopped is not None and "ends early" in stopped["why"], "killed: no gzip trailer"
    assert "the recording stops early" in done.stderr
    by_kind = shown["by_kind"]
    assert by_kind["binds"]["recorded"] >= len(pods), "every pod's bind was recorded"
    assert by_kind["groups"]["recorded"] > 0
    assert shown["differences"] == []
    assert shown["decisions"]["differing"] == 0
    assert shown["decisions"]["replayed"] == shown["decisions"]["recorded"]
    assert done.returncode == 0, done.stderr
    _replayed_in_shares(recording, shown)
    _played_forward(recording, len(pods))


def _replayed_in_shares(recording: Path, whole: dict[str, Any]) -> None:
    """The same recording, its segments each starting from a checkpoint (every 4 KiB),
    replayed by two processes: the second reads from the last checkpoint before its
    sessions, and the two find what the whole replay finds."""
    assert len(segments.segment_files(recording)) > 2, "a checkpoint every 4 KiB"
    done = subprocess.run(
        [str(KBATCH), "replay", str(recording), "--jobs", "2", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["decisions"] == whole["decisions"] and shown["differences"] == []
    assert shown["sessions"] == whole["sessions"]


def _played_forward(recording: Path, pods: int) -> None:
    """The same recording played forward in the simulator (``--config``): the recorded
    conf's run starts every job the cluster started, with as many binds."""
    conf = Path(__file__).parents[2] / "examples" / "conf" / "kube-batch.yaml"
    done = subprocess.run(
        [str(KBATCH), "replay", str(recording), "--config", str(conf), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    print(json.dumps({k: shown[k] for k in ("workload", "fidelity")}))
    fidelity = shown["fidelity"]
    assert shown["workload"]["pods"] == pods
    assert fidelity["binds"]["simulated"] == fidelity["binds"]["recorded"] >= pods
    assert fidelity["jobsStarted"]["simulated"] == fidelity["jobsStarted"]["recorded"] == 14
    assert shown["comparison"]["jobs"]["onlyBase"] == []


def _node_status(api: Any, name: str, cpu: str, heartbeat: str) -> None:
    """A kubelet's report of the node: its room, Ready, and the images it holds."""
    resources = {"cpu": cpu, "memory": "256Gi", "pods": "110"}  # (as corner.add_nodes)
    ready = {"type": "Ready", "status": "True", "reason": "E2E", "lastHeartbeatTime": heartbeat}
    image = {"names": [f"registry.example/trainer:{cpu}"], "sizeBytes": 734003200}
    status = {"capacity": resources, "allocatable": resources, "conditions": [ready],
              "images": [image]}  # fmt: skip
    request(api, "PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, MERGE)


def test_a_recording_holds_what_kbatch_reads_and_not_node_heartbeats(
    corner: Any, kbatch_runs: Any, tmp_path: Path
) -> None:
    """On a real API server: a Node's heartbeats (a kubelet's reports that change
    nothing kbatch reads) are not recorded, a change of its room is, as is one of its
    images (image locality reads them), and no recorded object carries managedFields
    (``kbatch.cluster.kept_fields``)."""
    corner.add_nodes(2, "4")
    recording = tmp_path / "recording"
    run = kbatch_runs.start(
        f"kept-{corner.suffix}",
        scheduler_names=(corner.scheduler_name,),
        leader_elect=False,
        extra=("--record", str(recording)),
    )
    try:
        for beat in range(5):
            for name in corner.nodes:
                _node_status(corner.api, name, "4", f"2024-01-01T00:0{beat}:00Z")
        _node_status(corner.api, corner.nodes[0], "8", "2024-01-01T00:06:00Z")
        corner.add_pods([_finishing(corner.pod("single", "6"), 1)])  # (only the first fits)

        def ran() -> bool:
            return [(p.get("status") or {}).get("phase") for p in corner.pods()] == ["Succeeded"]

        poll("the pod run to its end", ran, 60)
        time.sleep(2 * FLUSH_SECONDS)  # its records flushed
    finally:
        run.kill()
        run.stop()
    applied = [r["o"] for r in Reading(recording).records() if r.get("op") == "a"]
    assert applied, "nothing recorded"
    assert [o["metadata"]["name"] for o in applied if "managedFields" in o["metadata"]] == []
    nodes = {name: [o for o in applied if o["kind"] == "Node" and o["metadata"]["name"] == name]
             for name in corner.nodes}  # fmt: skip
    first, second = (nodes[name] for name in corner.nodes)
    # As listed (no images), then as first reported (the images it holds); no heartbeat.
    assert len(second) == 2, [o["status"]["conditions"] for o in second]
    assert "images" not in second[0]["status"]
    assert second[1]["status"]["images"][0]["names"] == ["registry.example/trainer:4"]
    assert len(first) == 3, [o["status"]["allocatable"] for o in first]
    assert first[-1]["status"]["allocatable"]["cpu"] == "8"
    pods = [o for o in applied if o["kind"] == "Pod" and o["metadata"]["name"] == "single"]
    assert pods and pods[-1]["spec"]["nodeName"] == corner.nodes[0]
