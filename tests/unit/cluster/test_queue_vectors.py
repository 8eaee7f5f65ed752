"""``snapshot_inputs.QueueInfos`` against ``queue_info`` made anew: over a sequence of
status writes, spec changes and new dimensions, every snapshot's QueueInfos read the
same, each its own object, the kept vectors read-only."""

from dataclasses import fields
from typing import Any

import numpy as np

from kbatch.api.queue import Queue, QueueStatus
from kbatch.cluster.records import parse_queue
from kbatch.cluster.snapshot_inputs import QueueInfos, queue_info
from kbatch.operators.scheduler.core.framework.resources import Dims


def _queue(name: str, cpu: str, weight: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "weight": weight,
            "capability": {"cpu": cpu, "example.com/gpu": "2"},
            "deserved": {"cpu": "1"},
        },
    }


def _same(a: Any, b: Any) -> bool:
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if x is None or y is None or not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


def test_kept_vectors_read_as_made_anew() -> None:
    dims = Dims.of(["example.com/gpu"])
    raw = {"a": _queue("a", "4"), "b": _queue("b", "8", weight=2)}
    queues: dict[str, Queue] = {name: parse_queue(obj) for name, obj in raw.items()}
    infos = QueueInfos()
    seen: list[Any] = []
    steps = ["status", "spec", "dims", "status", "gone", "status"]
    for step in steps:
        if step == "status":  # a status write keeps the spec (parse_queue's shortcut)
            written = {**raw["a"], "status": QueueStatus(pending=len(seen)).model_dump()}
            queues["a"] = parse_queue(written, queues["a"], raw["a"])
            raw["a"] = written
        elif step == "spec":
            changed = _queue("b", "6", weight=3)
            queues["b"] = parse_queue(changed, queues["b"], raw["b"])
            raw["b"] = changed
        elif step == "dims":
            dims = Dims.of(["example.com/gpu", "example.com/fpga"])
        elif step == "gone":
            queues.pop("b", None)
        made = infos.of(queues, dims)
        assert made.keys() == queues.keys()
        for name, queue in queues.items():
            assert _same(made[name], queue_info(queue, dims)), (step, name)
            assert all(made[name] is not other for other in seen)
            assert made[name].capability is not None
            assert not made[name].capability.flags.writeable
        seen.extend(made.values())
    assert QueueInfos(keep=False).of(queues, dims)["a"].capability.flags.writeable
