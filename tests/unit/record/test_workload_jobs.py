"""A recording played forward keeps what its batch/v1 Jobs told the scheduler: their own
deadline, given to the pods they made (``kbatch.record.workload``), so the baseline
lends the room kept for a gang as the recorded run did."""

from pathlib import Path

import yaml

from kbatch.record import playforward, workload
from tests.unit.record.test_playforward import _record

LEND = Path(__file__).parents[2] / "scenarios" / "policy" / "lend-job-deadlines.yaml"


def recorded(tmp_path: Path) -> Path:
    directory = tmp_path / "rec"
    outcome = _record(LEND, directory, 30.0)
    assert outcome.totals.binds == 8
    return directory


def test_a_job_s_deadline_goes_to_the_pods_it_made(tmp_path: Path) -> None:
    work = workload.derive(recorded(tmp_path))
    deadlines = {
        pod["metadata"]["name"].rpartition("-")[0]: pod["spec"].get("activeDeadlineSeconds")
        for pod in work.documents
        if pod["kind"] == "Pod"
    }
    assert deadlines == {"big": None, "held-0": 14, "held-1": 14, **{
        f"small-{t}": 5 for t in range(2, 6)
    }}  # fmt: skip
    assert work.counts["jobDeadlinesOnPods"] == 6


def test_the_baseline_lends_kept_room_as_the_recording_did(tmp_path: Path) -> None:
    directory = recorded(tmp_path)
    conf = tmp_path / "conf.yaml"
    (conf_map,) = (d for d in yaml.safe_load_all(LEND.read_text()) if d["kind"] == "ConfigMap")
    conf.write_text(conf_map["data"]["conf.yaml"])
    fidelity = playforward.play(directory, conf).as_json()["fidelity"]
    assert fidelity["binds"] == {"recorded": 8, "simulated": 8}
    assert fidelity["startedLater"] == 0 and fidelity["startedEarlier"] == 0
    assert fidelity["startedAsRecorded"] == 7  # the gang, and each Job's pod
