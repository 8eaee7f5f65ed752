"""What the cluster state answers of the objects it holds: the raw objects as applied,
their parsed records, the refusals, and the lookups admission and the operators make
(PodGroups by queue and namespace, whether a group has a pod of ours). ``ClusterState``
holds the objects and keeps them current; these are its reads, each under its lock."""

import builtins
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from kbatch.api.podgroup import PodGroup, PodGroupPhase
from kbatch.api.queue import Queue
from kbatch.cluster import devices, records, volumes
from kbatch.cluster.assumed import AssumedPods
from kbatch.cluster.indexes import GroupIndex
from kbatch.cluster.reuse.pod_units import PodUnits
from kbatch.operators.scheduler.core.framework import podgroup_status as pod_group_status
from kbatch.operators.scheduler.core.framework.info import JobDeadline


class StateReads:
    """The reads of a ``ClusterState`` (which sets every attribute declared here)."""

    scheduler_names: frozenset[str]
    _lock: threading.RLock
    _raw: dict[str, dict[str, dict[str, Any]]]
    _parsed: dict[str, dict[str, Any]]
    _refused: dict[str, dict[str, str]]
    _groups: GroupIndex
    _pod_units: PodUnits
    _assumed: AssumedPods
    _volumes: volumes.VolumeIndex
    _job_deadlines: dict[str, JobDeadline] | None
    _devices: devices.DeviceIndex

    @staticmethod
    def _key(kind: str, namespace: str, name: str) -> str:
        if kind in records.CLUSTER_SCOPED:
            return name
        return f"{namespace or 'default'}/{name}"

    def _key_of(self, kind: str, obj: Mapping[str, Any]) -> str | None:
        """The key of ``obj`` as ``kind`` (None when it has no name to key it by)."""
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(meta, Mapping) or not isinstance(name, str) or not name:
            return None
        return self._key(kind, str(meta.get("namespace") or ""), name)

    def refusal(self, kind: str, namespace: str, name: str) -> str | None:
        """Why the object's latest version was refused ('field: why'), or None when it
        was not (or has been fixed, or deleted since)."""
        with self._lock:
            return self._refused.get(kind, {}).get(self._key(kind, namespace, name))

    def refused(self, kind: str) -> dict[str, str]:
        """The refused objects of ``kind``: key (namespace/name, or name) -> 'field: why'."""
        with self._lock:
            return dict(self._refused.get(kind, {}))

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self._lock:
            return self._raw[kind].get(self._key(kind, namespace, name))

    def list(self, kind: str) -> builtins.list[dict[str, Any]]:
        with self._lock:
            return builtins.list(self._raw[kind].values())

    def volume_writes(
        self, namespace: str, name: str, node: str
    ) -> builtins.list[volumes.VolumeWrite]:
        """What binding the pod to ``node`` writes first for its claims bound on first use
        (``volumes.bind_writes``), the PVs it binds taken until the watch shows them
        claimed (``forget_volume`` when the write fails); NoVolume when a claim cannot
        be had there."""
        with self._lock:
            pod: records.PodRecord | None = self._parsed["Pod"].get(f"{namespace}/{name}")
            if pod is None or not pod.claims:
                return []
            node_record = self._parsed["Node"].get(node)
            labels = node_record.labels if node_record is not None else {}
            free = self._volumes.for_binds(self._parsed["PersistentVolume"])
            claims, classes = self._parsed["PersistentVolumeClaim"], self._parsed["StorageClass"]
            taken, claimed = set(self._volumes.assumed), self._volumes.claimed
            writes = volumes.bind_writes(pod, node, labels, claims, classes, free, taken, claimed)
            self._volumes.assume(writes)
            return writes

    def device_writes(
        self, namespace: str, name: str, node: str
    ) -> builtins.list[devices.ClaimWrite]:
        """What binding the pod to ``node`` writes first to its resource claims
        (``devices.bind_writes``), the devices it allocates held until the watch shows
        them allocated (``forget_devices`` when the write fails); NoDevice when a claim
        cannot be allocated there."""
        with self._lock:
            pod: records.PodRecord | None = self._parsed["Pod"].get(f"{namespace}/{name}")
            if pod is None or not pod.device_claims:
                return []
            node_record = self._parsed["Node"].get(node)
            labels = node_record.labels if node_record is not None else {}
            index, claims = self._devices, self._parsed["ResourceClaim"]
            known = index.devices(self._parsed)
            needs = devices.needs_of(pod, claims, known, index.assumed)
            writes = devices.bind_writes(
                pod, node, labels, needs, claims, known, index.taken(claims)
            )
            index.assume(writes, {(r.claim, r.request) for r in needs.requests if r.admin})
            return writes

    def forget_devices(self, write: devices.ClaimWrite) -> None:
        """``write`` failed: the devices it allocated are free again."""
        with self._lock:
            self._devices.forget(write)

    def forget_volume(self, write: volumes.VolumeWrite) -> None:
        """``write`` failed: its PV (if any) is free again."""
        with self._lock:
            self._volumes.forget(write)

    def _deadlines(self) -> dict[str, JobDeadline]:
        """The Jobs' deadlines by uid, the same dict while no Job is written (sessions
        only read it), not made anew at every snapshot."""
        if self._job_deadlines is None:
            self._job_deadlines = {
                job.uid: job.deadline
                for job in self._parsed["Job"].values()
                if job.deadline is not None
            }
        return self._job_deadlines

    def records_of(self, kind: str) -> Mapping[str, Any]:
        """The parsed records of ``kind`` by key, as a live view (not a copy): for a
        single-threaded reader that writes nothing while it reads (the simulator)."""
        return MappingProxyType(self._parsed[kind])

    def pod_record(self, namespace: str, name: str) -> records.PodRecord | None:
        with self._lock:
            record: records.PodRecord | None = self._parsed["Pod"].get(
                self._key("Pod", namespace, name)
            )
            return record

    def waits_for_a_node(self, namespace: str, name: str, uid: str) -> bool:
        """Is pod ``uid`` still pending as far as this replica knows: watched without a
        node, not deleted nor finished, and no bind or eviction of it sent?"""
        with self._lock:
            record: records.PodRecord | None = self._parsed["Pod"].get(
                self._key("Pod", namespace, name)
            )
            return (
                record is not None
                and record.uid == uid
                and not (record.node_name or record.deleting)
                and record.phase not in ("Succeeded", "Failed")
                and self._assumed.applied_to(record) is record
            )

    def pod_group_phase(self, namespace: str, name: str) -> PodGroupPhase | None:
        """The PodGroup's phase as its object says (one rule for reading it:
        ``podgroup_status.phase_of``), or None when there is none."""
        raw = self.get("PodGroup", namespace, name)
        return None if raw is None else pod_group_status.phase_of(raw)

    def pod_groups(self) -> dict[str, PodGroup]:
        with self._lock:
            return dict(self._parsed["PodGroup"])

    def pod_group(self, key: str) -> PodGroup | None:
        """The parsed PodGroup of key namespace/name (one look-up, where ``pod_groups``
        copies them all)."""
        with self._lock:
            group: PodGroup | None = self._parsed["PodGroup"].get(key)
            return group

    def pod_groups_in_queue(self, queue: str) -> builtins.list[str]:
        """The keys (namespace/name) of the PodGroups naming ``queue``, sorted."""
        with self._lock:
            return self._groups.in_queue(queue)

    def pod_groups_in_namespace(self, namespace: str) -> builtins.list[PodGroup]:
        with self._lock:
            keys = self._groups.in_namespace(namespace)
            return [self._parsed["PodGroup"][key] for key in keys]

    def has_pod_of_ours(self, group: str) -> bool:
        """Has the PodGroup ``group`` (namespace/name) a pod with one of our scheduler
        names? (A group another scheduler's pods name is theirs to write about.)"""
        with self._lock:
            pods = self._parsed["Pod"]
            return any(
                pods[key].scheduler_name in self.scheduler_names
                for key in self._pod_units.keys_of((group,))
            )

    def namespace_labels(self, name: str) -> dict[str, str] | None:
        """The labels of Namespace ``name``, or None when the state has no such Namespace
        (``kbatch.api.selector.namespace_labels`` reads it by its name then)."""
        with self._lock:
            labels: dict[str, str] | None = self._parsed["Namespace"].get(name)
            return labels

    def all_namespace_labels(self) -> dict[str, dict[str, str]]:
        """Every Namespace's labels, by name."""
        with self._lock:
            return dict(self._parsed["Namespace"])

    def queues(self) -> dict[str, Queue]:
        with self._lock:
            return dict(self._parsed["Queue"])

    def quotas(self) -> builtins.list[records.QuotaRecord]:
        with self._lock:
            return builtins.list(self._parsed["ResourceQuota"].values())
