"""Where a pod's resource claims let it go, and what its bind must write first: the part
of kube-scheduler's DynamicResources plugin (structured parameters, resource.k8s.io/v1)
that kbatch does (DESIGN §15).

For each pending pod of ours with ``spec.resourceClaims`` (``PodRecord.device_claims``),
a snapshot gives its ``DeviceNeeds`` (read by the predicates plugin):

- a claim made from a template that the resourceclaim controller has not made yet, a
  claim not found or being deleted, a request of a DeviceClass not found, a request
  with ``firstAvailable`` subrequests (which kbatch does not allocate yet), or a CEL
  selector that fails on a device: the pod waits, every node failing for that reason;
- a claim allocated: the node must match its allocation's node selector;
- a claim not allocated: each request is the devices of the ResourceSlices (each
  pool's newest generation) that its class's and its own selectors select
  (``device_match``); the plugin finds where enough of them, not held by a claim, are
  reached (``plugins.device_checks``); the requests of a ``matchAttribute`` constraint
  get devices of one value of its attribute (those without it are left out).

When such a pod is bound (``bind_writes``), each claim not allocated is allocated on
its node, as the plugin chose (``device_needs.allocate``), and every claim reserved for
the pod: written to the claim's status before the Binding, as kube-scheduler's PreBind.
The devices chosen are held (``assume``) until the watch shows the claim allocated.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from kbatch.cluster.device_match import DeviceContexts, SelectorError
from kbatch.cluster.dra_records import (
    DeviceClassRecord,
    DeviceRecord,
    DeviceRequestRecord,
    ResourceClaimRecord,
    ResourceSliceRecord,
)
from kbatch.cluster.pod_records import PodRecord
from kbatch.cluster.template_copies import TemplateCopies
from kbatch.operators.scheduler.core.framework.device_needs import (
    DeviceNeeds,
    DeviceRequest,
    NodeDevices,
    Reach,
    allocate,
)
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from kbatch.operators.scheduler.core.framework.podspec import (
    NodeSelectorTerm,
    Operator,
    Requirement,
)
from kbatch.operators.scheduler.core.framework.volume_needs import (
    NODE_NAME_FIELD,
    Terms,
    matches_node,
)

KINDS = frozenset({"ResourceClaim", "DeviceClass", "ResourceSlice"})

Records = Mapping[str, Mapping[str, object]]  # (a state's parsed records, by kind and key)


@dataclass(frozen=True, slots=True)
class ClaimWrite:
    """What a bind writes first to one of its pod's claims: its allocation (``results``
    as (request, driver, pool, device), and the node it was made on; none when it is
    allocated already) and the pod among those it is reserved for."""

    claim: ResourceClaimRecord
    node: str
    results: tuple[tuple[str, str, str, str], ...] = ()
    pinned: bool = True  # (its devices are not all reached from every node: on ``node``)


def allocation_of(write: ClaimWrite) -> dict[str, Any]:
    """``status.allocation`` of ``write``: its devices, and where they are reached from (the
    node's name as kube-scheduler selects it, unless every node reaches them)."""
    results = [
        {"request": request, "driver": driver, "pool": pool, "device": device}
        for request, driver, pool, device in write.results
    ]
    allocation: dict[str, Any] = {"devices": {"results": results}}
    if write.pinned:
        field = {"key": "metadata.name", "operator": "In", "values": [write.node]}
        allocation["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [field]}]}
    return allocation


class NoDevice(Exception):
    """A claim of the pod cannot be allocated on the node (any longer)."""


class DeviceIndex:
    """Our pending pods with resource claims, by key, and their ``DeviceNeeds`` (worked
    out again only once one of them, a claim, a class or a slice is written), which a
    snapshot's tasks of them carry on their templates (``mark``)."""

    def __init__(self) -> None:
        self._pods: dict[str, PodRecord] = {}
        self._needs: dict[str, DeviceNeeds] | None = {}
        self._made: NodeDevices | None = None
        self._devices: Devices | None = None
        self._templates = TemplateCopies("devices")  # (the tasks' templates with needs)
        # Claims binds allocated (their status sent) that the watch does not show so
        # yet: claim key -> (devices, node), held for the next sessions and binds.
        self.assumed: dict[str, tuple[tuple[str, ...], str]] = {}

    def applied(self, key: str, pod: PodRecord | None, ours: bool) -> None:
        """The pod at ``key`` is now ``pod`` (None: gone); ``ours``: of our schedulers."""
        if pod is not None and ours and pod.device_claims and pod.task_status is TaskStatus.PENDING:
            self._pods[key] = pod
            self._needs = None
        elif self._pods.pop(key, None) is not None:
            self._needs = None

    def written(self, kind: str, key: str, parsed: object) -> None:
        """The object of ``kind`` at ``key`` is now ``parsed`` (None: dropped)."""
        if kind not in KINDS:
            return
        shown = not isinstance(parsed, ResourceClaimRecord) or parsed.allocated
        if kind == "ResourceClaim" and key in self.assumed and shown:
            del self.assumed[key]
        if kind != "ResourceClaim":
            self._devices = None
        self._made = None
        self._needs = None

    def of_state(self, parsed: Records) -> tuple[Mapping[str, DeviceNeeds], NodeDevices | None]:
        """The needs of our pending pods and the devices (None while no pod has claims)."""
        if not self._pods:
            return {}, None
        devices = self.devices(parsed)
        if self._made is None:
            claims: Mapping[str, ResourceClaimRecord] = parsed["ResourceClaim"]  # type: ignore[assignment]
            self._made = NodeDevices(devices.reach, frozenset(self.taken(claims)))
        if self._needs is None:
            claims = parsed["ResourceClaim"]  # type: ignore[assignment]
            self._needs = {
                key: needs_of(pod, claims, devices, self.assumed) for key, pod in self._pods.items()
            }
        return self._needs, self._made

    def devices(self, parsed: Records) -> "Devices":
        if self._devices is None:
            self._devices = Devices(
                parsed["ResourceSlice"].values(),  # type: ignore[arg-type]
                parsed["DeviceClass"],  # type: ignore[arg-type]
            )
        return self._devices

    def taken(self, claims: Mapping[str, ResourceClaimRecord]) -> set[str]:
        """The devices claims hold (but by admin access), those assumed among them."""
        held = {
            device.id
            for claim in claims.values()
            for device in claim.devices
            if not device.admin_access
        }
        for devices, _ in self.assumed.values():
            held.update(devices)
        return held

    def assume(self, writes: list[ClaimWrite], admin: set[tuple[str, str]]) -> None:
        """The claims ``writes`` allocate hold their devices from now on (but those of
        ``admin`` requests), until the watch shows them allocated."""
        for write in writes:
            if write.results:
                key = f"{write.claim.namespace}/{write.claim.name}"
                held = tuple(
                    f"{d}/{p}/{n}" for r, d, p, n in write.results if (key, r) not in admin
                )
                self.assumed[key] = (held, write.node)
        self._made = None
        self._needs = None

    def forget(self, write: ClaimWrite) -> None:
        """``write`` was not made: its devices are free again."""
        self.assumed.pop(f"{write.claim.namespace}/{write.claim.name}", None)
        self._made = None
        self._needs = None

    def mark(
        self, snapshot: Snapshot, found: tuple[Mapping[str, DeviceNeeds], NodeDevices | None]
    ) -> None:
        """Give the tasks of ``snapshot`` of the pods of ``found``'s needs templates that
        carry them (pods of one template with other claims are placed apart), and the
        snapshot the devices."""
        needs, snapshot.node_devices = found
        self._templates.mark(snapshot, self._pods, needs)


class Devices:
    """The devices of the slices (each pool's newest generation), by id with their reach,
    and the candidates of each request's class and selectors (worked out once)."""

    def __init__(
        self, slices: Iterable[ResourceSliceRecord], classes: Mapping[str, DeviceClassRecord]
    ) -> None:
        newest: dict[tuple[str, str], int] = {}
        kept = list(slices)
        for item in kept:
            pool = (item.driver, item.pool)
            newest[pool] = max(newest.get(pool, item.generation), item.generation)
        self.classes = classes
        self.reach: dict[str, Reach] = {}
        self.records: dict[str, DeviceRecord] = {}
        self._of: list[tuple[str, str, DeviceRecord]] = []  # (id, driver, device)
        for item in sorted(kept, key=lambda s: s.name):
            if item.generation != newest[(item.driver, item.pool)]:
                continue
            where: Reach = item.node_name or (None if item.all_nodes else item.node_terms)
            for device in item.devices:
                device_id = f"{item.driver}/{item.pool}/{device.name}"
                self.reach[device_id] = where
                self._of.append((device_id, item.driver, device))
                self.records[device_id] = device
        self._contexts = DeviceContexts()
        self._candidates: dict[tuple[str, tuple[str, ...]], tuple[str, ...] | str] = {}

    def candidates(self, request: DeviceRequestRecord) -> tuple[str, ...] | str:
        """The ids of the devices ``request`` may have, or why it cannot have any."""
        key = (request.device_class, request.selectors)
        found = self._candidates.get(key)
        if found is None:
            found = self._candidates[key] = self._select(request)
        return found

    def matching(self, request: DeviceRequest, constraint: str, attribute: str) -> DeviceRequest:
        """``request`` of the matchAttribute ``constraint`` on ``attribute`` (qualified):
        its candidates that have the attribute, each with its value."""
        kept = [
            (device, value)
            for device in request.candidates
            if (value := self.records[device].attributes.get(attribute)) is not None
        ]
        candidates = tuple(device for device, _ in kept)
        values = tuple(f"{type(value).__name__}:{value}" for _, value in kept)
        return replace(request, candidates=candidates, constraint=constraint, values=values)

    def _select(self, request: DeviceRequestRecord) -> tuple[str, ...] | str:
        device_class = self.classes.get(request.device_class)
        if device_class is None:
            return f'deviceclass.resource.k8s.io "{request.device_class}" not found'
        expressions = device_class.selectors + request.selectors
        try:
            return tuple(
                device_id
                for device_id, driver, device in self._of
                if self._contexts.selects(driver, device, expressions)
            )
        except SelectorError as exc:
            return str(exc)


def needs_of(
    pod: PodRecord,
    claims: Mapping[str, ResourceClaimRecord],
    devices: Devices,
    assumed: Mapping[str, tuple[tuple[str, ...], str]] = {},
) -> DeviceNeeds:
    """What ``pod``'s resource claims ask of a node (the module's rules)."""
    allocated = []
    requests: list[DeviceRequest] = []
    for name, claim_name in pod.device_claims:
        if not claim_name:
            return DeviceNeeds(f'waiting for resourceclaim of pod claim "{name}" to be created')
        claim = claims.get(key := f"{pod.namespace}/{claim_name}")
        if claim is None:
            return DeviceNeeds(f'resourceclaim "{claim_name}" not found')
        if claim.deleting:
            return DeviceNeeds(f'resourceclaim "{claim_name}" is being deleted')
        if key in assumed:  # (allocated by a bind of ours, not shown yet)
            allocated.append((key, node_named(assumed[key][1])))
            continue
        if claim.allocated:
            if claim.node_terms is not None:
                allocated.append((key, claim.node_terms))
            continue
        constrained = _constrained(claim)
        if isinstance(constrained, str):
            return DeviceNeeds(f'resourceclaim "{claim_name}": {constrained}')
        for request in claim.requests:
            where = f'resourceclaim "{claim_name}": request "{request.name}"'
            if request.first_available:
                return DeviceNeeds(f"{where}: firstAvailable is not allocated by kbatch")
            found = devices.candidates(request)
            if isinstance(found, str):
                return DeviceNeeds(f"{where}: {found}")
            count = 0 if request.all else request.count
            made = DeviceRequest(key, request.name, found, count, request.admin_access)
            if request.name in constrained:
                index, attribute = constrained[request.name]
                made = devices.matching(made, f"{key}#{index}", attribute)
            requests.append(made)
    return DeviceNeeds("", tuple(allocated), tuple(requests))


def _constrained(claim: ResourceClaimRecord) -> dict[str, tuple[int, str]] | str:
    """Each request a matchAttribute constraint of ``claim`` names (one naming none names
    them all): the constraint's index and attribute; or why kbatch cannot allocate them
    (a request in two constraints)."""
    found: dict[str, tuple[int, str]] = {}
    for index, (names, attribute) in enumerate(claim.constraints):
        for name in names or tuple(r.name for r in claim.requests):
            if name in found:
                return f'request "{name}" is in two constraints, which kbatch does not allocate'
            found[name] = (index, attribute)
    return found


def node_named(node: str) -> Terms:
    """Terms that select the node named ``node``: an allocation of devices local to it
    (kube-scheduler's nodeSelector for them)."""
    return (NodeSelectorTerm(match_fields=(Requirement(NODE_NAME_FIELD, Operator.IN, (node,)),)),)


def bind_writes(
    pod: PodRecord,
    node: str,
    labels: dict[str, str],
    needs: DeviceNeeds,
    claims: Mapping[str, ResourceClaimRecord],
    devices: Devices,
    taken: set[str],
) -> list[ClaimWrite]:
    """What binding ``pod`` to ``node`` writes first: each claim not allocated, allocated
    there (the devices of ``taken`` held by others), and each claim not reserved for the
    pod, reserved. NoDevice when a claim cannot be allocated there."""
    if needs.waiting:
        raise NoDevice(needs.waiting)
    for held, terms in needs.allocated:
        if not matches_node(terms, node, labels):
            raise NoDevice(f'resourceclaim "{held}" is allocated for other nodes than {node}')

    def reached(device: str) -> bool:
        where = devices.reach.get(device)
        if isinstance(where, str):
            return where == node
        return where is None or matches_node(where, node, labels)

    chosen = allocate(needs.requests, reached, taken)
    if chosen is None:
        raise NoDevice(f"cannot allocate all claims on {node}")
    results: dict[str, list[tuple[str, str, str, str]]] = {}
    everywhere: dict[str, bool] = {}
    for (claim_key, request), picked in chosen.items():
        reach = [devices.reach.get(device) for device in picked]
        everywhere[claim_key] = everywhere.get(claim_key, True) and all(r is None for r in reach)
        for device in picked:
            driver, rest = device.split("/", 1)  # (a pool's name may have slashes)
            pool, name = rest.rsplit("/", 1)
            results.setdefault(claim_key, []).append((request, driver, pool, name))
    writes = []
    for _, claim_name in pod.device_claims:
        claim = claims[key := f"{pod.namespace}/{claim_name}"]
        if key in results:
            writes.append(ClaimWrite(claim, node, tuple(results.pop(key)), not everywhere[key]))
        elif pod.uid not in claim.reserved_for:
            writes.append(ClaimWrite(claim, node))
    return writes
