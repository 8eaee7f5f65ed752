"""Pod templates that carry what a pending pod's objects ask of a node (its volumes'
``VolumeNeeds``, its claims' ``DeviceNeeds``), set by the cluster layer on a copy of
its spec's template: the placement's answers are per template, so pods of one spec
whose needs differ (other claims) are placed apart, and those whose needs are the same
object share one copy."""

from collections.abc import Hashable, Mapping
from dataclasses import replace
from typing import Any

from kbatch.cluster.pod_records import PodRecord
from kbatch.operators.scheduler.core.framework.interface import Snapshot
from kbatch.operators.scheduler.core.framework.podspec import PodTemplate


class TemplateCopies:
    """A spec's template and needs -> its copy with them, and each copy's spec's
    template, for one field of ``PodTemplate`` (``volumes``, ``devices``)."""

    def __init__(self, field: str) -> None:
        self._field = field
        self._copies: dict[tuple[int, Hashable], PodTemplate] = {}
        self._origins: dict[int, PodTemplate] = {}

    def clear(self) -> None:
        """Forget the copies (bounded: made anew when the needs are)."""
        self._copies.clear()
        self._origins.clear()

    def mark(
        self, snapshot: Snapshot, pods: Mapping[str, PodRecord], needs: Mapping[str, Hashable]
    ) -> None:
        """Give the tasks of ``snapshot`` of ``pods`` (by key) templates carrying their
        ``needs`` (by the same keys); none given, forget the copies."""
        if not needs:
            self.clear()
            return
        jobs, field = snapshot.jobs, self._field
        for key, need in needs.items():
            pod = pods[key]
            job = jobs.get(pod.unit)
            task = None if job is None else job.tasks.get(pod.uid)
            if task is None or getattr(task.template, field) is need:
                continue
            origin = self._origins.get(id(task.template), task.template)
            copy = self._copies.get((id(origin), need))
            if copy is None:
                changes: dict[str, Any] = {field: need}
                copy = self._copies[(id(origin), need)] = replace(origin, **changes)
                self._origins[id(copy)] = origin
            task.template = copy
