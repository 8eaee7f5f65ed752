"""A recorded simulation replays decision for decision; a changed decision, another
version, a conf that cannot be loaded and a cut recording are each told."""

import gzip
import json
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from kbatch import __version__
from kbatch.api.podgroup import PodGroupStatus
from kbatch.api.queue import QueueStatus
from kbatch.cli.main import main
from kbatch.cluster import pod_records
from kbatch.config import ConfigError
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.record import replay, replay_parts
from kbatch.record.store import segments
from kbatch.sim import manifests, runner, trace


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twenty minutes of the synthetic trace on 30 nodes, recorded."""
    spec = trace.TraceSpec(30, 1 / 3, 0)
    loaded = manifests.load_documents(trace.trace_objects(spec), "<trace>")
    directory = tmp_path_factory.mktemp("rec") / "recording"
    options = runner.Options(until=spec.seconds, record=(directory, 64 << 20))
    outcome = runner.Simulation(loaded, default_conf(), options).run()
    assert outcome.totals.binds > 20
    return directory


def _copy(recording: Path, target: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """The recording, each record passed through ``change`` (in place)."""
    target.mkdir()
    for _, path in segments.segment_files(recording):
        with gzip.open(path, "rb") as source, gzip.open(target / path.name, "wb") as out:
            for line in source:
                record = json.loads(line)
                change(record)
                out.write(json.dumps(record).encode() + b"\n")
    return target


def test_a_recorded_simulation_replays_every_decision(recording: Path) -> None:
    result = replay.replay(recording).as_json()
    assert result["decisions"]["differing"] == 0
    assert result["differences"] == []
    assert result["by_kind"]["binds"]["recorded"] > 20
    assert result["decisions"]["replayed"] == result["decisions"]["recorded"]
    assert result["stopped"] is None and result["warnings"] == []


def test_a_changed_decision_is_reported_with_its_session_and_pod(
    recording: Path, tmp_path: Path
) -> None:
    changed: list[str] = []

    def move_one_bind(record: dict[str, Any]) -> None:
        if record.get("op") == "out" and record["binds"] and not changed:
            record["binds"][0][1] = "nowhere"
            changed.append(record["binds"][0][0])

    copy = _copy(recording, tmp_path / "changed", move_one_bind)
    result = replay.replay(copy).as_json()
    assert result["by_kind"]["binds"]["differing"] == 2  # the recorded one and the replayed one
    first = result["differences"][0]
    assert first["object"] == changed[0]
    assert first["recorded"] == [changed[0], "nowhere"]
    assert first["replayed"] is None
    assert main(["replay", str(copy), "--fail-on-difference", "-o", "json"]) == 1
    assert main(["replay", str(copy)]) == 0


def test_another_version_replays_with_a_warning_naming_both(
    recording: Path, tmp_path: Path
) -> None:
    def older(record: dict[str, Any]) -> None:
        if "segment" in record:
            record["kbatch"] = "0.0.1"

    warned: list[str] = []
    result = replay.replay(_copy(recording, tmp_path / "old", older), warn=warned.append)
    assert result.total().differing == 0
    assert warned and "kbatch 0.0.1" in warned[0] and f"kbatch {__version__}" in warned[0]


def test_a_conf_that_cannot_be_loaded_is_refused_naming_the_field(
    recording: Path, tmp_path: Path
) -> None:
    def broken(record: dict[str, Any]) -> None:
        if record.get("op") == "conf":
            record["conf"]["tiers"] = []

    copy = _copy(recording, tmp_path / "badconf", broken)
    with pytest.raises(ConfigError, match=r"recorded scheduler conf line [0-9]+: tiers: must have"):
        replay.replay(copy)
    assert main(["replay", str(copy)]) == 2


def test_a_cut_recording_replays_what_it_holds_and_says_where_it_stopped(
    recording: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cut = tmp_path / "cut"
    cut.mkdir()
    (path,) = [p for _, p in segments.segment_files(recording)]
    data = path.read_bytes()
    (cut / path.name).write_bytes(data[: len(data) // 2])
    result = replay.replay(cut)
    whole = replay.replay(recording)
    assert 0 < result.sessions < whole.sessions
    assert result.total().differing == 0
    assert result.stopped is not None and result.stopped.file == str(cut / path.name)
    assert main(["replay", str(cut)]) == 0
    assert f"stopped early: {cut / path.name}: offset" in capsys.readouterr().out
    shutil.rmtree(cut)


def test_a_window_replays_only_its_sessions(recording: Path) -> None:
    whole = replay.replay(recording)
    window = replay.replay(recording, start=300.0, end=900.0)
    assert 0 < window.sessions < whole.sessions
    assert window.total().recorded < whole.total().recorded


def test_record_sizes_and_where_record_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from kbatch.cli.run import byte_size

    assert byte_size("256M") == 256 << 20
    assert byte_size("1g") == 1 << 30
    assert byte_size("4096") == 4096
    assert main(["bench", "--record", str(tmp_path / "r"), "--size", "10x100"]) == 2
    assert "--record goes with --trace only" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "--trace", "--record-max-bytes", "lots"])
    assert "not a size: 'lots'" in capsys.readouterr().err


def test_a_pods_status_writes_are_not_parsed_whole_again(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each pod is parsed whole once, when it comes: its later writes (a bind, a
    kubelet's status) share the rest with the version held, as they did live."""
    arrivals, held = 0, set()
    for record in segments.Reading(recording).records():
        obj, op = record.get("o") or {}, record.get("op")
        if op == "a" and obj.get("kind") == "Pod":
            key = f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
            arrivals += key not in held
            held.add(key)
        elif op == "d" and record.get("k") == "Pod":
            held.discard(str(record["key"]))
    whole = pod_records._pod_fields
    parsed: list[object] = []
    monkeypatch.setattr(pod_records, "_pod_fields", lambda obj: parsed.append(obj) or whole(obj))
    result = replay.replay(recording).as_json()
    assert result["decisions"]["differing"] == 0
    assert 20 < len(parsed) == arrivals


