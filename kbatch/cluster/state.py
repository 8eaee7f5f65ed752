"""ClusterState: the objects the scheduler reads, kept parsed, and the snapshot built from them."""

import builtins
import copy
from collections.abc import Mapping
from typing import Any

from kbatch.api import DEFAULT_SCHEDULER_NAMES
from kbatch.api.podgroup import PodGroup
from kbatch.api.queue import Queue
from kbatch.cluster import records, snapshot
from kbatch.cluster.errors import ObjectError
from kbatch.operators.scheduler.framework.interface import Snapshot

__all__ = ["ClusterState", "ObjectError"]

_PARSERS: dict[str, Any] = {
    "Node": records.parse_node,
    "Pod": records.parse_pod,
    "PodGroup": records.parse_pod_group,
    "Queue": records.parse_queue,
    "PriorityClass": records.parse_priority_class,
    "ResourceQuota": records.parse_quota,
    "Namespace": lambda obj: obj["metadata"]["name"],
}


class ClusterState:
    """Raw objects as applied, and their parsed records, by kind and namespace/name."""

    KINDS = frozenset(_PARSERS)

    def __init__(
        self, scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES)
    ) -> None:
        self.scheduler_names = scheduler_names
        self._raw: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in _PARSERS}
        self._parsed: dict[str, dict[str, Any]] = {kind: {} for kind in _PARSERS}
        self._builder = snapshot.SnapshotBuilder()

    @staticmethod
    def _key(kind: str, namespace: str, name: str) -> str:
        if kind in records.CLUSTER_SCOPED:
            return name
        return f"{namespace or 'default'}/{name}"

    def apply(self, obj: Mapping[str, Any]) -> None:
        """Create or replace an object; a bad one raises ObjectError and changes nothing."""
        kind = obj.get("kind")
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            raise ObjectError(records.ref_of(obj), "metadata.name", "required")
        if kind not in _PARSERS:
            raise ObjectError(records.ref_of(obj), "kind", f"kbatch does not model {kind!r}")
        parsed = _PARSERS[kind](obj)
        key = self._key(kind, str(meta.get("namespace") or ""), str(meta["name"]))
        self._raw[kind][key] = copy.deepcopy(dict(obj))
        self._parsed[kind][key] = parsed

    def delete(self, kind: str, namespace: str, name: str) -> None:
        key = self._key(kind, namespace, name)
        self._raw[kind].pop(key, None)
        self._parsed[kind].pop(key, None)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._raw[kind].get(self._key(kind, namespace, name))

    def list(self, kind: str) -> list[dict[str, Any]]:
        return list(self._raw[kind].values())

    def pod_groups(self) -> dict[str, PodGroup]:
        return dict(self._parsed["PodGroup"])

    def queues(self) -> dict[str, Queue]:
        return dict(self._parsed["Queue"])

    def quotas(self) -> builtins.list[records.QuotaRecord]:
        return list(self._parsed["ResourceQuota"].values())

    def snapshot(self) -> Snapshot:
        return self._builder.build(
            nodes=list(self._parsed["Node"].values()),
            pods=list(self._parsed["Pod"].values()),
            pod_groups=self._parsed["PodGroup"],
            queues=self._parsed["Queue"],
            priority_classes=self._parsed["PriorityClass"],
            scheduler_names=self.scheduler_names,
        )
