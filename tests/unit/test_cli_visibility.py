"""``kbatch queues / jobs / explain``: tables and data, on a simulated cluster read as a live one."""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from kbatch import kubeapi
from kbatch.api import duration
from kbatch.cli import main as cli
from kbatch.cli import visibility as cli_visibility
from kbatch.operators.scheduler.core.runner import default_conf
from kbatch.visibility import eta
from kbatch.visibility import standing as visibility
from scenarios import live
from scenarios import objects as o

NOW = 10.0
DOCUMENTS = [
    o.node("n1", cpu="4"),
    o.queue("research", 2),
    *live.gang("first", 4, duration="45s", deadline=45),
    *live.gang("second", 4, duration="30s", deadline=30, queue="research"),
    *live.gang("third", 2, duration="30s", deadline=30, submit_at="1s"),
]


class StaticSource:
    """The cluster of ``objects``, read as the CLI reads one."""

    def __init__(self, objects: visibility.ClusterObjects) -> None:
        self._objects = objects
        self.asked: list[tuple[str, str | None]] = []

    def objects(self, *, events_in: str | None) -> visibility.ClusterObjects:
        self.asked.append(("objects", events_in))
        return self._objects

    def held_jobs(self) -> list[dict]:
        self.asked.append(("jobs", None))
        return list(self._objects.jobs)

    def served(self, path: str) -> None:
        return None  # no kbatch run: the command computes

    def conf(self):
        return default_conf(), "the default (a test's)"


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> StaticSource:
    source = StaticSource(live.cluster_at(DOCUMENTS, NOW))
    monkeypatch.setattr(cli_visibility, "source_for", lambda args: source)
    return source


def kbatch(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_queues_table(cluster, capsys) -> None:
    code, out, err = kbatch(capsys, "queues")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].split() == [
        "QUEUE", "WEIGHT", "STATE", "SHARE", "DESERVED", "ALLOCATED", "REQUEST",
        "PENDING", "INQUEUE", "RUNNING", "WAITING",
    ]  # fmt: skip
    assert lines[1].split() == [
        "research",
        "2",
        "Open",
        "0.00",
        "cpu=2667m",
        "-",
        "cpu=4",
        "1",
        "0",
        "0",
        "1",
    ]
    assert lines[2].split() == [
        "default",
        "1",
        "Open",
        "3.00",
        "cpu=1333m",
        "cpu=4",
        "cpu=6",
        "1",
        "0",
        "1",
        "1",
    ]
    assert all(line == line.rstrip() for line in lines)


def test_queues_as_json(cluster, capsys) -> None:
    _, out, _ = kbatch(capsys, "queues", "-o", "json")
    data = json.loads(out)
    # as of when the cluster was read, and under which conf (as kbatch jobs says)
    assert (data["asOf"], data["schedulerConf"]) == (
        "1970-01-01T00:00:10.000000Z", "the default (a test's)",
    )  # fmt: skip
    research = data["queues"][0]
    assert research == {
        "name": "research",
        "position": 1,
        "weight": 2,
        "state": "Open",
        "share": 0.0,
        "deserved": {"cpu": "2667m"},
        "allocated": {},
        "request": {"cpu": "4"},
        "capability": None,
        "podGroups": {"pending": 1, "inqueue": 0, "running": 0},
        "waiting": 1,
    }


def test_jobs_in_line_with_positions_and_reasons(cluster, capsys) -> None:
    _, out, _ = kbatch(capsys, "jobs")
    rows = [line.split(None, 8) for line in out.splitlines()]
    assert rows[0] == [
        "POS",
        "QUEUE",
        "Q-POS",
        "NAMESPACE",
        "NAME",
        "PHASE",
        "PODS",
        "AGE",
        "REASON",
    ]
    assert [row[:8] for row in rows[1:]] == [
        ["1", "research", "1", "default", "second", "Pending", "0/4", "10s"],
        ["2", "default", "1", "default", "third", "Pending", "0/2", "9s"],
    ]
    assert rows[1][8].startswith("4/4 tasks in gang unschedulable: not admitted")
    assert cluster.asked == [("objects", None)]  # no Jobs, no events: nothing asked for them


def test_jobs_of_one_queue_keep_their_place_in_the_cluster(cluster, capsys) -> None:
    _, out, _ = kbatch(capsys, "jobs", "-q", "default", "-o", "yaml")
    data = yaml.safe_load(out)
    assert data["schedulerConf"] == "the default (a test's)"
    assert [(j["name"], j["position"], j["queuePosition"]) for j in data["jobs"]] == [
        ("third", 2, 1)
    ]
    _, out, _ = kbatch(capsys, "jobs", "-n", "elsewhere")
    assert out.splitlines()[-1] == "no waiting jobs"


