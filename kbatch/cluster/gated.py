"""Pods held by their scheduling gates (``spec.schedulingGates``, Kubernetes 1.26 on, GA
in 1.30): kbatch makes no task of them (``pod_records.task_status``), as kube-scheduler
keeps them out of its queue and the API server refuses their bindings. The cluster
state keeps those of its scheduler names here, so that a snapshot's jobs say how many
of their pods wait for which gates (``JobInfo.gated``): a gang short of pods for that
reason says so, not that its pods do not exist.
"""

from collections.abc import Mapping

from kbatch.cluster.pod_records import PodRecord
from kbatch.operators.scheduler.core.framework.info import GatedPods, JobInfo


class GatedIndex:
    """The gated pods of ours, by key (namespace/name), and what they make of each unit's
    ``GatedPods`` (worked out again only once one is written)."""

    def __init__(self) -> None:
        self._pods: dict[str, PodRecord] = {}
        self._by_unit: dict[str, GatedPods] | None = {}
        self._marked: set[str] = set()  # the units the last ``mark`` told of gated pods

    def applied(self, key: str, pod: PodRecord | None, ours: bool) -> None:
        """The pod at ``key`` is now ``pod`` (None: gone); ``ours``: of our schedulers."""
        gated = pod is not None and ours and gated_pod(pod)
        if gated:
            assert pod is not None
            self._pods[key] = pod
            self._by_unit = None
        elif self._pods.pop(key, None) is not None:
            self._by_unit = None

    def by_unit(self) -> Mapping[str, GatedPods]:
        """Each unit with gated pods (``PodRecord.unit``, a job's uid): its ``GatedPods``."""
        if self._by_unit is None:
            pods: dict[str, list[PodRecord]] = {}
            for pod in self._pods.values():
                pods.setdefault(pod.unit, []).append(pod)
            self._by_unit = {
                unit: GatedPods(len(held), tuple(sorted({g for p in held for g in p.gates})))
                for unit, held in pods.items()
            }
        return self._by_unit

    def mark(self, jobs: Mapping[str, JobInfo]) -> None:
        """Tell the jobs of ``jobs`` (a snapshot's, by uid) how many of their pods wait
        for which gates, and those told so by the last snapshot that none does now (a
        snapshot may give a job of the last one again: kbatch.cluster.reuse)."""
        if not self._pods and not self._marked:
            return
        by_unit = self.by_unit()
        for unit in self._marked - by_unit.keys():
            job = jobs.get(unit)
            if job is not None:
                job.gated = None
        for unit, gated in by_unit.items():
            job = jobs.get(unit)
            if job is not None:
                job.gated = gated
        self._marked = set(by_unit)


def gated_pod(pod: PodRecord) -> bool:
    """A pod waiting for its scheduling gates: unbound, not finished or deleted, and
    with gates left (a gated pod cannot be given a node: the API server refuses it)."""
    return bool(pod.gates) and pod.task_status is None and not pod.deleting
