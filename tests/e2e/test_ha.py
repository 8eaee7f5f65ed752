"""A scheduler that dies, and one that takes over, bind nothing twice and lose nothing.

- Kill and restart: ``kbatch run`` gets SIGKILL while it binds a few hundred
  single pods and some gangs; a new one starts. Every pod ends Running, each on
  the one node it was ever given, with at most one successful bind (a
  ``Scheduled`` event) per pod uid; no gang is left partly running; no node holds
  more than it has.
- Failover: two replicas elect a leader on a Lease; exactly one says so on
  /healthz and only it schedules; after it gets SIGKILL the other takes the
  Lease within its duration (plus a margin), binds the pods made since, and binds
  nothing twice.

Each test has its own namespace, Nodes and scheduler name (its pods are nobody
else's) and leads on a Lease in its own namespace.
"""

from __future__ import annotations

import random
import secrets
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster_backend import SESSIONS, metrics, poll
from e2e.kubelet import Watch
from kbatch.api import GROUP, VERSION
from kbatch.cluster.quantity import amount
from kbatch.kubeapi import ApiError, request

pytestmark = pytest.mark.e2e

Json = dict[str, Any]
GROUP_NAME = "scheduling.k8s.io/group-name"
MERGE = "application/merge-patch+json"
LEASE_SECONDS = 5
# The standby reads the Lease every lease/5 s and takes it once unrenewed for the lease:
# at most lease + lease/5 s after the kill in theory; the rest is room for a loaded
# 2-core machine (the API server, etcd and four other test runs beside it).
TAKEOVER_MARGIN = 5.0
# After taking over: a relist of every kind, the first session, 20 binds.
BIND_MARGIN = 8.0


