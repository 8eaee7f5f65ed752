"""ClusterState: the objects the scheduler reads, kept parsed, and the snapshot built from them.

The resource names the objects mention (the snapshot's dimensions) are counted as
objects come and go, not gathered from every object at each snapshot. With
``leave_out_settled`` (the simulator's, whose cluster keeps every pod it ran),
snapshots leave out jobs that are over and that a session has already seen so
(``kbatch.cluster.reuse.settled``).
"""

import builtins
import dataclasses
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from pydantic import BaseModel

from kbatch.api import DEFAULT_SCHEDULER_NAMES
from kbatch.api.podgroup import PodGroup, PodGroupPhase
from kbatch.cluster import fields, records, snapshot, snapshot_inputs, upstream_groups, volcano
from kbatch.cluster.assumed import ASSUMED_TTL, AssumedPods
from kbatch.cluster.devices import DeviceIndex
from kbatch.cluster.errors import ObjectError
from kbatch.cluster.gated import GatedIndex
from kbatch.cluster.indexes import GroupIndex, ResourceNames
from kbatch.cluster.kept_fields import reads_the_same
from kbatch.cluster.node_images import NodeImages
from kbatch.cluster.observer import StateObserver
from kbatch.cluster.pod_records import pod_made_of
from kbatch.cluster.reuse import settled
from kbatch.cluster.reuse.per_object import Inputs
from kbatch.cluster.reuse.pod_units import PodUnits, ShownPods
from kbatch.cluster.state_assumed import StateAssumptions
from kbatch.cluster.volumes import VolumeIndex
from kbatch.operators.scheduler.core.framework.collector import collector_paused
from kbatch.operators.scheduler.core.framework.info import JobDeadline
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from kbatch.operators.scheduler.core.framework.shortcuts import ALL, Shortcuts

__all__ = ["ClusterState", "ObjectError"]

_PARSERS: dict[str, Any] = dict(records.PARSERS)
_READ_AGAIN = frozenset({"Node", "Job", "JobSet"})  # kinds whose writes may change nothing read


