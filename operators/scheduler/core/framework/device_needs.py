"""What a pending pod's resource claims (Dynamic Resource Allocation) ask of the node it
goes to, as kube-scheduler's DynamicResources plugin has it: worked out by the cluster
layer from its ResourceClaims, the DeviceClasses and the ResourceSlices
(``kbatch.cluster.devices``, which evaluates the CEL selectors, so that here each request
is the devices it may have) and read by the predicates plugin (``plugins.device_checks``).

A claim allocated already pins its pods to the nodes of its allocation's node selector;
a claim not yet allocated fits a node where the devices reached from it that no claim
holds satisfy each of its requests (``allocate``: the same choice for the plugin and
for the bind that writes the allocation).
"""

from collections import Counter
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from kbatch.operators.scheduler.core.framework.info import TaskInfo
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate
from kbatch.operators.scheduler.core.framework.volume_needs import Terms, matches_node

# kube-scheduler's words (its DynamicResources plugin's), so that a user reads what the
# Kubernetes documentation and forums say about them.
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_ON_NODE = "resourceclaim not available on the node"

# A device's reach: the node it is local to (its name), the nodes a selector selects, or
# every node (None).
Reach = str | Terms | None


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """One request of a claim not yet allocated: ``count`` of ``candidates`` (the device
    ids, driver/pool/device, its class and selectors select, in their slices' order),
    or with ``count`` 0 every candidate on the node (allocation mode All). An
    ``admin`` request (adminAccess) may have devices others hold, and holds none. The
    requests of one ``constraint`` (a claim's matchAttribute: 'claim#index') get devices
    of one value of its attribute: each candidate's is in ``values`` (in their order)."""

    claim: str  # namespace/name
    request: str
    candidates: tuple[str, ...]
    count: int = 1
    admin: bool = False
    constraint: str = ""
    values: tuple[str, ...] = ()

    def __hash__(self) -> int:
        return hash((self.claim, self.request, len(self.candidates), self.count, self.constraint))


@dataclass(frozen=True, slots=True)
class DeviceNeeds:
    """A pending pod's claims, as they stand: ``waiting``, when set, is why no node takes
    it now (a claim not made yet, not found, being deleted, or a request kbatch cannot
    allocate); else the node must match each of ``allocated`` (the node selectors of its
    claims allocated already, as claim -> terms) and allocate ``requests``."""

    waiting: str = ""
    allocated: tuple[tuple[str, Terms], ...] = ()
    requests: tuple[DeviceRequest, ...] = ()

    @property
    def claims(self) -> tuple[str, ...]:
        """The claims it allocates (each once)."""
        return tuple(dict.fromkeys(r.claim for r in self.requests))


@dataclass(frozen=True, slots=True)
class NodeDevices:
    """The devices of the ResourceSlices (their pools' newest generation) by id, each with
    its reach, and those some claim holds (allocated, or being allocated by a bind of
    ours that the watch does not show yet)."""

    reach: Mapping[str, Reach] = field(default_factory=dict)
    taken: frozenset[str] = frozenset()


Allocation = dict[tuple[str, str], tuple[str, ...]]  # (claim, request) -> device ids


def allocate(
    requests: tuple[DeviceRequest, ...],
    reached: Callable[[str], bool],
    taken: AbstractSet[str],
) -> Allocation | None:
    """The devices each of ``requests`` gets on a node (``reached``: is a device reached
    from it?), none of ``taken`` (but for an admin request) nor one twice: the first
    candidates in order, the requests of a constraint first, of the first value of its
    attribute that gives them all theirs (kube-scheduler's allocator backtracks further;
    the candidates of one pod's requests seldom overlap). None when a request cannot be
    satisfied."""
    chosen: Allocation = {}
    used: set[str] = set()
    groups: dict[str, list[DeviceRequest]] = {}
    for request in requests:
        groups.setdefault(request.constraint, []).append(request)
    for constraint, group in sorted(groups.items(), key=lambda item: not item[0]):
        values = [""]
        if constraint:
            values = list(dict.fromkeys(v for r in group for v in r.values))
        for value in values:
            found = _allocate_all(group, value, reached, taken, used)
            if found is not None:
                break
        else:
            return None
        for request, picked in zip(group, found, strict=True):
            chosen[(request.claim, request.request)] = picked
            if not request.admin:
                used.update(picked)
    return {(r.claim, r.request): chosen[(r.claim, r.request)] for r in requests}