@dataclass
class Corner:
    """A test's own part of the cluster: a namespace, nodes, a scheduler name, and a
    record of every node each pod was ever seen on."""

    api: Any
    suffix: str = field(default_factory=lambda: secrets.token_hex(3))
    nodes: list[str] = field(default_factory=list)
    placements: dict[str, list[str]] = field(default_factory=dict)  # pod uid -> nodes seen
    deleted: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    watch: Watch | None = None

    @property
    def namespace(self) -> str:
        return f"e2e-ha-{self.suffix}"

    @property
    def scheduler_name(self) -> str:
        return f"kbatch-{self.suffix}"

    def start(self) -> Corner:
        request(self.api, "POST", "/api/v1/namespaces", {"metadata": {"name": self.namespace}})
        self.watch = Watch(self.api, f"/api/v1/namespaces/{self.namespace}/pods", self._on_pod)
        self.watch.start().wait_synced()
        return self

    def _on_pod(self, kind: str, pod: Json) -> None:
        uid, node = pod["metadata"]["uid"], (pod.get("spec") or {}).get("nodeName")
        with self.lock:
            seen = self.placements.setdefault(uid, [])
            if node and (not seen or seen[-1] != node):
                seen.append(node)
            if kind == "DELETED":
                self.deleted.append(pod["metadata"]["name"])

    def close(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        for path in (
            f"/api/v1/namespaces/{self.namespace}/pods",
            f"/api/v1/namespaces/{self.namespace}",
            *(f"/api/v1/nodes/{name}" for name in self.nodes),
        ):
            try:
                request(self.api, "DELETE", path, {"gracePeriodSeconds": 0})
            except ApiError as exc:
                if exc.status != 404:
                    raise

    # ------------------------------------------------------------------ objects
    def add_nodes(self, count: int, cpu: str) -> None:
        for i in range(count):
            self.add_node(f"ha-{self.suffix}-{i}", cpu)

    def add_node(self, name: str, cpu: str) -> None:
        request(self.api, "POST", "/api/v1/nodes", {"metadata": {"name": name}})
        resources = {"cpu": cpu, "memory": "256Gi", "pods": "110"}
        status = {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "E2E"}],
        }
        request(self.api, "PATCH", f"/api/v1/nodes/{name}/status", {"status": status}, MERGE)
        self.nodes.append(name)

    def add_group(self, name: str, min_member: int) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"minMember": min_member},
        }
        request(
            self.api, "POST", f"/apis/{GROUP}/{VERSION}/namespaces/{self.namespace}/podgroups", body
        )

    def pod(self, name: str, cpu: str, group: str | None = None) -> Json:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": self.namespace,
                "annotations": {GROUP_NAME: group} if group else {},
            },
            "spec": {
                "schedulerName": self.scheduler_name,
                "containers": [
                    {"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}
                ],
            },
        }

    def add_pods(self, pods: list[Json]) -> None:
        path = f"/api/v1/namespaces/{self.namespace}/pods"
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda body: request(self.api, "POST", path, body), pods))

    # ------------------------------------------------------------------ reading
    def pods(self) -> list[Json]:
        assert self.watch is not None
        with self.watch.lock:
            return list(self.watch.objects.values())

    def start_kbatch(self, kbatch_runs: Any, name: str, conf: Path | None = None) -> Any:
        """``kbatch run`` for this corner's scheduler name alone, not electing a leader."""
        return kbatch_runs.start(
            f"{name}-{self.suffix}",
            conf=conf,
            scheduler_names=(self.scheduler_name,),
            leader_elect=False,
        )

    def pod_condition(self, name: str, kind: str) -> Json | None:
        """The pod's condition of type ``kind`` as the API server has it now."""
        path = f"/api/v1/namespaces/{self.namespace}/pods/{name}"
        conditions = (request(self.api, "GET", path).get("status") or {}).get("conditions")
        return next((c for c in conditions or [] if c["type"] == kind), None)

    def skip_unless_served(self, name: str, field: str) -> None:
        """Skip the test unless the server kept the pod's ``spec.<field>`` (an older one
        drops a field it does not know)."""
        path = f"/api/v1/namespaces/{self.namespace}/pods/{name}"
        if not request(self.api, "GET", path)["spec"].get(field):
            pytest.skip(f"e2e: the server drops spec.{field} (an older Kubernetes)")

    def bound(self) -> list[Json]:
        return [p for p in self.pods() if (p.get("spec") or {}).get("nodeName")]

    def running(self) -> list[Json]:
        return [p for p in self.pods() if (p.get("status") or {}).get("phase") == "Running"]

    def binds_per_pod(self) -> Counter[str]:
        """Successful binds, as ``Scheduled`` events, per pod uid."""
        events = request(self.api, "GET", f"/api/v1/namespaces/{self.namespace}/events")["items"]
        return Counter(
            e["involvedObject"].get("uid") or e["involvedObject"]["name"]
            for e in events
            if e["reason"] == "Scheduled" and e["involvedObject"]["kind"] == "Pod"
        )

    def lease_holder(self) -> str:
        try:
            lease = request(
                self.api,
                "GET",
                f"/apis/coordination.k8s.io/v1/namespaces/{self.namespace}/leases/kbatch",
            )
        except ApiError as exc:
            if exc.status == 404:
                return ""
            raise
        return str(lease["spec"].get("holderIdentity") or "")

    # ------------------------------------------------------------------ checks
    def assert_bound_once(self) -> None:
        with self.lock:
            moved = {uid: nodes for uid, nodes in self.placements.items() if len(nodes) > 1}
        assert moved == {}, "a pod's node changed"
        twice = {uid: n for uid, n in self.binds_per_pod().items() if n > 1}
        assert twice == {}, "pods bound more than once"

    def assert_nodes_not_overcommitted(self, cpu: str) -> None:
        used: Counter[str] = Counter()
        for pod in self.bound():
            for container in pod["spec"]["containers"]:
                used[pod["spec"]["nodeName"]] += amount(
                    "cpu", container["resources"]["requests"]["cpu"]
                )
        over = {node: millis for node, millis in used.items() if millis > amount("cpu", cpu)}
        assert over == {}, f"nodes given more than their {cpu} cpu (millicores)"