def test_jobs_with_eta(cluster, capsys) -> None:
    code, out, _ = kbatch(capsys, "jobs", "--eta")
    assert code == 0 and cluster.asked == [("objects", None), ("jobs", None)]  # for the forecast
    header, second, third = out.splitlines()
    assert header.split()[8] == "ETA"
    # the line as it stands now puts research first (its share is 0); once the running
    # job ends, the default queue's share is 0 too, and the older queue goes first
    assert second.split()[8] == "~65s" and third.split()[8] == "~35s"
    _, out, _ = kbatch(capsys, "jobs", "--eta", "-o", "json")
    second, third = (job["eta"] for job in json.loads(out)["jobs"])
    assert (second["seconds"], second["waitingJobsStartingFirst"]) == (65.0, 1)
    assert (third["seconds"], third["confidence"]) == (35.0, "high")
    assert third["runtimes"] == "activeDeadlineSeconds of 4 pods"


def test_explain_with_eta(cluster, capsys) -> None:
    code, out, _ = kbatch(capsys, "explain", "default/third", "--eta")
    assert code == 0 and cluster.asked == [("objects", "default"), ("jobs", None)]
    facts = dict(
        re.split(r"\s{2,}", line, maxsplit=1) for line in out.split("\n\n")[0].splitlines()
    )
    assert facts["PodGroup"] == "default/third"
    assert (
        facts["Position"]
        == "1 in queue default, 2 in the cluster (0 waiting ahead in its queue, 1 in all)"
    )
    assert facts["Estimated start"] == (
        "~35s (1 running job finishes by then; runtimes from activeDeadlineSeconds of 4 pods; "
        "high confidence)"
    )
    # what no estimate can know is said with it: work submitted from now on
    assert facts["Assuming"].startswith("no work submitted from now on goes first")
    assert facts["Scheduler conf"] == "the default (a test's)"
    assert "Running in queue default: default/first" in out


def test_explain_as_data(cluster, capsys) -> None:
    _, out, _ = kbatch(capsys, "explain", "second", "-n", "default", "-o", "json")
    data = json.loads(out)
    assert (data["name"], data["position"], data["waitingAheadInCluster"]) == ("second", 1, 0)
    assert data["conditions"][0]["type"] == "Unschedulable"
    assert data["minResources"] == {"cpu": "4", "pods": "4"} and "eta" not in data


def test_explain_of_nothing_is_an_error(cluster, capsys) -> None:
    code, out, err = kbatch(capsys, "explain", "nobody")
    assert (code, out) == (1, "")
    assert err == "kbatch: error: no PodGroup or pod default/nobody\n"


def test_an_api_server_that_refuses_is_one_line(monkeypatch, capsys) -> None:
    class Refusing(StaticSource):
        def objects(self, *, events_in):
            raise kubeapi.ApiError(403, 'pods is forbidden: User "me" cannot list pods')

    monkeypatch.setattr(cli_visibility, "source_for", lambda args: Refusing(None))
    code, out, err = kbatch(capsys, "jobs")
    assert (code, out) == (1, "")
    assert (
        err
        == 'kbatch: error: cannot read the cluster: HTTP 403: pods is forbidden: User "me" cannot list pods\n'
    )


# ----------------------------------------------------------------------------- reading
class FakeApi:
    """``kubeapi.list_items`` answered from a dict of paths (an ApiError for some)."""

    def __init__(self, answers: dict[str, object]) -> None:
        self.answers = answers
        self.asked: list[tuple[str, dict | None]] = []

    def list_items(self, api, path, query=None):
        self.asked.append((path, query))
        answer = self.answers.get(path, [])
        if isinstance(answer, Exception):
            raise answer
        return [dict(item) for item in answer]


def live_source(
    monkeypatch, answers, conf_file=None
) -> tuple[cli_visibility.LiveSource, list[str], FakeApi]:
    fake = FakeApi(answers)
    monkeypatch.setattr(kubeapi.client, "list_items", fake.list_items)
    warnings: list[str] = []
    return (
        cli_visibility.LiveSource(None, conf_file, warnings.append, client=object()),
        warnings,
        fake,
    )


def test_the_chart_s_conf_is_found_by_its_label(monkeypatch) -> None:
    conf_map = {
        "metadata": {"name": "kbatch-scheduler-conf", "namespace": "kbatch-system"},
        "data": {
            "scheduler.conf": 'actions: "enqueue, allocate"\ntiers:\n- plugins:\n  - name: gang\n'
        },
    }
    source, _, fake = live_source(monkeypatch, {"/api/v1/configmaps": [conf_map]})
    conf, where = source.conf()
    assert where == "ConfigMap kbatch-system/kbatch-scheduler-conf"
    assert conf.actions == ("enqueue", "allocate")
    assert fake.asked == [
        ("/api/v1/configmaps", {"labelSelector": "app.kubernetes.io/name=kbatch"})
    ]


def test_without_leave_to_read_configmaps_the_default_conf_says_why(monkeypatch) -> None:
    refused = kubeapi.ApiError(403, "configmaps is forbidden")
    source, _, _ = live_source(monkeypatch, {"/api/v1/configmaps": refused})
    conf, where = source.conf()
    assert conf == default_conf()
    assert where == "the default (cannot read ConfigMaps: HTTP 403: configmaps is forbidden)"