def _allocate_all(
    requests: list[DeviceRequest],
    value: str,
    reached: Callable[[str], bool],
    taken: AbstractSet[str],
    used: set[str],
) -> list[tuple[str, ...]] | None:
    """Each of ``requests``' devices (those of ``value``, if given), none of ``used``."""
    found: list[tuple[str, ...]] = []
    mine: set[str] = set()
    for request in requests:
        candidates = request.candidates
        if value:
            candidates = tuple(
                d for d, v in zip(candidates, request.values, strict=True) if v == value
            )
        here = [d for d in candidates if reached(d) and d not in used and d not in mine]
        free = here if request.admin else [d for d in here if d not in taken]
        if request.count == 0:  # (All: every device here, none held; at least one)
            if not here or len(free) != len(here):
                return None
            picked = free
        elif len(free) < request.count:
            return None
        else:
            picked = free[: request.count]
        found.append(tuple(picked))
        if not request.admin:
            mine.update(picked)
    return found


class PlannedDevices:
    """The devices a plan's tasks allocate (the reserve action's: where a gang would go
    once the nodes drain), as their binds would: a task planned on a node takes devices
    reached from it that neither a claim holds nor a task planned before it took, and a
    task sharing a claim planned before goes to that claim's node; so a gang wanting
    more of a node's devices than it has keeps no node for ever."""

    def __init__(self, devices: NodeDevices | None) -> None:
        self._devices = devices or NodeDevices()
        self._taken: set[str] = set(self._devices.taken)
        self._claims: dict[str, str] = {}  # claim -> the node it is planned on

    def node_for(self, task: TaskInfo, index: Mapping[str, int]) -> int | None:
        """The node a claim of ``task`` is planned on (None: none)."""
        needs = task.template.devices
        for request in needs.requests if needs is not None else ():
            node = self._claims.get(request.claim)
            if node is not None:
                return index.get(node)
        return None

    def take(self, task: TaskInfo, node: str, labels: dict[str, str]) -> bool:
        """Plan ``task`` on the node named ``node`` (with ``labels``): True, its claims'
        devices taken there; False (nothing planned) when they cannot all be had."""
        needs = task.template.devices
        if needs is None or not needs.requests:
            return True
        if any(self._claims.get(r.claim, node) != node for r in needs.requests):
            return False
        requests = tuple(r for r in needs.requests if r.claim not in self._claims)

        def reached(device: str) -> bool:
            where = self._devices.reach.get(device)
            if isinstance(where, str):
                return where == node
            return where is None or matches_node(where, node, labels)

        chosen = allocate(requests, reached, self._taken)
        if chosen is None:
            return False
        admin = {(r.claim, r.request) for r in requests if r.admin}
        for (claim, request), picked in chosen.items():
            self._claims[claim] = node
            if (claim, request) not in admin:
                self._taken.update(picked)
        return True


def too_few_devices(templates: list[PodTemplate], min_member: int) -> str | None:
    """Why ``min_member`` of the pods of ``templates`` (one per pod) can never have their
    claims allocated at once, even on the empty cluster: the requests of one kind (those
    selecting the very same devices) of the pods that ask least of it want more of those
    devices than there are (a claim pods share is left out: counted once, not per pod).
    None when nothing tells so (a sound check, for ``node_fit``)."""
    shared = Counter(
        claim for template in templates if template.devices for claim in template.devices.claims
    )
    wants: dict[tuple[str, ...], list[int]] = {}  # candidates -> each pod's want of them
    for template in templates:
        mine: dict[tuple[str, ...], int] = {}
        for request in template.devices.requests if template.devices else ():
            if shared[request.claim] == 1 and not request.admin:
                mine[request.candidates] = mine.get(request.candidates, 0) + max(request.count, 1)
        for candidates, count in mine.items():
            wants.setdefault(candidates, []).append(count)
    for candidates, counts in wants.items():
        if len(counts) < min_member:
            continue
        least = sum(sorted(counts)[:min_member])
        if least > len(candidates):
            return (
                f"{CANNOT_ALLOCATE}: {min_member} of its pods want {least} devices of the "
                f"{len(candidates)} their claims' requests select, even all free"
            )
    return None
