"""``kbatch explain --eta`` on the synthetic cluster of ``kbatch bench --eta`` (1,000 full
nodes, 10,000 pending pods): the answer, not its time (``kbatch bench --eta`` times it)."""

import json

import pytest

from kbatch.cli import main as cli
from kbatch.cli import visibility as cli_visibility
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.visibility import eta_bench, standing


class Source:
    def __init__(self, objects: standing.ClusterObjects) -> None:
        self._objects = objects

    def objects(self, *, events_in: str | None) -> standing.ClusterObjects:
        return self._objects

    def held_jobs(self) -> list[dict]:
        return list(self._objects.jobs)

    def served(self, path: str) -> None:
        return None  # no kbatch run: the command computes

    def conf(self):
        return default_conf(), "the default"


@pytest.fixture(scope="module")
def objects() -> standing.ClusterObjects:
    return eta_bench.synthetic_cluster()


ANSWERS = {
    "waiting-5": "~5 min (runtimes from activeDeadlineSeconds of 135 pods; to within 5 min; "
    "high confidence)",
    "waiting-500": "~40 min (12 running jobs finish by then; 932 waiting jobs start first; "
    "runtimes from activeDeadlineSeconds of 1323 pods; to within 5 min; high confidence)",
}


@pytest.mark.parametrize("target", ANSWERS)
def test_explain_eta_on_1000_nodes_and_10000_pending_pods(
    target, objects, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(cli_visibility, "source_for", lambda args: Source(objects))
    code = cli.main(["explain", f"bench/{target}", "--eta", "--eta-budget", "10m", "-o", "json"])
    out, _ = capsys.readouterr()
    assert code == 0
    eta = json.loads(out)["eta"]
    assert (eta["text"], eta["confidence"]) == (ANSWERS[target], "high"), eta
