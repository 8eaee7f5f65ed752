"""The live benchmark's scenarios and the objects each scheduler is handed (no cluster,
no clock; the figures are ``kbatch.bench.live_figures``).

Every scheduler gets the same pods (same names, requests and nodes); only what marks
them as its own differs: the scheduler name, and for a gang the group object that
scheduler reads (kbatch's ``scheduling.incubator.k8s.io`` PodGroup, upstream's
``scheduling.k8s.io/v1beta1`` PodGroup named in ``spec.schedulingGroup``, Volcano's
``scheduling.volcano.sh`` PodGroup). Volcano's scheduler leaves alone a pod that names no
PodGroup (in a Volcano install its controller makes one of one member for each such pod),
so for Volcano even a single-pod job gets a PodGroup, of ``minMember`` 1, from the
benchmark. Queues: kbatch and Volcano each get the scenario's weighted Queues in their
own API; kube-scheduler has none, so there its gangs wait in one line.
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from kbatch.api import GROUP_NAME_ANNOTATION

NAMESPACE = "bench"
GANG_LABEL = "bench.kbatch.io/gang"
NODE_LABEL = "type"  # the label KWOK is told to manage nodes by
NODE_LABEL_VALUE = "kwok"
NODE_CPU, NODE_MEMORY, NODE_PODS = "32", "128Gi", "110"
POD_CPU, POD_MEMORY = "1", "2Gi"

SCHEDULERS = ("kbatch", "kube-scheduler", "volcano")
SCHEDULER_NAMES = {"kbatch": "kbatch", "kube-scheduler": "default-scheduler", "volcano": "volcano"}
KBATCH_GROUPS = "scheduling.incubator.k8s.io/v1alpha1"
UPSTREAM_GROUPS = "scheduling.k8s.io/v1beta1"
VOLCANO_GROUPS = "scheduling.volcano.sh/v1beta1"
VOLCANO_QUEUES = VOLCANO_GROUPS  # Queues are in the PodGroups' API
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE = "default"  # the queue vc-scheduler makes at its start, and the benchmark too


@dataclass(frozen=True)
class Scenario:
    """``pods`` pods on ``nodes`` fake nodes, in gangs of ``gang`` pods (1: single-pod
    jobs), or of ``gang`` to ``max_gang`` in steps of ``gang`` (drawn with a fixed seed,
    the last gang cut to what is left); spread over ``queues`` weighted queues (0: each
    scheduler's default queue). ``restart``: the pods are created while the scheduler is
    down (killed), and the times count from the new one's start."""

    name: str
    nodes: int
    pods: int
    gang: int
    max_gang: int = 0
    queues: int = 0
    restart: bool = False

    def __post_init__(self) -> None:
        for field, value in (("nodes", self.nodes), ("pods", self.pods), ("gang", self.gang)):
            if value < 1:
                raise ValueError(f"scenario {self.name}: {field} must be positive, not {value}")
        if self.pods % self.gang:
            raise ValueError(
                f"scenario {self.name}: pods ({self.pods}) must be a multiple of the gang "
                f"size {self.gang}"
            )
        if self.max_gang and (self.max_gang < self.gang or self.max_gang % self.gang):
            raise ValueError(
                f"scenario {self.name}: max_gang ({self.max_gang}) must be a multiple of "
                f"gang ({self.gang}), at least it"
            )
        if self.queues < 0:
            raise ValueError(f"scenario {self.name}: queues must be 0 or more, not {self.queues}")

    @cached_property
    def sizes(self) -> tuple[int, ...]:
        """Each gang's size, in gang order; they sum to ``pods``."""
        if not self.max_gang:
            return (self.gang,) * (self.pods // self.gang)
        draw = random.Random(f"kbatch-bench-{self.name}")  # the same gangs every run
        choices = range(self.gang, self.max_gang + 1, self.gang)
        out: list[int] = []
        left = self.pods
        while left:
            out.append(min(draw.choice(choices), left))
            left -= out[-1]
        return tuple(out)

    @cached_property
    def starts(self) -> tuple[int, ...]:
        """Each gang's first pod index."""
        return tuple(itertools.accumulate(self.sizes, initial=0))[:-1]

    @property
    def gangs(self) -> int:
        return len(self.sizes)

    def gang_of(self, pod_index: int) -> int:
        """The gang pod ``pod_index`` belongs to."""
        return bisect.bisect_right(self.starts, pod_index) - 1

    def members(self, gang_index: int) -> range:
        """Gang ``gang_index``'s pod indices."""
        start = self.starts[gang_index]
        return range(start, start + self.sizes[gang_index])

    def queue_of(self, gang_index: int) -> str | None:
        """The queue gang ``gang_index`` waits in (None: the scheduler's default)."""
        return queue_name(gang_index % self.queues) if self.queues else None


# name -> (nodes, pods, gang, max_gang, queues, restart) at full size:
# (a) single-pod jobs; (b) gangs of 10; (c) gangs of 10 to 100 over 10 weighted queues;
# (d) gangs of 10 created while the scheduler is down, then a new one started.
SCENARIOS = {
    "a": (1000, 10000, 1, 0, 0, False),
    "b": (1000, 10000, 10, 0, 0, False),
    "c": (5000, 50000, 10, 100, 10, False),
    "d": (5000, 20000, 10, 0, 0, True),
}


def scenario(name: str, nodes: int | None = None, pods: int | None = None) -> Scenario:
    """Scenario ``name`` at its own size, or at ``nodes`` / ``pods`` where given; with
    ``nodes`` alone the pods scale with the nodes (to a whole number of smallest gangs)."""
    if name not in SCENARIOS:
        raise ValueError(f"--scenario {name!r}: one of {', '.join(sorted(SCENARIOS))}")
    full_nodes, full_pods, gang, max_gang, queues, restart = SCENARIOS[name]
    if nodes is not None and pods is None:
        pods = max(1, round(full_pods * nodes / full_nodes / gang)) * gang
    nodes = full_nodes if nodes is None else nodes
    pods = full_pods if pods is None else pods
    return Scenario(name, nodes, pods, gang, max_gang, queues, restart)


def queue_name(index: int) -> str:
    return f"queue-{index}"


def queue_weight(index: int) -> int:
    """Queue ``index``'s weight: 1 to the number of queues, so every share differs."""
    return index + 1


def queues(spec: Scenario, scheduler: str) -> list[tuple[str, dict[str, Any]]]:
    """The queues of ``spec`` that ``scheduler`` reads, each with the path to POST it to
    (kbatch's and Volcano's Queues; none for kube-scheduler, which has no queues)."""
    if scheduler == "kbatch":
        api, extra = KBATCH_GROUPS, {}
    elif scheduler == "volcano":
        api, extra = VOLCANO_QUEUES, {"reclaimable": True}
    else:
        return []
    return [
        (f"/apis/{api}/queues", {
            "apiVersion": api, "kind": "Queue", "metadata": {"name": queue_name(i)},
            "spec": {"weight": queue_weight(i), **extra},
        })
        for i in range(spec.queues)
    ]  # fmt: skip


def node(index: int) -> dict[str, Any]:
    """Fake node ``index``: KWOK manages it (by its label) and reports it Ready."""
    capacity = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": NODE_PODS}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"kwok-node-{index}",
            "labels": {
                NODE_LABEL: NODE_LABEL_VALUE,
                "kubernetes.io/hostname": f"kwok-node-{index}",
            },
        },
        "status": {"allocatable": dict(capacity), "capacity": dict(capacity)},
    }