def test_kill_and_restart_binds_nothing_twice(corner: Corner, kbatch_runs: Any) -> None:
    node_cpu = "16"
    corner.add_nodes(8, node_cpu)  # 128 cpu
    gangs = {f"gang-{i}": 6 for i in range(6)}  # 36 x 1 cpu
    for name, size in gangs.items():
        corner.add_group(name, size)
    # 9 x 12 cpu: each fits a node alone, the 9 never fit together (one per node at most)
    corner.add_group("too-big", 9)
    pods = [corner.pod(f"single-{i}", "100m") for i in range(300)]  # 30 cpu
    pods += [corner.pod(f"{g}-{i}", "1", g) for g, size in gangs.items() for i in range(size)]
    pods += [corner.pod(f"too-big-{i}", "12", "too-big") for i in range(9)]
    random.Random(7).shuffle(pods)
    placeable = len(pods) - 9

    def start(name: str) -> Any:
        return kbatch_runs.start(name, scheduler_names=(corner.scheduler_name,), leader_elect=False)

    first = start(f"kill-{corner.suffix}-first")
    maker = threading.Thread(target=corner.add_pods, args=(pods,))
    maker.start()
    try:
        poll("the first scheduler binding", lambda: len(corner.bound()) >= 40, 60, 0.02)
        first.kill()
        at_kill = len(corner.bound())
    finally:
        maker.join()
    assert at_kill < placeable, "killed mid-run, not after"

    second = start(f"kill-{corner.suffix}-second")
    try:
        poll("every placeable pod Running", lambda: len(corner.running()) == placeable, 90)
        running = Counter(
            (p["metadata"].get("annotations") or {}).get(GROUP_NAME) for p in corner.running()
        )
        assert {g: running[g] for g in gangs} == gangs, "every gang whole"
        assert running["too-big"] == 0, "the gang that cannot fit is not partly bound"
        assert [p["metadata"]["name"] for p in corner.bound() if p not in corner.running()] == []
    finally:
        second.stop()  # its event writes drained
    corner.assert_bound_once()
    corner.assert_nodes_not_overcommitted(node_cpu)
    assert corner.deleted == [], "no pod lost"


def test_leader_failover(corner: Corner, kbatch_runs: Any) -> None:
    corner.add_nodes(2, "32")
    replicas = [
        kbatch_runs.start(
            f"ha-{corner.suffix}-{i}",
            scheduler_names=(corner.scheduler_name,),
            lock_namespace=corner.namespace,
            lease_duration=f"{LEASE_SECONDS}s",
        )
        for i in (1, 2)
    ]
    try:
        holder = poll("a leader on the Lease", corner.lease_holder, 30)

        def one_leader() -> Any:
            said = [r.health()["leader"] for r in replicas]
            return said.count(True) == 1 and replicas[said.index(True)]

        # the Lease is written before the replica's own elector has read its answer back
        leader = poll("exactly one replica saying it leads on /healthz", one_leader, 25)
        standby = next(r for r in replicas if r is not leader)
        corner.add_pods([corner.pod(f"before-{i}", "100m") for i in range(20)])
        poll("the pods made before Running", lambda: len(corner.running()) == 20, 30)
        assert metrics(standby.metrics_url).get(SESSIONS, 0) == 0, "the standby schedules nothing"

        leader.kill()
        killed = time.monotonic()
        corner.add_pods([corner.pod(f"after-{i}", "100m") for i in range(20)])
        poll("a new holder", lambda: corner.lease_holder() not in ("", holder), 30, 0.05)
        took_over = time.monotonic() - killed
        poll("the pods made after bound", lambda: len(corner.bound()) == 40, 30, 0.05)
        bound_after = time.monotonic() - killed
        assert took_over <= LEASE_SECONDS + TAKEOVER_MARGIN, took_over
        assert bound_after <= took_over + BIND_MARGIN, (took_over, bound_after)
        poll("all 40 Running", lambda: len(corner.running()) == 40, 30)
        poll("the standby saying it leads on /healthz", lambda: standby.health()["leader"], 25)
    finally:
        for replica in replicas:
            replica.stop()
    corner.assert_bound_once()
    assert corner.deleted == []


