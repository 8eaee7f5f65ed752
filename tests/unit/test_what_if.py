"""``kbatch simulate --from-cluster``: the files' objects added to a cluster read as a live
one (a simulated cluster stands for it), and what would become of each group."""

import json
from pathlib import Path

import pytest
import yaml

from kbatch.cli import main as cli
from kbatch.cli import visibility as cli_visibility
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.visibility import standing
from scenarios import live
from scenarios import objects as o

NOW = 10.0
CLUSTER = [
    o.node("n1", cpu="4"),
    *live.gang("first", 4, duration="45s", deadline=45),
]


class Source:
    def __init__(self, objects: standing.ClusterObjects) -> None:
        self._objects = objects

    def objects(self, *, events_in: str | None) -> standing.ClusterObjects:
        return self._objects

    def held_jobs(self) -> list[dict]:
        return list(self._objects.jobs)

    def conf(self):
        return default_conf(), "the default (a test's)"


@pytest.fixture(autouse=True)
def cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    source = Source(live.cluster_at(CLUSTER, NOW))
    monkeypatch.setattr(cli_visibility, "source_for", lambda args: source)


def written(tmp_path: Path, name: str, documents: list[dict]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(documents), encoding="utf-8")
    return path


def what_if(capsys, *files: Path, output: str = "json"):
    code = cli.main(["simulate", "--from-cluster", *map(str, files), "-o", output])
    out, err = capsys.readouterr()
    return code, (json.loads(out) if output == "json" and code == 0 else out), err


def test_a_gang_waits_for_the_running_one_and_a_gang_on_a_new_node_starts_at_once(
    tmp_path, capsys
) -> None:
    waits = written(tmp_path, "waits.yaml", live.gang("mine", 4, deadline=30))
    fits = written(
        tmp_path,
        "fits.yaml",
        [o.node("n2", cpu="2"), *live.gang("small", 2, deadline=30)],
    )
    code, data, err = what_if(capsys, waits, fits)
    assert code == 0, err
    mine, small = data["groups"]
    assert (mine["name"], mine["admitted"], mine["eta"]["seconds"]) == ("mine", False, 35.0)
    assert mine["nodes"] and set(mine["nodes"]) <= {"n1", "n2"}  # where it starts, then
    assert mine["eta"]["confidence"] == "high"
    assert mine["reason"], mine  # told why it waits
    assert (small["name"], small["admitted"], small["nodes"]) == ("small", True, ["n2"])
    assert small["eta"]["seconds"] == 0.0 and small["reason"] == ""


def test_the_table_names_each_group(tmp_path, capsys) -> None:
    waits = written(tmp_path, "waits.yaml", live.gang("mine", 4, deadline=30))
    code, out, err = what_if(capsys, waits, output="table")
    assert code == 0, err
    assert "mine" in out and "~35s" in out and "n1" in out


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"kind": "Job", "metadata": {"name": "j"}}, "Job j: kind: a batch/v1 Job is not"),
        (o.pod_group("first", 4, None), "PodGroup default/first: metadata.name: in the cluster"),
        ({"kind": "Pod", "metadata": {}}, "Pod ?: metadata.name: required"),
    ],
)
def test_what_cannot_be_added_is_refused_naming_the_object_and_field(
    document, message, tmp_path, capsys
) -> None:
    path = written(tmp_path, "bad.yaml", [document])
    code, _, err = what_if(capsys, path)
    assert code == 2 and f"{path}: {message}" in err, err
