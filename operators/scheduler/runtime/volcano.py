"""Volcano's PodGroups and Queues (``scheduling.volcano.sh/v1beta1``) in the live
runtime, where the server serves them (Volcano's CRDs installed).

``VolcanoObjects`` is what their informers apply to: each Volcano object goes into the
ClusterState as the kbatch object ``kbatch.cluster.volcano.kbatch_object`` makes of it
(marked with its origin), so the scheduler sees ordinary PodGroups and Queues; the
status writer writes their status back in Volcano's fields
(``runtime.status_writer``). A kbatch object of the same kind and name is scheduled
instead, and the Volcano one refused naming ``metadata.name`` until written again.
"""

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from kbatch.cluster import fields, records, volcano
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.state import ClusterState

# The informers' kinds (one per collection), and the kbatch kind each becomes.
KINDS = {"VolcanoPodGroup": "PodGroup", "VolcanoQueue": "Queue"}


def _key(kind: str, obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    namespace = str(meta.get("namespace") or "default") if kind == "PodGroup" else ""
    return namespace, str(meta.get("name") or "")


class VolcanoObjects:
    """Volcano PodGroups and Queues as kbatch's in ``state`` (an informer's store)."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._lock = threading.Lock()
        self._seen: dict[str, set[tuple[str, str]]] = {kind: set() for kind in KINDS.values()}

    def apply(self, obj: Mapping[str, Any], owned: bool = False) -> None:
        """Put the Volcano object ``obj`` in the state as kbatch's; ObjectError (and the
        state unchanged) when it cannot be scheduled as one."""
        kind = KINDS.get(str(obj.get("kind")), str(obj.get("kind")))
        given = {**(obj if owned else fields.copied(dict(obj))), "kind": kind}
        given["apiVersion"] = volcano.API_VERSION
        key = _key(kind, given)
        with self._lock:
            held = self.state.get(kind, *key)
            if held is not None and volcano.origin_of(held) is None:
                why = f"a kbatch {kind} of this name is scheduled instead"
                raise ObjectError(records.ref_of(given), "metadata.name", why)
            made, _ = volcano.kbatch_object(given)
            self.state.apply(made, owned=True)
            self._seen[kind].add(key)

    def delete(self, kind: str, namespace: str, name: str) -> None:
        kind = KINDS.get(kind, kind)
        key = (namespace or "default", name) if kind == "PodGroup" else ("", name)
        with self._lock:
            self._seen[kind].discard(key)
            if volcano.origin_of(self.state.get(kind, *key)) is not None:
                self.state.delete(kind, *key)

    def replace(
        self, kind: str, objects: Iterable[Mapping[str, Any]], owned: bool = False
    ) -> list[ObjectError]:
        """Make the Volcano objects of ``kind`` exactly ``objects`` (a relist); those
        refused are returned, the rest applied."""
        target = KINDS.get(kind, kind)
        errors: list[ObjectError] = []
        listed = set()
        for obj in objects:
            listed.add(_key(target, obj))
            try:
                self.apply({**obj, "kind": target}, owned=owned)
            except ObjectError as exc:
                errors.append(exc)
        with self._lock:
            gone = self._seen[target] - listed
        for namespace, name in gone:
            self.delete(target, namespace, name)
        return errors