def gang_name(index: int) -> str:
    return f"gang-{index}"


def pod_name(index: int) -> str:
    return f"pod-{index}"


def pod_index(name: str) -> int:
    """The index ``pod_name`` made ``name`` of."""
    return int(name.rpartition("-")[2])


def pod(spec: Scenario, index: int, scheduler: str) -> dict[str, Any]:
    """Pod ``index`` of ``spec`` for ``scheduler`` (one of ``SCHEDULERS``)."""
    gang = gang_name(spec.gang_of(index))
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": pod_name(index), "namespace": NAMESPACE, "labels": {GANG_LABEL: gang}},
        "spec": {
            "schedulerName": SCHEDULER_NAMES[scheduler],
            "containers": [
                {
                    "name": "work",
                    "image": "fake",
                    "resources": {"requests": {"cpu": POD_CPU, "memory": POD_MEMORY}},
                }
            ],
        },
    }
    if scheduler == "volcano":  # a group even for one pod: see the module's text
        body["metadata"]["annotations"] = {VOLCANO_GROUP_ANNOTATION: gang}
    elif spec.sizes[spec.gang_of(index)] > 1:
        if scheduler == "kbatch":
            body["metadata"]["annotations"] = {GROUP_NAME_ANNOTATION: gang}
        else:
            body["spec"]["schedulingGroup"] = {"podGroupName": gang}
    return body


def group(spec: Scenario, index: int, scheduler: str) -> tuple[str, dict[str, Any]] | None:
    """Gang ``index``'s group object for ``scheduler`` and the path to POST it to; None
    for single-pod jobs, but Volcano's (it needs a group for every pod)."""
    size, queue = spec.sizes[index], spec.queue_of(index)
    if size == 1 and scheduler != "volcano":
        return None
    meta = {"name": gang_name(index), "namespace": NAMESPACE}
    body: dict[str, Any] = {"kind": "PodGroup", "metadata": meta}
    if scheduler == "kbatch":
        api, body["spec"] = KBATCH_GROUPS, {"minMember": size}
    elif scheduler == "volcano":
        # Pending, as Volcano's controller makes them: its scheduler's enqueue action
        # moves a group to Inqueue, and only then does allocate look at it (its CRD has
        # no status subresource, so the phase holds on create).
        api, body["spec"] = VOLCANO_GROUPS, {"minMember": size, "queue": queue or VOLCANO_QUEUE}
        body["status"] = {"phase": "Pending"}
    else:
        api, body["spec"] = UPSTREAM_GROUPS, {"schedulingPolicy": {"gang": {"minCount": size}}}
    if queue is not None and scheduler == "kbatch":
        body["spec"]["queue"] = queue
    path = f"/apis/{api}/namespaces/{NAMESPACE}/podgroups"
    return path, {"apiVersion": api, **body}