class ClusterState(StateAssumptions):
    """Raw objects as applied, and their parsed records, by kind and namespace/name.

    Safe to share between threads (watch threads apply, the scheduler snapshots).
    A bind or an eviction the scheduler has sent but the watch has not shown yet is
    *assumed* (``kbatch.cluster.assumed``): snapshots see the pod on its node (or
    Releasing) until the watch shows it or the request fails (``assumed_ttl``: seconds it
    lasts once the request succeeded, None for until the watch shows it).
    ``shortcuts``: which of its records' and snapshots' shortcuts it takes.
    """

    KINDS = frozenset(_PARSERS)

    def __init__(
        self,
        scheduler_names: frozenset[str] = frozenset(DEFAULT_SCHEDULER_NAMES),
        clock: Callable[[], float] = time.monotonic,
        assumed_ttl: float | None = ASSUMED_TTL,
        leave_out_settled: bool = False,
        shortcuts: Shortcuts = ALL,
    ) -> None:
        self.scheduler_names = scheduler_names
        self.shortcuts = shortcuts
        self._raw: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in _PARSERS}
        self._parsed: dict[str, dict[str, Any]] = {kind: {} for kind in _PARSERS}
        self._assumed = AssumedPods(clock, assumed_ttl)
        # Objects whose latest version was refused, by kind and key: why ('field: why').
        # The scheduler says why a PodGroup's Queue is ignored, not that it is missing.
        self._refused: dict[str, dict[str, str]] = {kind: {} for kind in _PARSERS}
        # What a session could act on: our unbound pending pods, PodGroups not admitted.
        self._waiting: dict[str, set[str]] = {"Pod": set(), "PodGroup": set()}
        # PodGroup keys by queue and by namespace, for admission's lookups.
        self._groups = GroupIndex()
        # Keys of the grouped pods of other schedulers (mostly none: see _foreign_groups).
        self._theirs: set[str] = set()
        self._gated = GatedIndex()  # our pods held by scheduling gates
        self._volumes = VolumeIndex()  # our pending pods that name claims
        self._devices = DeviceIndex()  # our pending pods with resource claims
        self.generation = 0  # grows with every change applied
        self._lock = threading.RLock()
        self._builder = snapshot.SnapshotBuilder(self.shortcuts)
        self._names = ResourceNames()
        # The Node records in order, as the last snapshot was given them (None once a Node
        # is written or dropped): the same list tells the next snapshot's builder that the
        # nodes are the same without comparing each record (``KeptNodes.node_set``).
        self._node_list: builtins.list[records.NodeRecord] | None = None
        self._images = NodeImages()  # (each node's status.images, kept apart from its record)
        self._job_deadlines: dict[str, JobDeadline] | None = None  # (``_deadlines``)
        self._shown = settled.Shown() if leave_out_settled else None
        # Units (PodGroup keys, PodRecord.unit) written since the last snapshot, and those
        # with a pod whose bind or eviction the last snapshot assumed: the builder keeps
        # the jobs of the others (kbatch.cluster.reuse.kept_jobs).
        self._changed_units: set[str] = set()
        self._assumed_units: set[str] = set()
        self._pod_units = PodUnits()
        # Told every change, under the lock (the flight recorder); None: nobody.
        self.observer: StateObserver | None = None
        # A state whose pods this one's are made of (``records_from``); None: none.
        self._source: ClusterState | None = None

    def records_from(self, source: "ClusterState | None") -> None:
        """Pods applied from now on that are made of ``source``'s of the same name (the
        ETA's forward run: spec and labels the very same objects) take its records but
        for their identity, times and status (``pod_records.pod_made_of``,
        ``Shortcuts.pod_records_of_source``); None: no longer. ``source`` is only read."""
        self._source = source if self.shortcuts.pod_records_of_source else None

    def apply(
        self, obj: Mapping[str, Any], owned: bool = False, status: BaseModel | None = None
    ) -> None:
        """Create or replace an object; a bad one raises ObjectError and changes nothing
        but what ``refusal`` says of it (a refused update leaves the last good version).

        The state keeps its own copy, unless ``owned``: the caller hands the object over
        and will not touch it again (a watch event just decoded). ``status``: of a
        PodGroup or Queue whose status alone is written, the status model that
        ``obj``'s status was dumped from, when the writer has it (the simulator's
        status writes): taken as parsed, not validated again."""
        kind = obj.get("kind")
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(meta, Mapping) or not isinstance(name, str) or not name:
            raise ObjectError(records.ref_of(obj), "metadata.name", "required")
        if not isinstance(kind, str) or kind not in _PARSERS:
            raise ObjectError(
                records.ref_of(obj), "kind", f"kbatch does not model {fields.shown(kind)}"
            )
        key = self._key(kind, str(meta.get("namespace") or ""), name)
        parsed = self._parse(kind, key, obj, status)
        raw = dict(obj) if owned else fields.copied(dict(obj))
        with self._lock:
            if self._record(kind, key, parsed, raw) and self.observer is not None:
                self.observer.applied(kind, key, raw)

    def _parse(self, kind: str, key: str, obj: Mapping[str, Any], status: BaseModel | None) -> Any:
        """The record of ``obj`` (of ``kind``, at ``key``), from the version held where
        only its status changed; a refusal noted (and ObjectError raised) if bad."""
        try:
            if kind == "Pod":
                previous = self._parsed["Pod"].get(key)
                if previous is None and self._source is not None:
                    made = self._made_of_source(key, obj)
                    if made is not None:
                        return made
                return records.parse_pod(obj, previous, self._raw["Pod"].get(key), self.shortcuts)
            if kind == "PodGroup" or kind == "Queue":
                parse = records.parse_pod_group if kind == "PodGroup" else records.parse_queue
                old, old_raw = self._parsed[kind].get(key), self._raw[kind].get(key)
                return parse(obj, old, old_raw, status, self.shortcuts)
            return _PARSERS[kind](obj)
        except ObjectError as exc:
            with self._lock:
                self._refused[kind][key] = f"{exc.field}: {exc.why}" if exc.field else exc.why
                if kind == "Queue" and self._shown is not None:
                    self._shown.verdicts_changed()
                if self.observer is not None:
                    self.observer.refused(fields.copied(dict(obj)))
            raise

    def _made_of_source(self, key: str, obj: Mapping[str, Any]) -> records.PodRecord | None:
        source = self._source
        assert source is not None
        with source._lock:
            record, raw = source._parsed["Pod"].get(key), source._raw["Pod"].get(key)
        if record is None or raw is None:
            return None
        return pod_made_of(obj, record, raw)

    def _record(self, kind: str, key: str, parsed: Any, raw: dict[str, Any]) -> bool:
        """Hold ``parsed`` and ``raw`` at ``key``, and note what they change: the
        generation, names, indexes, what snapshots show, and the builder's early work.
        False: the write changes nothing kbatch reads (``_reads_the_same``, ``NodeImages``)."""
        # (a pull changes a node's images alone: recorded, but no record or generation)
        pulled = kind == "Node" and self._images.written(key, raw)
        if self._reads_the_same(kind, key, parsed, raw):
            self._raw[kind][key] = raw  # (the newest, for what reads it)
            return pulled
        self.generation += 1
        self._names.count(kind, key, parsed)
        if self._shown is not None:
            self._shown.object_written(kind, key, parsed, self._parsed)
        self._refused[kind].pop(key, None)
        if kind == "PodGroup":
            self._groups.remove(key, self._parsed["PodGroup"].get(key))
            self._groups.add(key, parsed)
            self._builder.objects.group_arrived(key, parsed, self._snapshot_inputs)
        self._unit_changed(kind, key, parsed)
        self._raw[kind][key] = raw
        self._parsed[kind][key] = parsed
        if kind == "Node":
            self._node_list = None
        elif kind == "Job":
            self._job_deadlines = None
        if kind == "Pod":
            ours = parsed.scheduler_name in self.scheduler_names
            if parsed.group and not ours:
                self._theirs.add(key)
            else:
                self._theirs.discard(key)
            self._assumed.check(key, parsed)
            self._gated.applied(key, parsed, ours)
            self._volumes.applied(key, parsed, ours)
            self._devices.applied(key, parsed, ours)
            self._builder.objects.pod_arrived(parsed, self._snapshot_inputs)
        elif kind == "Node":
            self._builder.objects.node_arrived(parsed, self._snapshot_inputs)
        self._volumes.written(kind, key, parsed)
        self._devices.written(kind, key, parsed)
        if kind in self._waiting:
            if self._is_waiting(parsed):
                self._waiting[kind].add(key)
            else:
                self._waiting[kind].discard(key)
        return True

    def _reads_the_same(self, kind: str, key: str, parsed: Any, raw: dict[str, Any]) -> bool:
        """A Node, Job or JobSet (not refused) that reads as it did: no generation, no
        node row worked out again, so a snapshot keeps the node and the loop's backlog
        that cannot move stays settled (``runtime.loop``); nor is it recorded."""
        if kind not in _READ_AGAIN or key in self._refused[kind]:
            return False
        old_parsed, old_raw = self._parsed[kind].get(key), self._raw[kind].get(key)
        return reads_the_same(kind, old_parsed, parsed, old_raw, raw)

    def _snapshot_inputs(self) -> Inputs:
        """What a snapshot works its tasks, jobs and node rows out under, for those
        worked out as pods, PodGroups and Nodes arrive (before the first snapshot)."""
        names = self._names.names()
        nodes = builtins.list(self._parsed["Node"].values())
        return names, nodes, dict(self._parsed["PriorityClass"]), self.scheduler_names

    def _is_waiting(self, parsed: Any) -> bool:
        if isinstance(parsed, records.PodRecord):
            return (
                parsed.scheduler_name in self.scheduler_names
                and not parsed.node_name
                and not parsed.deleting
                and parsed.phase == "Pending"
                and not parsed.gates
            )
        return bool(parsed.status.phase is PodGroupPhase.PENDING)

    def has_work(self, decided_groups: AbstractSet[str] = frozenset()) -> bool:
        """Is there anything a session could place or admit (a pod of ours that is neither
        bound nor assumed bound, a PodGroup not yet admitted, but those in
        ``decided_groups``: namespace/name of groups a session decided already)?"""
        with self._lock:
            if not self._waiting["PodGroup"] <= decided_groups:
                return True
            self._expire_assumptions()
            return any(key not in self._assumed for key in self._waiting["Pod"])

    def take_settled(self) -> builtins.list[tuple[str, builtins.list[str], bool]]:
        """The units the snapshots left out since the last call (``Shown.take_settled``;
        none unless ``leave_out_settled``)."""
        with self._lock:
            return [] if self._shown is None else self._shown.take_settled()

    def delete(self, kind: str, namespace: str, name: str) -> None:
        with self._lock:
            self._drop(kind, self._key(kind, namespace, name))

    def _unit_changed(self, kind: str, key: str, parsed: Any) -> None:
        """Note the unit of the object of ``kind`` at ``key`` as changed: the version held
        (if any) and ``parsed``, the next one (None: it is dropped)."""
        if kind == "Pod":
            old = self._parsed["Pod"].get(key)
            if old is not None:
                self._changed_units.add(old.unit)
            if parsed is not None:
                self._changed_units.add(parsed.unit)
            self._pod_units.applied(key, old, parsed)
        elif kind == "PodGroup":
            self._changed_units.add(key)

    def _drop(self, kind: str, key: str) -> None:
        if self.observer is not None:
            self.observer.dropped_object(kind, key)
        self.generation += 1
        self._unit_changed(kind, key, None)
        self._names.count(kind, key, None)
        if self._shown is not None and (kind != "Queue" or key in self._parsed["Queue"]):
            self._shown.object_written(kind, key, None, self._parsed)
        if kind == "PodGroup":
            self._groups.remove(key, self._parsed["PodGroup"].get(key))
        self._raw[kind].pop(key, None)
        self._parsed[kind].pop(key, None)
        self._refused[kind].pop(key, None)
        if kind == "Node":
            self._node_list = None
            self._images.dropped(key)
        elif kind == "Job":
            self._job_deadlines = None
        if kind == "Pod":
            self._assumed.forget(key)
            self._theirs.discard(key)
            self._gated.applied(key, None, False)
            self._volumes.applied(key, None, False)
            self._devices.applied(key, None, False)
        self._volumes.written(kind, key, None)
        self._devices.written(kind, key, None)
        if kind in self._waiting:
            self._waiting[kind].discard(key)

    def replace(
        self, kind: str, objects: Iterable[Mapping[str, Any]], owned: bool = False
    ) -> list[ObjectError]:
        """Make ``kind`` exactly ``objects`` (a relist): apply each, drop the rest.
        Objects that cannot be used are skipped and returned, the rest applied."""
        errors: builtins.list[ObjectError] = []
        seen = set()
        listed = set()  # applied or refused
        for obj in objects:
            key = self._key_of(kind, obj)
            if key is not None:
                listed.add(key)
            try:
                self.apply(obj, owned=owned)
            except ObjectError as exc:
                errors.append(exc)
                continue
            if key is not None:  # always, once applied
                seen.add(key)
        with self._lock:
            for key in set(self._raw[kind]) - seen:
                if kind == "PodGroup" and upstream_groups.is_upstream(self._raw[kind][key]):
                    continue  # made from upstream's PodGroups, which their own watch keeps
                if volcano.origin_of(self._raw[kind][key]) is not None:
                    continue  # made from Volcano's, which their own watches keep
                self._drop(kind, key)
            for key in set(self._refused[kind]) - listed:
                del self._refused[kind][key]  # gone from the cluster
        return errors

    def snapshot(self) -> Snapshot:
        with self._lock, collector_paused():
            if self.observer is not None:
                self.observer.snapshotted()
            all_pods, all_groups = self._parsed["Pod"], self._parsed["PodGroup"]
            self._expire_assumptions()
            assumed = self._assumed.applied_to if self._assumed else None
            # (the groups as held, not a copy: the builder reads them under the lock)
            pod_groups: Mapping[str, PodGroup] = all_groups
            if self._shown is None:
                pods = ShownPods(all_pods, self._pod_units, len(all_pods), assumed=assumed)
            else:
                shown = self._shown.pods
                pod_groups = self._shown.settle()
                pods = ShownPods(
                    all_pods, self._pod_units, len(shown), shown.__contains__, shown.keys, assumed
                )
            changed = self._take_changed_units()
            order = None if self._shown is None else self._shown.groups.take_order_changes()
            try:
                built = self._builder.build(
                    nodes=self._nodes_in_order(),
                    pods=pods,
                    pod_groups=pod_groups,
                    queues=dict(self._parsed["Queue"]),
                    priority_classes=dict(self._parsed["PriorityClass"]),
                    scheduler_names=self.scheduler_names,
                    names=self._names.names(),
                    changed_units=changed,
                    group_order=order,
                )
            except BaseException:
                # What changed since the last snapshot was taken for this one: a builder
                # going on from the last would keep jobs written since. A new one
                # makes everything. No session saw what this one was to show.
                self._builder = snapshot.SnapshotBuilder(self.shortcuts)
                if self._shown is not None:
                    self._shown.not_seen()
                raise
            self._gated.mark(built.jobs)
            self._volumes.mark(built, self._volumes.of_state(self._parsed, self._assumed))
            self._devices.mark(built, self._devices.of_state(self._parsed))
            return dataclasses.replace(
                built,
                foreign_groups=self._foreign_groups(pods),
                refused_queues=dict(self._refused["Queue"]),
                refused_groups=dict(self._refused["PodGroup"]),
                namespace_labels=dict(self._parsed["Namespace"]),
                node_images=self._images.current(),
                job_deadlines=self._deadlines(),
                non_preempting=records.non_preempting(self._parsed["PriorityClass"].values()),
            )

    def _nodes_in_order(self) -> builtins.list[records.NodeRecord]:
        """The Node records, the same list object while no Node is written (nothing
        changes it: the builder only reads it)."""
        if self._node_list is None:
            self._node_list = builtins.list(self._parsed["Node"].values())
        return self._node_list

    def _take_changed_units(self) -> set[str]:
        """The units written since the last snapshot, and those with an assumed pod now or
        at the last snapshot (a snapshot shows such a pod as assumed, and then as the
        watch does): the next snapshot makes their jobs anew."""
        parsed = self._parsed["Pod"]
        assumed = {parsed[key].unit for key in self._assumed if key in parsed}
        changed = self._changed_units | assumed | self._assumed_units
        self._changed_units, self._assumed_units = set(), assumed
        return changed

    def _foreign_groups(self, shown: ShownPods) -> frozenset[str]:
        """PodGroups with pods, none of them ours (``snapshot_inputs.foreign_groups``),
        looked for only when the state holds a grouped pod of another scheduler."""
        if not self._theirs:
            return frozenset()
        return snapshot_inputs.foreign_groups(shown.every(), self.scheduler_names)