def test_a_conf_file_wins(monkeypatch, tmp_path: Path) -> None:
    path = tmp_path / "conf.yaml"
    path.write_text('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n')
    source, _, fake = live_source(monkeypatch, {}, conf_file=path)
    assert source.conf() == (source.conf()[0], str(path)) and fake.asked == []


def test_listed_items_get_their_kind_and_jobs_are_optional(monkeypatch) -> None:
    answers = {
        "/api/v1/nodes": [o.node("n1")],
        "/apis/batch/v1/jobs": kubeapi.ApiError(403, "jobs.batch is forbidden"),
        "/api/v1/namespaces/team/events": [{"metadata": {"name": "e"}}],
    }
    for item in answers["/api/v1/nodes"]:
        del item["kind"]
    source, warnings, _ = live_source(monkeypatch, answers)
    objects = source.objects(events_in="team")
    assert [n["kind"] for n in objects.nodes] == ["Node"]
    assert source.held_jobs() == [] and [e["kind"] for e in objects.events] == ["Event"]
    assert warnings == [
        "cannot list Jobs (HTTP 403: jobs.batch is forbidden): held Jobs' pods are not foreseen"
    ]


@pytest.mark.parametrize(
    ("jobsets", "warned"),
    [
        (kubeapi.ApiError(404, "the server could not find the requested resource"), []),
        (kubeapi.ApiError(403, "jobsets is forbidden"), [
            "cannot list JobSets (HTTP 403: jobsets is forbidden): held JobSets' pods are not "
            "foreseen"
        ]),
    ],
)  # fmt: skip
def test_jobsets_are_optional_and_without_the_crd_nothing_is_said(
    monkeypatch, jobsets, warned
) -> None:
    job = o.job("j")
    answers = {"/apis/batch/v1/jobs": [job], cli_visibility.JOBSETS: jobsets}
    source, warnings, _ = live_source(monkeypatch, answers)
    assert [j["metadata"]["name"] for j in source.held_jobs()] == ["j"]
    assert warnings == warned


def test_volumes_are_read_and_without_leave_to_list_them_the_rest_is(monkeypatch) -> None:
    refused = kubeapi.ApiError(403, "persistentvolumes is forbidden")
    answers = {
        "/api/v1/persistentvolumeclaims": [{"metadata": {"name": "data", "namespace": "a"}}],
        "/api/v1/persistentvolumes": refused,
        "/apis/storage.k8s.io/v1/storageclasses": [{"metadata": {"name": "fast"}}],
    }
    source, warnings, _ = live_source(monkeypatch, answers)
    objects = source.objects(events_in=None)
    assert [c["kind"] for c in objects.claims] == ["PersistentVolumeClaim"]
    assert [c["kind"] for c in objects.storage_classes] == ["StorageClass"]
    assert objects.volumes == []
    assert warnings == [
        "cannot list PersistentVolumes (HTTP 403: persistentvolumes is forbidden): pods with "
        "persistent volumes are foreseen as waiting for them"
    ]


def test_csinodes_are_read_and_without_leave_to_list_them_the_limits_are_not(monkeypatch) -> None:
    path = "/apis/storage.k8s.io/v1/csinodes"
    source, warnings, _ = live_source(monkeypatch, {path: [{"metadata": {"name": "n1"}}]})
    assert [c["kind"] for c in source.objects(events_in=None).csi_nodes] == ["CSINode"]
    assert warnings == []
    refused = kubeapi.ApiError(403, "csinodes is forbidden")
    source, warnings, _ = live_source(monkeypatch, {path: refused})
    assert source.objects(events_in=None).csi_nodes == []
    assert warnings == [
        "cannot list CSINodes (HTTP 403: csinodes is forbidden): nodes' CSI attach limits are "
        "not counted"
    ]


def test_a_required_list_that_fails_fails_the_command(monkeypatch) -> None:
    source, _, _ = live_source(monkeypatch, {"/api/v1/pods": kubeapi.ApiError(403, "no")})
    with pytest.raises(kubeapi.ApiError):
        source.objects(events_in=None)


def test_it_is_also_a_kubectl_plugin() -> None:
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    scripts = project["project"]["scripts"]
    assert scripts["kubectl-kbatch"] == scripts["kbatch"] == "kbatch.cli.main:main"
    assert any(dep.startswith("rich") for dep in project["project"]["dependencies"])


def test_kbatchs_parser_loads_neither_the_scheduler_nor_the_simulator(tmp_path: Path) -> None:
    """The commands load them when they run: ``kbatch run`` starts its lists first
    (``kbatch.cli.run``), and the simulator and scheduler took 0.2-0.3 s before them."""
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, kbatch.cli.main; print(*sys.modules)"],
        cwd=tmp_path,  # the installed layout, not the checkout's ./kbatch
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    heavy = ("kbatch.sim", "kbatch.visibility", "kbatch.bench", "kbatch.operators", "numpy", "kopf")
    assert [name for name in loaded if name.startswith(heavy)] == []


def test_the_eta_budgets_default_is_the_forecasts() -> None:
    args = cli.parser().parse_args(["explain", "ns/g"])
    assert duration.parse_duration(args.eta_budget, "--eta-budget") == eta.BUDGET