def test_the_statuses_written_back_are_the_models_the_sessions_published(
    recording: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PodGroup's or Queue's status written after a session is what that session
    published: the replay hands the state the session's model, as the simulator's writer
    does, instead of validating the recorded status again; and each replayed session
    carries the recorded session's id, so that the statuses it publishes are the recorded
    ones field for field (their conditions' transitionID included), compared whole.
    A status written by another (a group's running count, moved as its pods start) is
    validated as recorded."""
    writes = Counter()
    held: set[tuple[str, str]] = set()
    for record in segments.Reading(recording).records():
        obj = record.get("o") or {}
        if record.get("op") == "a" and obj.get("kind") in ("PodGroup", "Queue"):
            key = (obj["kind"], f"{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}")
            writes[obj["kind"]] += key in held and "status" in obj
            held.add(key)
    validated: Counter[str] = Counter()
    for model in (PodGroupStatus, QueueStatus):
        monkeypatch.setattr(model, "model_validate", _counted(model, validated))
    keyed: list[object] = []
    statuses = replay_parts.statuses
    monkeypatch.setattr(
        replay_parts, "statuses", lambda pairs: keyed.append(pairs) or statuses(pairs)
    )
    result = replay.replay(recording).as_json()
    assert result["decisions"]["differing"] == 0
    assert writes["PodGroup"] > 20 and writes["Queue"] > 20
    assert validated["QueueStatus"] == 0, (validated, writes)
    assert validated["PodGroupStatus"] < writes["PodGroup"] / 2, (validated, writes)
    assert keyed == []


def _counted(model: type[BaseModel], validated: Counter[str]) -> Callable[..., BaseModel]:
    validate = model.model_validate

    def counted(obj: Any, *args: Any, **kwargs: Any) -> BaseModel:
        validated[model.__name__] += 1
        return validate(obj, *args, **kwargs)

    return counted


def test_a_recordings_assumed_ttl_is_read_as_recorded_or_refused_naming_it() -> None:
    assert replay_parts.assumed_ttl(None) is None  # until the watch shows it
    assert replay_parts.assumed_ttl(30) == 30.0  # recorded when confirmed binds expired
    for bad in ("30", True, [30]):
        with pytest.raises(segments.RecordingError, match="assumed_ttl"):
            replay_parts.assumed_ttl(bad)
