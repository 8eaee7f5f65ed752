"""Resource vectors: every resource name is a dimension.

Units are the cluster layer's: cpu in millicores, everything else in base
units (bytes, devices, pods). A session's vectors all share one ``Dims``.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

# Below this a difference is rounding noise (vectors hold millicores and bytes).
EPSILON = 1e-6

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"


@dataclass(frozen=True, slots=True)
class Dims:
    """The ordered resource names of one session: cpu, memory, pods, then the rest by name."""

    names: tuple[str, ...]
    index: dict[str, int] = field(compare=False, hash=False, default_factory=dict)

    @staticmethod
    def of(names: Iterable[str]) -> "Dims":
        rest = sorted(set(names) - {CPU, MEMORY, PODS})
        ordered = (CPU, MEMORY, PODS, *rest)
        return Dims(ordered, {name: i for i, name in enumerate(ordered)})

    def __len__(self) -> int:
        return len(self.names)

    def zeros(self) -> np.ndarray:
        return np.zeros(len(self.names))

    def vector(self, amounts: Mapping[str, float]) -> np.ndarray:
        out = self.zeros()
        for name, amount in amounts.items():
            out[self.index[name]] = amount
        return out

    def mapping(self, vector: np.ndarray, keep_zero: bool = False) -> dict[str, float]:
        return {
            name: float(vector[i])
            for i, name in enumerate(self.names)
            if keep_zero or abs(vector[i]) > EPSILON
        }


def room_dims(dims: Dims) -> np.ndarray:
    """True for the dimensions a node's room is checked in when placing, evicting or
    reserving: all but ``pods`` (max pods is a predicate, so a node whose allocatable
    has no pod count takes pods all the same)."""
    return shareable(dims) > 0


def shareable(dims: Dims) -> np.ndarray:
    """1 for the dimensions queues and jobs share (all but ``pods``, a per-node count), else 0."""
    mask = np.ones(len(dims))
    mask[dims.index[PODS]] = 0.0
    return mask


def less_equal(request: np.ndarray, available: np.ndarray) -> bool:
    """True if ``request`` fits in ``available`` in every dimension."""
    return bool(np.all(request <= available + EPSILON))


def fits_rows(request: np.ndarray, available: np.ndarray) -> np.ndarray:
    """For each row of ``available`` (nodes × dims): does ``request`` fit?"""
    return np.all(request <= available + EPSILON, axis=-1)


def rows(vectors: Iterable[np.ndarray], width: int) -> np.ndarray:
    """``vectors`` as a (len × width) matrix, one row each (width 0 and no vectors too)."""
    listed = list(vectors)
    return np.array(listed, dtype=float).reshape(len(listed), width)


def shares(allocated: np.ndarray, total: np.ndarray) -> list[float]:
    """``share(row, total)`` for each row of ``allocated``, worked out at once: the same
    floats (a quotient is a quotient, a maximum a maximum; ``+ 0.0`` makes a -0.0 the
    0.0 that ``share`` starts from). A session asks it of every job at its open."""
    if not len(allocated) or not allocated.shape[1]:
        return [0.0] * len(allocated)
    counted = total > EPSILON
    ratios = np.where(
        counted, allocated / np.where(counted, total, 1.0), np.where(allocated > EPSILON, 1.0, 0.0)
    )
    result: list[float] = (np.maximum(ratios.max(axis=1), 0.0) + 0.0).tolist()
    return result


def share(allocated: np.ndarray, total: np.ndarray) -> float:
    """Dominant share: the largest allocated/total over the dimensions that have a total.

    A dimension with nothing in ``total`` counts 1 if anything is allocated in it
    and is ignored otherwise (kube-batch's helpers.Share).
    """
    result = 0.0
    for used, whole in zip(allocated.tolist(), total.tolist(), strict=True):
        if whole > EPSILON:
            result = max(result, used / whole)
        elif used > EPSILON:
            result = max(result, 1.0)
    return result