# Issue 14: after the kill, no gang stays partly bound longer than the lease plus 2 s
# (the standby takes over within the lease, then completes half-bound gangs first). The
# margin is the loaded 2-core machine's, as TAKEOVER_MARGIN.
PARTLY_BOUND_LIMIT = LEASE_SECONDS + 2.0


@dataclass
class GangWatch:
    """Samples how many pods of each gang are bound: when each was last seen partly bound
    (0 < bound < size) and when first seen whole."""

    corner: Corner
    sizes: dict[str, int]
    partly_since: dict[str, float] = field(default_factory=dict)
    whole_at: dict[str, float] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        while not self.stop.is_set():
            now = time.monotonic()
            bound = Counter(
                (p["metadata"].get("annotations") or {}).get(GROUP_NAME)
                for p in self.corner.bound()
            )
            for gang, size in self.sizes.items():
                if 0 < bound[gang] < size:
                    self.partly_since.setdefault(gang, now)
                elif bound[gang] == size:
                    self.whole_at.setdefault(gang, now)
            time.sleep(0.05)

    def longest_partly_bound_after(self, moment: float) -> float:
        """The longest time any gang stayed partly bound after ``moment``."""
        return max(
            (
                self.whole_at[gang] - max(since, moment)
                for gang, since in self.partly_since.items()
                if self.whole_at.get(gang, 0.0) > moment
            ),
            default=0.0,
        )


def test_failover_mid_burst_completes_half_bound_gangs_first(
    corner: Corner, kbatch_runs: Any
) -> None:
    """The leader gets SIGKILL while it binds a burst of gangs: nothing lost, nothing bound
    twice, every gang whole in the end, none partly bound for long after the kill."""
    corner.add_nodes(4, "32")
    sizes = {f"gang-{i}": 10 for i in range(40)}  # 400 pods x 100m: 40 of 128 cpu
    for name, size in sizes.items():
        corner.add_group(name, size)
    replicas = [
        kbatch_runs.start(
            f"burst-{corner.suffix}-{i}",
            scheduler_names=(corner.scheduler_name,),
            lock_namespace=corner.namespace,
            lease_duration=f"{LEASE_SECONDS}s",
        )
        for i in (1, 2)
    ]
    watch = GangWatch(corner, sizes)
    sampler = threading.Thread(target=watch.run, daemon=True)
    try:
        holder = poll("a leader on the Lease", corner.lease_holder, 30)

        def one_leader() -> Any:
            said = [r.health()["leader"] for r in replicas]
            return said.count(True) == 1 and replicas[said.index(True)]

        leader = poll("exactly one replica saying it leads on /healthz", one_leader, 25)
        pods = [corner.pod(f"{g}-{i}", "100m", g) for g, size in sizes.items() for i in range(size)]
        sampler.start()
        maker = threading.Thread(target=corner.add_pods, args=(pods,))
        maker.start()
        try:
            poll("the leader binding", lambda: len(corner.bound()) >= 30, 60, 0.02)
            leader.kill()
            killed = time.monotonic()
            at_kill = len(corner.bound())
        finally:
            maker.join()
        assert at_kill < len(pods), "killed mid-burst, not after"
        poll("a new holder", lambda: corner.lease_holder() not in ("", holder), 30, 0.05)
        took_over = time.monotonic() - killed
        poll("every pod Running", lambda: len(corner.running()) == len(pods), 120)
        window = watch.longest_partly_bound_after(killed)
        print(
            f"bound at the kill: {at_kill}/{len(pods)}; took over after {took_over:.1f}s; "
            f"longest partly bound after the kill: {window:.1f}s"
        )
        assert window <= PARTLY_BOUND_LIMIT + TAKEOVER_MARGIN, window
    finally:
        watch.stop.set()
        for replica in replicas:
            replica.stop()
    running = Counter(
        (p["metadata"].get("annotations") or {}).get(GROUP_NAME) for p in corner.running()
    )
    assert dict(running) == sizes, "every gang whole"
    corner.assert_bound_once()
    assert corner.deleted == [], "no pod lost"
