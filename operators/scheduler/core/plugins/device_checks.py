"""What a pending pod's resource claims bar, for the predicates plugin: masks over all
nodes per ``DeviceNeeds``, within one session (kube-scheduler's DynamicResources).

A claim allocated already bars the nodes its allocation's node selector does not
select (``NOT_ON_NODE``). A claim not yet allocated bars the nodes where its requests
cannot be satisfied by the devices reached from them that no claim holds
(``CANNOT_ALLOCATE``). A task placed in the session allocates its claims where it goes,
as its bind will (``device_needs.allocate``, ``kbatch.cluster.devices.bind_writes``):
the devices it takes are held for the tasks placed after it, and a pod sharing one of
its claims must go where that claim's devices are reached; both undone if that
placement is (a gang's statement discarded). So two pods that want a node's only GPU
are not both placed there, and a gang is never bound half for the want of a device. The
placement asks afresh, over all nodes, for pods with claims to allocate
(``placement.Placer``), since a device held changes the answers of every node.
"""

import numpy as np

from kbatch.operators.scheduler.core.framework.device_needs import (
    CANNOT_ALLOCATE,
    NOT_ON_NODE,
    DeviceNeeds,
    DeviceRequest,
    NodeDevices,
    allocate,
)
from kbatch.operators.scheduler.core.framework.info import NO_NODE, TaskInfo
from kbatch.operators.scheduler.core.framework.session import Session
from kbatch.operators.scheduler.core.framework.signatures import Failures
from kbatch.operators.scheduler.core.plugins.node_index import NodeIndex


class DeviceChecks:
    """The masks of what ``DeviceNeeds`` bar (kept while no device is held or freed), the
    devices the session's placed tasks hold, and the claims they allocate, with the
    nodes their devices are reached from."""

    def __init__(self, index: NodeIndex, session: Session) -> None:
        self.index = index
        # Told of placements only once a pod with claims is asked about (before any is
        # placed): a session without one makes no call per placement for them.
        self._session: Session | None = session
        self._devices = session.node_devices or NodeDevices()
        self._nodes = session.nodes.index
        self._reach: dict[str, np.ndarray] = {}
        self._taken: set[str] = set(self._devices.taken)
        self._claims: dict[str, np.ndarray] = {}  # claim -> where its devices are reached
        self._by_task: dict[str, tuple[list[str], list[str]]] = {}  # uid -> (claims, devices)
        self._masks: dict[DeviceNeeds, Failures] = {}

    def failures(self, needs: DeviceNeeds) -> Failures:
        """(reason, mask over all nodes), each node once: while a claim waits, every
        node for that reason alone (as kube-scheduler's PreFilter fails a pod whole)."""
        if self._session is not None:
            self._session.add_event_handler(self.allocated, self.deallocated)
            self._session = None
        found = self._masks.get(needs)
        if found is None:
            size = self.index.size
            if needs.waiting:
                found = [(needs.waiting, np.ones(size, dtype=bool))]
            else:
                elsewhere = np.zeros(size, dtype=bool)
                for _, terms in needs.allocated:
                    elsewhere |= ~self.index.terms_mask(terms)
                for claim in needs.claims:
                    if claim in self._claims:  # (allocated by a task placed before)
                        elsewhere |= ~self._claims[claim]
                short = self._short(self._unallocated(needs)) & ~elsewhere
                found = [
                    (reason, mask)
                    for reason, mask in ((NOT_ON_NODE, elsewhere), (CANNOT_ALLOCATE, short))
                    if mask.any()
                ]
            self._masks[needs] = found
        return found

    def _unallocated(self, needs: DeviceNeeds) -> tuple[DeviceRequest, ...]:
        return tuple(r for r in needs.requests if r.claim not in self._claims)

    def _short(self, requests: tuple[DeviceRequest, ...]) -> np.ndarray:
        """The nodes where ``requests`` cannot all be satisfied: counted over all nodes
        per request, then, for several requests, each node left allocated in turn."""
        size = self.index.size
        short = np.zeros(size, dtype=bool)
        for request in requests:
            free = np.zeros(size, dtype=np.int64)
            held = np.zeros(size, dtype=np.int64)
            for device in request.candidates:
                if request.admin or device not in self._taken:
                    free += self.reach(device)
                else:
                    held += self.reach(device)
            if request.count == 0:
                short |= (free == 0) | (held > 0)
            else:
                short |= free < request.count
        if len(requests) > 1 or any(r.constraint for r in requests):
            for node in np.flatnonzero(~short):
                short[node] = self.allocation_on(int(node), requests) is None
        return short

    def reach(self, device: str) -> np.ndarray:
        """The nodes ``device`` is reached from."""
        found = self._reach.get(device)
        if found is None:
            where = self._devices.reach.get(device)
            if isinstance(where, str):
                found = np.zeros(self.index.size, dtype=bool)
                at = self._nodes.get(where)
                if at is not None:
                    found[at] = True
            elif where is None:
                found = np.ones(self.index.size, dtype=bool)
            else:
                found = self.index.terms_mask(where)
            self._reach[device] = found
        return found

    def allocation_on(
        self, node: int, requests: tuple[DeviceRequest, ...]
    ) -> dict[tuple[str, str], tuple[str, ...]] | None:
        return allocate(requests, lambda device: bool(self.reach(device)[node]), self._taken)

    def allocated(self, task: TaskInfo) -> None:
        """``task`` was placed: it allocates its claims not allocated by a task before it
        on its node, holding their devices."""
        needs = task.template.devices
        if needs is None or needs.waiting or task.node == NO_NODE:
            return
        requests = self._unallocated(needs)
        chosen = self.allocation_on(task.node, requests) if requests else None
        if not chosen:
            return
        claims: dict[str, np.ndarray] = {}
        held: list[str] = []
        admin = {(r.claim, r.request) for r in requests if r.admin}
        for (claim, request), devices in chosen.items():
            where = claims.setdefault(claim, np.ones(self.index.size, dtype=bool))
            for device in devices:
                where &= self.reach(device)
                if (claim, request) not in admin and device not in self._taken:
                    held.append(device)
        self._claims.update(claims)
        self._taken.update(held)
        self._by_task[task.uid] = (list(claims), held)
        self._masks.clear()

    def deallocated(self, task: TaskInfo) -> None:
        """``task``'s placement was undone: the claims it allocated and their devices are
        free again."""
        found = self._by_task.pop(task.uid, None)
        if found is not None:
            claims, held = found
            for claim in claims:
                del self._claims[claim]
            self._taken.difference_update(held)
            self._masks.clear()
