"""Indexed Jobs (``spec.completionMode: Indexed``) in the simulated job controller.

Each pod of an Indexed Job has a completion index, 0 to ``completions`` − 1, in its
annotation and label ``batch.kubernetes.io/job-completion-index``, and its hostname
``<job>-<index>``; the simulator names it ``<job>-<index>-<n>`` (n counting the Job's
pods, where Kubernetes adds a random suffix). The controller keeps a pod for each of the
lowest indexes with none running, none succeeded and not failed, up to the Job's
parallelism; the Job is complete once every index has a pod that succeeded.

With ``spec.backoffLimitPerIndex`` a pod's failure counts against its index (and
``backoffLimit`` defaults to no limit): an index whose pods failed more times than that
is failed, and gets no more pods; so is the index of a pod evicted with the
``DisruptionTarget`` condition when the Job's ``podFailurePolicy`` says ``FailIndex``.
The Job fails, as Kubernetes fails it, once more
indexes failed than ``spec.maxFailedIndexes`` (``MaxFailedIndexesExceeded``), or once
every index succeeded or failed and one failed (``FailedIndexes``).
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kbatch.sim.job_spec import JobSpec

Object = dict[str, Any]

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
FAILED_INDEXES = ("FailedIndexes", "Job has failed indexes")
MAX_FAILED_INDEXES = (
    "MaxFailedIndexesExceeded",
    "Job has exceeded the specified maximal number of failed indexes",
)


@dataclass(slots=True)
class Indexes:
    """What an Indexed Job's controller knows of its indexes."""

    succeeded: set[int] = field(default_factory=set)
    failures: dict[int, int] = field(default_factory=dict)  # index -> its pods that failed
    failed: set[int] = field(default_factory=set)  # past backoffLimitPerIndex: no more pods
    of_pod: dict[str, int] = field(default_factory=dict)  # its pods' indexes, by name

    def made(self, name: str, index: int) -> None:
        self.of_pod[name] = index

    def observe(self, pods: Iterable[Object], failed: Iterable[str], spec: JobSpec) -> int:
        """Note the indexes whose pods succeeded and the failures of the pods named
        ``failed`` (each once: failed in the state, or removed before they finished);
        the number of indexes that succeeded."""
        for pod in pods:
            if (pod.get("status") or {}).get("phase") == "Succeeded":
                index = self.of_pod.get(pod["metadata"]["name"])
                if index is not None:
                    self.succeeded.add(index)
        for name in failed:
            index = self.of_pod.pop(name, None)
            if index is None or index in self.succeeded:
                continue
            self.failures[index] = self.failures.get(index, 0) + 1
            if spec.per_index_limit is not None and self.failures[index] > spec.per_index_limit:
                self.failed.add(index)
        return len(self.succeeded)

    def fail_index_of(self, name: str) -> None:
        """The pod ``name`` fails its index for good (podFailurePolicy ``FailIndex``)."""
        index = self.of_pod.pop(name, None)
        if index is not None and index not in self.succeeded:
            self.failed.add(index)

    def to_make(self, active: Iterable[Object], spec: JobSpec, count: int) -> list[int]:
        """The ``count`` lowest indexes a new pod is made for (at most)."""
        busy = {self.of_pod.get(pod["metadata"]["name"]) for pod in active}
        done = self.succeeded | self.failed
        free = (i for i in range(spec.completions) if i not in done and i not in busy)
        return [index for index, _ in zip(free, range(max(count, 0)), strict=False)]

    def ended(self, spec: JobSpec) -> tuple[str, str] | None:
        """(reason, message) when its failed indexes fail the Job now."""
        if spec.max_failed_indexes is not None and len(self.failed) > spec.max_failed_indexes:
            return MAX_FAILED_INDEXES
        if self.failed and len(self.succeeded | self.failed) >= spec.completions:
            return FAILED_INDEXES
        return None


def indexed(pod: Object, job_name: str, index: int) -> Object:
    """``pod`` (the controller's ``n``-th, named ``<job>-<n>``) as the pod of completion
    index ``index``: named ``<job>-<index>-<n>``, its index in an annotation and a label,
    its hostname ``<job>-<index>``."""
    meta = pod["metadata"]
    meta["name"] = f"{job_name}-{index}-{meta['name'].rsplit('-', 1)[1]}"
    meta["annotations"] = {**(meta.get("annotations") or {}), COMPLETION_INDEX: str(index)}
    meta["labels"] = {**meta["labels"], COMPLETION_INDEX: str(index)}
    pod["spec"]["hostname"] = f"{job_name}-{index}"
    return pod
