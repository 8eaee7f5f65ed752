"""Random gangs for the property tests that run the simulator: nodes, weighted queues,
two priority classes, and gangs of random sizes, minimums, runtimes and arrivals; and,
asked for, where their pods may go (node labels and taints, node selectors and
tolerations)."""

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from kbatch.sim import manifests

Obj = dict[str, Any]
GROUPS = "scheduling.incubator.k8s.io/v1alpha1"
GROUP_NAME = "scheduling.k8s.io/group-name"
NODE_CPU = (4, 8)
NODE_PODS = 8
ZONES = ("a", "b")  # a node's; a gang may ask for zone c, which no node is in
RACKS = ("r1", "r2")  # a node's, under RACK; a gang may require one (the conf's level)
RACK = "kbatch.io/rack"
TOPOLOGY = f"\ntopology:\n  levels: [{RACK}]\n"  # (for a conf: the level gangs require)
ONE_RACK = "one"
DEDICATED = {"key": "dedicated", "value": "batch", "effect": "NoSchedule"}


@dataclass(frozen=True)
class Place:
    """Where a node is (its zone, its taint) or where a gang's pods may go."""

    zone: str | None = None  # a node's zone; a gang's node selector (None: any)
    dedicated: bool = False  # a node tainted DEDICATED; a gang tolerating it
    spread: bool = False  # a gang's pods asking for host port 80: one a node
    rack: str | None = None  # a node's rack; a gang's ONE_RACK: it requires one
    # a gang's pods spread over the zones (topologySpreadConstraints: maxSkew 1, its own
    # pods counted): a node without a zone takes none
    zone_spread: bool = False

    def takes(self, gang: "Place") -> bool:
        """Does a node here take pods of a gang that asks for ``gang``?"""
        zone = gang.zone is None or gang.zone == self.zone
        return zone and (gang.dedicated or not self.dedicated)


@dataclass(frozen=True)
class Workload:
    docs: list[Obj]
    node_cpus: list[int]
    gangs: list[tuple[int, int]]  # each gang's size and cpu per pod, in order (g0, g1, ...)
    node_places: list[Place]
    gang_places: list[Place]

    def fits_empty(self, gang: int) -> bool:
        """Can gang ``gang``'s pods all run at once on the empty nodes it may go on?"""
        size, cpu = self.gangs[gang]
        wanted = self.gang_places[gang]
        most = 1 if wanted.spread else NODE_PODS
        holds = [
            (min(free // cpu, most) if place.takes(wanted) else 0, place.rack)
            for free, place in zip(self.node_cpus, self.node_places, strict=True)
        ]
        if wanted.zone_spread:
            return self._spread_holds(wanted, [n for n, _ in holds]) >= size
        if wanted.rack is None:
            return sum(count for count, _ in holds) >= size
        return any(sum(n for n, r in holds if r == rack) >= size for rack in RACKS)

    def _spread_holds(self, wanted: "Place", holds: list[int]) -> int:
        """The most pods spread over the zones with a skew of 1 hold: the domains are the
        zones of the nodes its node selector lets count (taints do not matter: the
        default nodeTaintsPolicy), none more than one above the emptiest."""
        rooms: dict[str, int] = {}
        for count, place in zip(holds, self.node_places, strict=True):
            if place.zone is not None and wanted.zone in (None, place.zone):
                rooms[place.zone] = rooms.get(place.zone, 0) + count
        least = min(rooms.values(), default=0)
        return sum(min(room, least + 1) for room in rooms.values())


def node(name: str, cpu: int, place: Place = Place()) -> Obj:
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {
            "allocatable": {"cpu": str(cpu), "memory": "32Gi", "pods": str(NODE_PODS)},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    labels = {"zone": place.zone, RACK: place.rack}
    if place.zone is not None or place.rack is not None:
        obj["metadata"]["labels"] = {k: v for k, v in labels.items() if v is not None}
    if place.dedicated:
        obj["spec"] = {"taints": [DEDICATED]}
    return obj


def priority_class(name: str, value: int) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def pod_spec(
    cpu: int,
    priority: str | None,
    deadline: int | None = None,
    place: Place = Place(),
    gang: str = "",
) -> Obj:
    spec: Obj = {
        "schedulerName": "kbatch",
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {"requests": {"cpu": str(cpu), "memory": "1Gi"}},
            }
        ],
    }
    if priority is not None:
        spec["priorityClassName"] = priority
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    if place.zone is not None:
        spec["nodeSelector"] = {"zone": place.zone}
    if place.dedicated:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
    if place.spread:
        spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    if place.zone_spread:
        selector = {"matchLabels": {"gang": gang}}
        spec["topologySpreadConstraints"] = [
            {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": selector}
        ]  # fmt: skip
    return spec


IGNORE_EVICTIONS = {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}


def job(
    name: str,
    size: int,
    cpu: int,
    priority: str | None,
    annotations: Obj,
    pod_annotations: Obj,
    place: Place = Place(),
) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "parallelism": size,
            "completions": size,
            # kbatch's evictions are not the Job's failures (as the docs advise): every gang
            # that fits runs to its end however often it is evicted
            "podFailurePolicy": {"rules": [IGNORE_EVICTIONS]},
            "template": {
                "metadata": {"annotations": pod_annotations, "labels": {"gang": name}},
                "spec": {
                    **pod_spec(cpu, priority, place=place, gang=name),
                    "restartPolicy": "Never",
                },
            },
        },
    }


