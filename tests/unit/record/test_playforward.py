"""A recording played forward under another conf (``kbatch replay DIR --config CONF``):
the workload derived from it (submissions, runtimes, what was running at the window's
start), the recorded conf's run against the recording, the comparison, and bad input."""

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbatch import __version__
from kbatch.cli.main import main
from kbatch.record import playforward, replay_marks, workload
from kbatch.record.store import segments
from kbatch.record.store.segments import RecordingError
from kbatch.sim import manifests, runner
from tests.unit.record.test_replay_split import checkpointed

__all__ = ["checkpointed"]  # the fixture, used by name

ROOT = Path(__file__).parents[3]
KUBE_BATCH = ROOT / "examples" / "conf" / "kube-batch.yaml"
RECLAIM = ROOT / "tests" / "scenarios" / "seed-reclaim.yaml"
KEYS = {
    "recording",
    "version",
    "from",
    "seconds",
    "runs",
    "config",
    "workload",
    "fidelity",
    "comparison",
    "stopped",
    "warnings",
    "wall_seconds",
}


def _record(source: Path, directory: Path, until: float) -> runner.Outcome:
    loaded = runner.load([source])
    conf = runner.resolve_conf(None, loaded)
    manifests.check_unique(loaded)
    options = runner.Options(until=until, record=(directory, 64 << 20))
    return runner.Simulation(loaded, conf, options).run()


@pytest.fixture(scope="module")
def reclaimed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kube-batch reclaim story under the default conf (which reclaims), recorded:
    queue c's gang starts by evicting one pod of a and one of b."""
    directory = tmp_path_factory.mktemp("rec") / "reclaim"
    outcome = _record(RECLAIM, directory, 120.0)
    assert outcome.totals.evictions == 2
    return directory


