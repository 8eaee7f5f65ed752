"""A recording of pods with persistent volumes replays every decision: the changes to
claims, PVs, StorageClasses and CSINodes are recorded with the rest and given back, so
that a replayed session places a pod where its volumes let it, as the recorded one
did."""

import gzip
import json
from pathlib import Path
from typing import Any

from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.record import replay, workload
from kbatch.record.store import segments
from kbatch.sim import manifests, runner
from scenarios.objects import at, pod, pod_group
from scenarios.test_volume_limits import csi_node
from scenarios.volume_objects import (
    NO_PROVISIONER,
    claim,
    mounting,
    on_node,
    storage_class,
    volume,
    zoned,
)


def documents() -> list[dict[str, Any]]:
    """Local volumes, one a node (on two of three), claimed by pods that come in turn
    (the first two take them; the others wait, the volumes staying bound to their
    claims), and a gang whose claims are provisioned on first use, on nodes that may
    attach one volume of their driver each."""
    docs: list[dict[str, Any]] = [storage_class(), storage_class("local", NO_PROVISIONER)]
    docs += [zoned(f"n{i}", "a" if i else "b") for i in range(3)]
    docs += [csi_node(f"n{i}", 1) for i in range(3)]
    docs += [volume(f"pv-{i}", nodeAffinity=on_node(f"pv-{i}", f"n{i}")) for i in (0, 1)]
    for i in range(4):
        made = mounting(pod(f"local-{i}", duration="20s"), f"data-{i}")
        docs += [at(claim(f"data-{i}", "local"), f"{5 * i}s"), at(made, f"{5 * i}s")]
    docs.append(pod_group("g", 2))
    docs += [mounting(pod(f"g-{i}", cpu="2", group="g"), f"g-data-{i}") for i in range(2)]
    docs += [claim(f"g-data-{i}") for i in range(2)]
    return docs


def recorded_kinds(directory: Path) -> set[str]:
    kinds = set()
    for _, path in segments.segment_files(directory):
        with gzip.open(path, "rb") as source:
            for line in source:
                record = json.loads(line)
                if record.get("op") == "a":
                    kinds.add(str((record.get("o") or {}).get("kind")))
    return kinds


def test_a_recording_with_volumes_replays_every_decision(tmp_path: Path) -> None:
    directory = tmp_path / "recording"
    loaded = manifests.load_documents(documents())
    options = runner.Options(until=120.0, record=(directory, 64 << 20))
    outcome = runner.Simulation(loaded, default_conf(), options).run()
    assert outcome.totals.binds >= 4
    kinds = {"PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode"}
    assert kinds <= recorded_kinds(directory)
    result = replay.replay(directory).as_json()
    assert result["differences"] == []
    assert result["decisions"]["differing"] == 0
    assert result["by_kind"]["binds"]["recorded"] >= 4


def test_a_recordings_workload_keeps_its_volumes(tmp_path: Path) -> None:
    directory = tmp_path / "recording"
    loaded = manifests.load_documents(documents())
    options = runner.Options(until=120.0, record=(directory, 64 << 20))
    runner.Simulation(loaded, default_conf(), options).run()
    derived = workload.derive(directory)
    kinds = {doc["kind"] for doc in derived.documents}
    assert {"PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode"} <= kinds
    volumes = [d for d in derived.documents if d["kind"] == "PersistentVolume"]
    assert sorted(v["metadata"]["name"] for v in volumes) == ["pv-0", "pv-1"]  # (not made)
    for made in volumes + [d for d in derived.documents if d["kind"] == "PersistentVolumeClaim"]:
        assert "status" not in made and "claimRef" not in made["spec"]
        assert "volumeName" not in made["spec"]  # (bound again as the pods are)
        assert not (made["metadata"].get("annotations") or {}).keys() - {manifests.SUBMIT_AT}
    played = runner.Simulation(
        manifests.load_documents(derived.documents), default_conf(), runner.Options(until=120.0)
    ).run()
    assert played.totals.binds == 4