@st.composite
def places(draw: st.DrawFn, zones: tuple[str, ...], gang: bool = False) -> Place:
    """A node's place (``gang`` False), or where a gang's pods may go."""
    zone = draw(st.one_of(st.none(), st.sampled_from(zones)))
    spread = gang and draw(st.booleans())
    rack = (ONE_RACK if draw(st.booleans()) else None) if gang else draw(st.sampled_from(RACKS))
    zone_spread = gang and rack is None and draw(st.booleans())
    return Place(zone, draw(st.booleans()), spread, rack, zone_spread)


@st.composite
def workloads(
    draw: st.DrawFn,
    jobs: bool = False,
    arrive_by: int = 60,
    deadlines: bool = False,
    placed: bool = False,
    slack: bool = False,
) -> Workload:
    """Nodes of 4 or 8 cpu, queues q0.. of weights 1-4, and gangs of 1-5 pods of 1-4 cpu
    (each fits the smallest node), arriving by ``arrive_by`` s and running 5-200 s; as
    PodGroups with bare pods, or (``jobs``) with a batch/v1 Job each; ``deadlines``: each
    bare pod's activeDeadlineSeconds its runtime (a runtime known ahead), or with
    ``slack`` up to a minute more (a walltime, as users overestimate it); ``placed``:
    nodes in zones ``ZONES`` or none, in racks ``RACKS``, some tainted ``DEDICATED``, and
    gangs asking for a zone (c: none is there), tolerating the taint, a host port, one
    rack (a conf with ``TOPOLOGY``), or to be spread over the zones, or not."""
    node_cpus = draw(st.lists(st.sampled_from(NODE_CPU), min_size=1, max_size=3))
    node_places = [draw(places(ZONES)) if placed else Place() for _ in node_cpus]
    docs: list[Obj] = [
        node(f"n{i}", cpu, place)
        for i, (cpu, place) in enumerate(zip(node_cpus, node_places, strict=True))
    ]
    docs += [priority_class("low", 10), priority_class("high", 1000)]
    queues = draw(st.integers(1, 3))
    for q in range(queues):
        weight = draw(st.integers(1, 4))
        docs.append(
            {"apiVersion": GROUPS, "kind": "Queue", "metadata": {"name": f"q{q}"},
             "spec": {"weight": weight}}
        )  # fmt: skip
    gangs: list[tuple[int, int]] = []
    gang_places: list[Place] = []
    for g in range(draw(st.integers(1, 8))):
        size = draw(st.integers(1, 5))
        place = draw(places((*ZONES, "c"), gang=True)) if placed else Place()
        gang_places.append(place)
        minimums = st.one_of(st.just(size), st.integers(1, size))  # whole gangs, often
        cpu = draw(st.integers(1, min(node_cpus)))
        gangs.append((size, cpu))
        priority = draw(st.sampled_from([None, "low", "high"]))
        annotations = {manifests.SUBMIT_AT: f"{draw(st.integers(0, arrive_by))}s"}
        group = {
            "apiVersion": GROUPS,
            "kind": "PodGroup",
            "metadata": {"name": f"g{g}", "namespace": "default", "annotations": annotations},
            "spec": {"minMember": draw(minimums), "queue": f"q{g % queues}"},
        }
        if priority is not None:
            group["spec"]["priorityClassName"] = priority
        if place.rack is not None:
            required = {"kbatch.io/topology-required": RACK}
            group["metadata"]["annotations"] = {**annotations, **required}
        docs.append(group)
        runtime = draw(st.integers(5, 200))
        pod_annotations = {GROUP_NAME: f"g{g}", manifests.DURATION: f"{runtime}s"}
        if jobs:
            docs.append(job(f"g{g}", size, cpu, priority, {**annotations}, pod_annotations, place))
            continue
        for k in range(size):
            metadata = {
                "name": f"g{g}-{k}",
                "namespace": "default",
                "annotations": {**annotations, **pod_annotations},
                "labels": {"gang": f"g{g}"},
            }
            deadline = runtime + (draw(st.integers(0, 60)) if slack else 0)
            spec = pod_spec(cpu, priority, deadline if deadlines else None, place, f"g{g}")
            docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec})
    return Workload(docs, node_cpus, gangs, node_places, gang_places)
