"""How many volumes of each CSI driver the nodes attach, against their CSINodes' limits,
within one session (kube-scheduler's NodeVolumeLimits), for ``plugins.volume_checks``.

Made from the snapshot's ``NodeVolumes`` (the volumes the pods on nodes attach) once a
pod that attaches a volume of a limited driver is asked about; the tasks placed in the
session attach theirs too (``place``), undone with their placement (``unplace``). A
volume several pods on a node use counts once: a node fails a pod where its volumes of
a driver not attached there yet would take it past its limit.
"""

from collections.abc import Mapping

import numpy as np

from kbatch.operators.scheduler.core.framework.volume_needs import NodeVolumes

Attaches = tuple[tuple[str, str], ...]  # (driver, volume), as ``VolumeNeeds.attaches``


class AttachCounts:
    """Per driver some node limits: each node's limit (inf: none) and how many distinct
    volumes of it are attached; and per volume, the nodes it is attached to, with how
    many holders (the snapshot's pods, as one, and each task placed since)."""

    def __init__(self, use: NodeVolumes, index: Mapping[str, int], size: int) -> None:
        self.size = size
        self._limit: dict[str, np.ndarray] = {}
        self._count: dict[str, np.ndarray] = {}
        self._on: dict[str, dict[int, int]] = {}
        for node, limits in use.limits.items():
            at = index.get(node)
            if at is None:
                continue
            for driver, limit in limits.items():
                if driver not in self._limit:
                    self._limit[driver] = np.full(size, np.inf)
                    self._count[driver] = np.zeros(size, dtype=np.int64)
                self._limit[driver][at] = limit
        for node, drivers in use.attached.items():
            at = index.get(node)
            if at is None:
                continue
            for driver, volumes in drivers.items():
                for volume in volumes if driver in self._limit else ():
                    self._hold(driver, volume, at, 1)

    def over(self, attaches: Attaches) -> np.ndarray:
        """The nodes where ``attaches`` (a pod's) would take a driver past its limit."""
        over = np.zeros(self.size, dtype=bool)
        by_driver: dict[str, list[str]] = {}
        for driver, volume in attaches:
            by_driver.setdefault(driver, []).append(volume)
        for driver, volumes in by_driver.items():
            limit = self._limit.get(driver)
            if limit is None:
                continue
            new = np.full(self.size, len(volumes), dtype=np.int64)
            for volume in volumes:
                for node in self._on.get(volume, ()):
                    new[node] -= 1  # (attached there already)
            over |= self._count[driver] + new > limit
        return over

    def place(self, attaches: Attaches, node: int) -> None:
        """A task that attaches ``attaches`` was placed on ``node``."""
        for driver, volume in attaches:
            if driver in self._limit:
                self._hold(driver, volume, node, 1)

    def unplace(self, attaches: Attaches, node: int) -> None:
        """That placement was undone."""
        for driver, volume in attaches:
            if driver in self._limit:
                self._hold(driver, volume, node, -1)

    def _hold(self, driver: str, volume: str, node: int, sign: int) -> None:
        on = self._on.setdefault(volume, {})
        holders = on.get(node, 0) + sign
        if holders > 0:
            on[node] = holders
        else:
            del on[node]
        if holders == 0 or (holders == 1 and sign > 0):
            self._count[driver][node] += sign  # (the first holder there, or the last)
