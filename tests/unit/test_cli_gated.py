"""``kbatch explain`` and ``jobs`` of work held by scheduling gates: the gates named, the
gated pods counted, and a gated pod of its own explained rather than not found."""

import json

import pytest

from kbatch.cli import main as cli
from kbatch.cli import visibility as cli_visibility
from scenarios import live
from scenarios import objects as o
from unit.test_cli_visibility import StaticSource

WORDS = "1 pod waits for scheduling gates to be removed: example.com/quota"


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> StaticSource:
    documents = [o.node("n1", cpu="4"), *live.gang("held", 3, duration="30s")]
    documents[-1]["spec"]["schedulingGates"] = [{"name": "example.com/quota"}]
    solo = o.pod("solo")
    solo["spec"]["schedulingGates"] = [{"name": "b"}, {"name": "a"}]
    source = StaticSource(live.cluster_at([*documents, solo], 10.0))
    monkeypatch.setattr(cli_visibility, "source_for", lambda args: source)
    return source


def kbatch(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = cli.main(list(argv))
    return code, capsys.readouterr().out


def test_a_gang_waiting_for_a_gated_pod_says_so(cluster, capsys) -> None:
    code, out = kbatch(capsys, "explain", "held", "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["reason"].endswith(WORDS)
    assert data["podStatuses"] == {"Pending": 2, "Gated": 1}
    assert data["conditions"][0]["reason"] == "SchedulingGated"
    code, out = kbatch(capsys, "jobs")
    assert code == 0 and WORDS in " ".join(out.split())


def test_a_gated_pod_of_its_own_is_explained(cluster, capsys) -> None:
    code, out = kbatch(capsys, "explain", "solo")
    assert code == 0
    assert "waits for scheduling gates to be removed: b, a" in " ".join(out.split())
    code, out = kbatch(capsys, "explain", "solo", "-o", "json")
    assert json.loads(out) == {
        "namespace": "default",
        "name": "solo",
        "kind": "Pod",
        "phase": "Pending",
        "schedulingGates": ["b", "a"],
        "reason": "waits for scheduling gates to be removed: b, a",
    }