@pytest.fixture(scope="module")
def finishing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Pods that finish at their sim-duration, recorded: the recording alone tells how
    long each ran."""
    source = tmp_path_factory.mktemp("src") / "finishing.yaml"
    documents = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}},
        }
    ]
    for i, (submit, run) in enumerate([(0, 30.4), (0, 50), (5, 20), (10, 40), (12, 7)]):
        documents.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"p{i}",
                    "annotations": {
                        manifests.SUBMIT_AT: f"{submit}s",
                        manifests.DURATION: f"{run}s",
                    },
                },
                "spec": {
                    "schedulerName": "kbatch",
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                },
            }
        )
    source.write_text(yaml.safe_dump_all(documents))
    directory = source.parent / "recording"
    outcome = _record(source, directory, 300.0)
    assert outcome.totals.binds == 5
    return directory


def _pod(name: str, cpu: str, submit: float, run: float, **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "annotations": {manifests.SUBMIT_AT: f"{submit}s", manifests.DURATION: f"{run}s"},
        },
        "spec": {
            "schedulerName": "kbatch",
            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
    }


def test_another_schedulers_pods_take_their_room_where_they_were_bound(
    tmp_path: Path,
) -> None:
    source = tmp_path / "foreign.yaml"
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1"},
        "status": {"allocatable": {"cpu": "2", "memory": "8Gi", "pods": "110"}},
    }
    theirs = _pod("theirs", "1", 0, 30, schedulerName="default-scheduler", nodeName="n1")
    source.write_text(yaml.safe_dump_all([node, theirs, _pod("ours", "2", 5, 10)]))
    _record(source, tmp_path / "recording", 120.0)
    work = workload.derive(tmp_path / "recording")
    pods = {d["metadata"]["name"]: d for d in work.documents if d["kind"] == "Pod"}
    assert pods["theirs"]["spec"]["nodeName"] == "n1"
    assert pods["theirs"]["metadata"]["annotations"][manifests.DURATION] == "30.000s"
    assert work.counts["otherSchedulersPods"] == 1
    assert set(work.recorded.jobs) == {"Pod default/ours"}
    assert work.recorded.jobs["Pod default/ours"].started == 30.0
    fidelity = playforward.play(tmp_path / "recording", KUBE_BATCH).as_json()["fidelity"]
    assert fidelity["startedAsRecorded"] == 1 and fidelity["startedEarlier"] == 0


def _durations(work: workload.Workload) -> dict[str, str | None]:
    return {
        d["metadata"]["name"]: d["metadata"]["annotations"].get(manifests.DURATION)
        for d in work.documents
        if d["kind"] == "Pod"
    }


def test_runtimes_come_from_bind_to_finish(finishing: Path) -> None:
    work = workload.derive(finishing)
    durations = _durations(work)
    # Whole ticks: bound at a session, seen Succeeded at the first tick after its run.
    assert durations == {
        "p0": "31.000s",
        "p1": "50.000s",
        "p2": "20.000s",
        "p3": "40.000s",
        "p4": "7.000s",
    }
    assert work.counts["pods"] == 5 and work.counts["runtimeUnknown"] == 0
    assert not any(d["spec"].get("nodeName") for d in work.documents if d["kind"] == "Pod")


def test_a_window_starts_with_what_ran_then_and_leaves_out_what_was_over(
    finishing: Path,
) -> None:
    work = workload.derive(finishing, start=40.0, end=70.0)
    pods = {d["metadata"]["name"]: d for d in work.documents if d["kind"] == "Pod"}

    def annotation(name: str, key: str) -> str:
        return str(pods[name]["metadata"]["annotations"].get(key))

    # On 2 cpu: p0 ran 0-31 s, p1 0-50, p2 31-51, p3 50-90, p4 51-58.
    assert set(pods) == {"p1", "p2", "p3", "p4"}
    assert "podsLeftOut" not in work.counts, "p0, over before the window, is not in it"
    assert work.counts["runningAtStart"] == 2
    assert pods["p1"]["spec"]["nodeName"] == pods["p2"]["spec"]["nodeName"] == "n1"
    assert annotation("p1", manifests.DURATION) == "10.000s"
    assert annotation("p2", manifests.DURATION) == "11.000s"
    assert "nodeName" not in pods["p3"]["spec"]
    assert annotation("p3", manifests.SUBMIT_AT) == "0.000s"
    # p3 ran on past the window's end: its runtime is not known there.
    assert annotation("p3", manifests.DURATION) == "None"
    assert annotation("p4", manifests.DURATION) == "7.000s"
    assert work.seconds == 30.0
    assert work.recorded.jobs["Pod default/p1"].started == 0.0
    assert work.recorded.jobs["Pod default/p3"].started == 10.0
    played = playforward.play(finishing, KUBE_BATCH, start=40.0, end=70.0)
    assert played.as_json()["fidelity"]["startedAsRecorded"] == 4


def _rewritten(recording: Path, target: Path, change: Callable[[list[Any]], None]) -> Path:
    """A copy of ``recording`` whose records (each segment's, as a list) ``change``
    changes in place."""
    target.mkdir()
    for _, path in segments.segment_files(recording):
        with gzip.open(path, "rb") as source:
            records = [json.loads(line) for line in source]
        change(records)
        with gzip.open(target / path.name, "wb") as out:
            out.writelines(json.dumps(r).encode() + b"\n" for r in records)
    return target


def _node_deleted_at_20s(records: list[Any]) -> None:
    at = next(i for i, r in enumerate(records) if r.get("t", 0) > 20)
    records.insert(at, {"op": "d", "t": 20.0, "k": "Node", "key": "n1"})


def _listed_in_any_order(records: list[Any]) -> None:
    """As a live run's first lists come: the PodGroups before the Queues, a little
    apart, all before the first session (from then on, everything a second later);
    and queue c's gang's PodGroup half a second before queue c itself."""
    opened = next(i for i, r in enumerate(records) if r.get("op") == "sess")
    for record in records[1:opened]:
        kind = (record.get("o") or {}).get("kind")
        record["t"] = {"PodGroup": 0.1, "Queue": 0.3}.get(kind, 0.0)
    for record in records[opened:]:
        record["t"] = record.get("t", 0.0) + 1.0
    queue_c = next(
        i
        for i, r in enumerate(records)
        if (r.get("o") or {}).get("kind") == "Queue" and r["o"]["metadata"]["name"] == "c"
    )
    group_c = next(
        i
        for i, r in enumerate(records)
        if (r.get("o") or {}).get("kind") == "PodGroup" and r["o"]["metadata"]["name"] == "jc"
    )
    moved = records.pop(group_c)
    moved["t"] = records[queue_c]["t"] - 0.5
    records.insert(queue_c, moved)


def test_objects_listed_before_the_first_session_are_there_at_its_start(
    reclaimed: Path, tmp_path: Path
) -> None:
    copy = _rewritten(reclaimed, tmp_path / "listed", _listed_in_any_order)
    work = workload.derive(copy)
    due = {
        (d["kind"], d["metadata"]["name"]): d["metadata"]["annotations"][manifests.SUBMIT_AT]
        for d in work.documents
        if d["kind"] in ("Queue", "PodGroup")
    }
    assert due[("Queue", "a")] == due[("PodGroup", "ja")] == "0.000s"
    assert due[("Queue", "c")] == due[("PodGroup", "jc")] == "21.000s"
    shown = playforward.play(copy, KUBE_BATCH).as_json()
    assert shown["warnings"] == []  # no group refused for a queue not there yet
    assert shown["fidelity"]["binds"] == {"recorded": 8, "simulated": 8}
    assert shown["fidelity"]["startedAsRecorded"] == 3


def test_another_version_plays_forward_with_a_warning_naming_both(
    finishing: Path, tmp_path: Path
) -> None:
    def older(records: list[Any]) -> None:
        records[0]["kbatch"] = "0.0.1"

    copy = _rewritten(finishing, tmp_path / "old", older)
    warnings = playforward.play(copy, KUBE_BATCH).as_json()["warnings"]
    assert any("kbatch 0.0.1" in w and f"kbatch {__version__}" in w for w in warnings)


def test_a_node_deleted_while_recording_is_cordoned_from_then_on(
    finishing: Path, tmp_path: Path
) -> None:
    copy = _rewritten(finishing, tmp_path / "deleted-node", _node_deleted_at_20s)
    work = workload.derive(copy)
    nodes = [d for d in work.documents if d["kind"] == "Node"]
    assert [d["metadata"]["annotations"][manifests.SUBMIT_AT] for d in nodes] == [
        "0.000s",
        "20.000s",
    ]
    assert nodes[1]["spec"]["unschedulable"] is True and work.counts["nodesDeleted"] == 1
    # The recorded pods ran on (the deletion is made up); in the simulator, those that
    # waited for room on n1 after 20 s never start.
    fidelity = playforward.play(copy, KUBE_BATCH).as_json()["fidelity"]
    assert fidelity["startedOnlyRecorded"] == 3 and fidelity["startedAsRecorded"] == 2


def test_the_baseline_matches_the_recording(finishing: Path, tmp_path: Path) -> None:
    played = playforward.play(finishing, KUBE_BATCH)
    fidelity = played.as_json()["fidelity"]
    assert fidelity["binds"] == {"recorded": 5, "simulated": 5}
    assert fidelity["startedAsRecorded"] == 5
    assert fidelity["startedEarlier"] == fidelity["startedLater"] == 0
    waits = fidelity["queues"]["default"]["waitP50"]
    assert waits[0] == waits[1] is not None and waits[0] > 0


def test_another_conf_is_compared_with_the_recorded_one(reclaimed: Path) -> None:
    shown = playforward.play(reclaimed, KUBE_BATCH).as_json()
    assert set(shown) == KEYS
    assert shown["runs"] == ["recorded conf", "kube-batch.yaml"]
    assert set(shown["fidelity"]) >= {"binds", "jobsStarted", "startedAsRecorded", "queues"}
    assert shown["fidelity"]["binds"] == {"recorded": 8, "simulated": 8}
    assert shown["fidelity"]["startedAsRecorded"] == 3
    assert shown["workload"]["evicted"] == 2
    comparison = shown["comparison"]
    assert set(comparison) == {"runs", "queues", "utilisation", "evictions", "jobs", "overTime"}
    # kube-batch's conf does not reclaim: c's gang never starts, nobody is evicted.
    assert comparison["evictions"] == [2, 0]
    assert comparison["jobs"]["onlyBase"] == ["PodGroup default/jc"]
    assert comparison["queues"]["c"]["waitP50"][1] is None


def test_the_recorded_conf_itself_changes_nothing(reclaimed: Path, tmp_path: Path) -> None:
    work = workload.derive(reclaimed)
    assert work.conf is not None
    same = tmp_path / "recorded.yaml"
    same.write_text(yaml.safe_dump(work.conf))
    comparison = playforward.play(reclaimed, same).as_json()["comparison"]
    jobs = comparison["jobs"]
    assert jobs["earlier"] == jobs["later"] == jobs["onlyBase"] == jobs["onlyOther"] == []
    assert jobs["same"] == 3
    assert comparison["evictions"] == [2, 2]
    for row in comparison["queues"].values():
        for pair in row.values():
            assert pair[0] == pair[1]
    for row in comparison["utilisation"].values():
        assert row["mean"][0] == row["mean"][1]


def test_the_command_prints_json_a_table_and_the_report(
    reclaimed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "report.html"
    args = ["replay", str(reclaimed), "--config", str(KUBE_BATCH)]
    assert main([*args, "-o", "json", "--report", str(page)]) == 0
    assert set(json.loads(capsys.readouterr().out)) == KEYS
    html = page.read_text()
    assert "recorded conf" in html and "kube-batch.yaml" in html and "<script" not in html
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "BASELINE AGAINST THE RECORDING" in out
    assert "binds: recorded 8, simulated 8" in out
    assert "evictions: 2 → 0" in out


def test_a_conf_that_cannot_be_loaded_is_refused_naming_the_field(
    reclaimed: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("actions: enqueue, allocate\ntiers: []\n")
    assert main(["replay", str(reclaimed), "--config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"kbatch: error: {bad}" in err and "tiers: must have" in err
    assert main(["replay", str(reclaimed), "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert main(["replay", str(reclaimed), "--report", str(tmp_path / "r.html")]) == 2
    assert "--report goes with --config" in capsys.readouterr().err
    assert main([*args_of(reclaimed), "--fail-on-difference"]) == 2
    assert "--fail-on-difference goes without --config" in capsys.readouterr().err


def args_of(recording: Path) -> list[str]:
    return ["replay", str(recording), "--config", str(KUBE_BATCH)]


def test_a_window_with_nothing_to_replay_says_so(
    reclaimed: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(RecordingError, match="nothing to replay"):
        workload.derive(reclaimed, start=3600.0)
    assert main(["replay", str(reclaimed), "--config", str(KUBE_BATCH), "--from", "1h"]) == 2
    assert "nothing to replay" in capsys.readouterr().err


def test_a_window_read_from_a_checkpoint_is_the_window_read_from_the_start(
    checkpointed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    marks = replay_marks.session_marks(checkpointed)
    taken = [c.t - marks.first for c in marks.checkpoints]
    read_from: list[int] = []
    found = replay_marks.checkpoint_at

    def noted(marks: replay_marks.Marks, seconds: float) -> replay_marks.Begin | None:
        begin = found(marks, seconds)
        read_from.append(0 if begin is None else begin.segment)
        return begin

    monkeypatch.setattr(replay_marks, "checkpoint_at", noted)
    starts = (taken[1], taken[1] + 7.5, taken[-2] + 1.0, 300.0, 0.5 * (taken[0] + taken[1]))
    for start in starts:
        from_checkpoint = workload.derive(checkpointed, start, start + 200.0)
        with monkeypatch.context() as patch:
            patch.setattr(replay_marks, "checkpoint_at", lambda marks, seconds: None)
            from_start = workload.derive(checkpointed, start, start + 200.0)
        assert from_checkpoint == from_start, start
        assert from_start.counts["runningAtStart"] > 0 and from_start.binds > 0
    assert len(read_from) == len(starts) and all(n > 1 for n in read_from), read_from


def test_a_pod_made_again_under_a_name_in_the_window_is_told_apart() -> None:
    def pod(uid: str) -> dict[str, Any]:
        meta = {"name": "p", "namespace": "ns", "uid": uid}
        return {"kind": "Pod", "metadata": meta, "spec": {"schedulerName": "kbatch"}}

    def life(uid: str, made: float, bound: float, deleted: float | None) -> list[Any]:
        records = [
            {"op": "a", "t": made, "o": pod(uid)},
            {"op": "as", "t": bound, "key": "ns/p", "node": "n1"},
        ]
        return records + (
            [] if deleted is None else [{"op": "d", "t": deleted, "k": "Pod", "key": "ns/p"}]
        )

    deriving = workload._Deriving(start=100.0, end=None)
    records = [{"op": "sess", "t": 0.0}, *life("u1", 1, 2, 50), *life("u2", 60, 110, 150)]
    for record in [*records, *life("u3", 160, 170, None)]:
        deriving.take(record)
    pods, kept = workload._kept_pods(deriving, 100.0, frozenset({"kbatch"}))
    # u1 was over before the window: u2 keeps the name, u3 is told apart from it
    assert [p["metadata"]["name"] for p in pods] == ["p", "p-again-1"]
    assert [k[0].name for k in kept] == ["p", "p-again-1"]
