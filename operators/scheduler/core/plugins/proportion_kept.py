"""proportion's deserved shares kept from one session open to the next: water-filling
the cluster between flat queues reads only the cluster's total (its shareable part),
and each queue's weight, request and capability. While those are the same, the shares
and the dimensions the queues ration are the same, and most sessions of a busy
cluster open on the same requests (a bind moves what a queue holds, not what it asks).
Kept on the scheduler's ``KeptAcrossSessions`` (``Session.kept``), never beyond it;
``Shortcuts.deserved_shares`` off: worked out at every open."""

from collections.abc import Mapping

import numpy as np

from kbatch.operators.scheduler.core.framework.kept import KeptAcrossSessions
from kbatch.operators.scheduler.core.framework.shortcuts import Shortcuts

# What the shares are worked out of: the total's bytes, then per queue its name,
# weight, and request and capability as bytes.
SharesKey = tuple[bytes, tuple[tuple[str, int, bytes, bytes], ...]]


class KeptShares:
    """The deserved shares (by queue) and rationed dimensions of the last open, and
    the inputs they were worked out of. Held as copies: a session gets its own."""

    __slots__ = ("deserved", "key", "rationed")

    def __init__(
        self, key: SharesKey, deserved: Mapping[str, np.ndarray], rationed: np.ndarray
    ) -> None:
        self.key = key
        self.deserved = {name: share.copy() for name, share in deserved.items()}
        self.rationed = rationed.copy()

    def given(self) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """A copy of the shares and rationed dimensions, for one session."""
        return {name: share.copy() for name, share in self.deserved.items()}, self.rationed.copy()


def shares_key(
    total: np.ndarray, queues: Mapping[str, tuple[int, np.ndarray, np.ndarray]]
) -> SharesKey:
    """The inputs of water-filling: ``total`` and, by queue, its (weight, request,
    capability), in the queues' order (the order ties are met in)."""
    return (
        np.asarray(total, dtype=float).tobytes(),
        tuple(
            (name, weight, request.tobytes(), np.asarray(capability, dtype=float).tobytes())
            for name, (weight, request, capability) in queues.items()
        ),
    )


def kept_shares(
    kept: KeptAcrossSessions, key: SharesKey, shortcuts: Shortcuts
) -> tuple[dict[str, np.ndarray], np.ndarray] | None:
    """The shares and rationed dimensions kept for ``key`` (copies), or None: work them
    out (always, with ``Shortcuts.deserved_shares`` off)."""
    if not shortcuts.deserved_shares:
        kept.drop(KeptShares)
        return None
    found = kept.get(KeptShares)
    if found is None or found.key != key:
        return None
    return found.given()


def keep_shares(
    kept: KeptAcrossSessions,
    key: SharesKey,
    deserved: Mapping[str, np.ndarray],
    rationed: np.ndarray,
    shortcuts: Shortcuts,
) -> None:
    """Keep the shares just worked out for ``key`` for the next open."""
    if shortcuts.deserved_shares:
        kept.put(KeptShares(key, deserved, rationed))
