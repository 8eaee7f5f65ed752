"""ClusterState: the objects the scheduler reads, kept parsed, and the snapshot built from them."""

import builtins
import copy
import dataclasses
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from kbatch.api import DEFAULT_SCHEDULER_NAMES
from kbatch.api.podgroup import PodGroup, PodGroupPhase
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
    """Raw objects as applied, and their parsed records, by kind and namespace/name.

    Safe to share between threads (watch threads apply, the scheduler snapshots).
    A bind the scheduler has sent but the watch has not shown yet is *assumed*:
    snapshots see the pod on its node until the pod's next update arrives.
    """

    KINDS = frozenset(_PARSERS)

    def __init__(
        self, scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES)
    ) -> None:
        self.scheduler_names = scheduler_names
        self._raw: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in _PARSERS}
        self._parsed: dict[str, dict[str, Any]] = {kind: {} for kind in _PARSERS}
        self._assumed: dict[str, str] = {}  # pod key -> node
        # What a session could act on: our unbound pending pods, PodGroups not admitted.
        self._waiting: dict[str, set[str]] = {"Pod": set(), "PodGroup": set()}
        self.generation = 0  # grows with every change applied
        self._lock = threading.RLock()
        self._builder = snapshot.SnapshotBuilder()

    @staticmethod
    def _key(kind: str, namespace: str, name: str) -> str:
        if kind in records.CLUSTER_SCOPED:
            return name
        return f"{namespace or 'default'}/{name}"

    def apply(self, obj: Mapping[str, Any], owned: bool = False) -> None:
        """Create or replace an object; a bad one raises ObjectError and changes nothing.

        The state keeps its own copy, unless ``owned``: the caller hands the object over
        and will not touch it again (a watch event just decoded)."""
        kind = obj.get("kind")
        meta = obj.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            raise ObjectError(records.ref_of(obj), "metadata.name", "required")
        if kind not in _PARSERS:
            raise ObjectError(records.ref_of(obj), "kind", f"kbatch does not model {kind!r}")
        key = self._key(kind, str(meta.get("namespace") or ""), str(meta["name"]))
        if kind == "Pod":
            parsed: Any = records.parse_pod(obj, self._parsed["Pod"].get(key))
        else:
            parsed = _PARSERS[kind](obj)
        raw = dict(obj) if owned else copy.deepcopy(dict(obj))
        with self._lock:
            self.generation += 1
            self._raw[kind][key] = raw
            self._parsed[kind][key] = parsed
            if kind == "Pod":
                self._assumed.pop(key, None)
            if kind in self._waiting:
                if self._is_waiting(parsed):
                    self._waiting[kind].add(key)
                else:
                    self._waiting[kind].discard(key)

    def _is_waiting(self, parsed: Any) -> bool:
        if isinstance(parsed, records.PodRecord):
            return (
                parsed.scheduler_name in self.scheduler_names
                and not parsed.node_name
                and not parsed.deleting
                and parsed.phase == "Pending"
            )
        return bool(parsed.status.phase is PodGroupPhase.PENDING)

    def has_work(self) -> bool:
        """Is there anything a session could place or admit (a pod of ours that is neither
        bound nor assumed bound, a PodGroup not yet admitted)?"""
        with self._lock:
            if self._waiting["PodGroup"]:
                return True
            return any(key not in self._assumed for key in self._waiting["Pod"])

    def delete(self, kind: str, namespace: str, name: str) -> None:
        with self._lock:
            self._drop(kind, self._key(kind, namespace, name))

    def _drop(self, kind: str, key: str) -> None:
        self.generation += 1
        self._raw[kind].pop(key, None)
        self._parsed[kind].pop(key, None)
        if kind == "Pod":
            self._assumed.pop(key, None)
        if kind in self._waiting:
            self._waiting[kind].discard(key)

    def replace(
        self, kind: str, objects: Iterable[Mapping[str, Any]], owned: bool = False
    ) -> list[ObjectError]:
        """Make ``kind`` exactly ``objects`` (a relist): apply each, drop the rest.
        Objects that cannot be used are skipped and returned, the rest applied."""
        errors: builtins.list[ObjectError] = []
        seen = set()
        for obj in objects:
            try:
                self.apply(obj, owned=owned)
            except ObjectError as exc:
                errors.append(exc)
                continue
            meta = obj["metadata"]
            seen.add(self._key(kind, str(meta.get("namespace") or ""), str(meta["name"])))
        with self._lock:
            for key in set(self._raw[kind]) - seen:
                self._drop(kind, key)
        return errors

    def assume_bound(self, namespace: str, name: str, node: str) -> None:
        with self._lock:
            self._assumed[self._key("Pod", namespace, name)] = node

    def forget(self, namespace: str, name: str) -> None:
        """A bind failed: the pod is pending again (unless the watch said otherwise)."""
        with self._lock:
            self._assumed.pop(self._key("Pod", namespace, name), None)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._raw[kind].get(self._key(kind, namespace, name))

    def list(self, kind: str) -> builtins.list[dict[str, Any]]:
        with self._lock:
            return builtins.list(self._raw[kind].values())

    def pod_record(self, namespace: str, name: str) -> records.PodRecord | None:
        with self._lock:
            record: records.PodRecord | None = self._parsed["Pod"].get(
                self._key("Pod", namespace, name)
            )
            return record

    def pod_groups(self) -> dict[str, PodGroup]:
        with self._lock:
            return dict(self._parsed["PodGroup"])

    def queues(self) -> dict[str, Queue]:
        with self._lock:
            return dict(self._parsed["Queue"])

    def quotas(self) -> builtins.list[records.QuotaRecord]:
        with self._lock:
            return builtins.list(self._parsed["ResourceQuota"].values())

    def snapshot(self) -> Snapshot:
        with self._lock:
            pods = builtins.list(self._parsed["Pod"].values())
            if self._assumed:
                pods = [self._with_assumption(pod) for pod in pods]
            return self._builder.build(
                nodes=builtins.list(self._parsed["Node"].values()),
                pods=pods,
                pod_groups=dict(self._parsed["PodGroup"]),
                queues=dict(self._parsed["Queue"]),
                priority_classes=dict(self._parsed["PriorityClass"]),
                scheduler_names=self.scheduler_names,
            )

    def _with_assumption(self, pod: records.PodRecord) -> records.PodRecord:
        node = self._assumed.get(f"{pod.namespace}/{pod.name}")
        if node is None or pod.node_name:
            return pod
        return dataclasses.replace(pod, node_name=node)
