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
from scenarios import volume_objects as v
from scenarios.test_jobsets import jobset, replicated

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

    def served(self, path: str) -> None:
        return None  # no kbatch run: the command computes

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


def labelled(job: dict, queue: str, deadline: int | None = None) -> dict:
    """``job`` labelled ``kbatch.io/queue: queue``; ``deadline``: its pods'
    activeDeadlineSeconds."""
    job["metadata"]["labels"] = {"kbatch.io/queue": queue}
    if deadline is not None:
        job["spec"]["template"]["spec"]["activeDeadlineSeconds"] = deadline
    return job


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
        ({"kind": "Foo", "metadata": {"name": "f"}}, "Foo f: kind: expected one of"),
        (labelled(o.job("j", parallelism=0), "default"), "Job default/j: spec.parallelism: 0"),
        ({**o.job("j"), "spec": {"template": {}}}, "Job default/j: spec.template"),
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


def test_a_labelled_job_gets_its_group_made_held_and_started_when_the_room_frees(
    tmp_path, capsys
) -> None:
    """As kbatch's webhooks admit it: a PodGroup named as the Job, the Job held until
    the group is admitted, its pods made then: a session (1 s) later than the gang of 4
    pods of the first test, whose pods exist already (delayed pod creation)."""
    job = labelled(o.job("train", parallelism=4), "default", deadline=30)
    code, data, err = what_if(capsys, written(tmp_path, "job.yaml", [job]))
    assert code == 0, err
    (train,) = data["groups"]
    assert (train["kind"], train["namespace"], train["name"]) == ("PodGroup", "default", "train")
    assert (train["admitted"], train["eta"]["seconds"], train["nodes"]) == (False, 36.0, ["n1"])
    assert train["queue"] == "default" and train["reason"], train


def test_a_job_of_a_given_podgroup_is_answered_for_the_group(tmp_path, capsys) -> None:
    group = o.pod_group("sweep", 2, None)
    job = o.job("sweep-workers", parallelism=2, group="sweep")
    job["spec"]["template"]["spec"]["activeDeadlineSeconds"] = 30
    fits = o.node("n2", cpu="2")
    code, data, err = what_if(capsys, written(tmp_path, "job.yaml", [fits, group, job]))
    assert code == 0, err
    (sweep,) = data["groups"]
    # (admitted by the first session, which releases the Job: its pods bound by the next)
    assert (sweep["name"], sweep["eta"]["seconds"], sweep["nodes"]) == ("sweep", 1.0, ["n2"])
    assert sweep["admitted"] and sweep["phase"] == "Inqueue", sweep


def test_a_job_without_a_group_is_answered_for_each_of_its_pods(tmp_path, capsys) -> None:
    job = o.job("plain", parallelism=2)
    code, data, err = what_if(capsys, written(tmp_path, "job.yaml", [o.node("n2", "2"), job]))
    assert code == 0, err
    assert [(g["kind"], g["name"], g["nodes"]) for g in data["groups"]] == [
        ("Pod", "plain-0", ["n2"]),
        ("Pod", "plain-1", ["n2"]),
    ]


def test_a_job_labelled_with_a_queue_that_does_not_exist_waits_and_is_told_why(
    tmp_path, capsys
) -> None:
    job = labelled(o.job("lost", parallelism=2), "nowhere")
    code, data, err = what_if(capsys, written(tmp_path, "job.yaml", [job]))
    assert code == 0, err
    (lost,) = data["groups"]
    assert (lost["name"], lost["admitted"], lost["eta"]["seconds"]) == ("lost", False, None)
    assert "queue 'nowhere' does not exist" in lost["reason"], lost
    assert lost["reason"].startswith("metadata.labels[kbatch.io/queue]: PodGroup default/lost")


def test_a_queue_given_before_a_job_in_the_files_takes_its_group(tmp_path, capsys) -> None:
    """Created in the files' order, as ``kubectl apply`` creates them: the Job's
    admission sees the Queue given before it."""
    documents = [o.node("n2", "2"), o.queue("research", 2), labelled(o.job("r", 2), "research")]
    code, data, err = what_if(capsys, written(tmp_path, "job.yaml", documents))
    assert code == 0, err
    (research,) = data["groups"]
    assert (research["name"], research["queue"], research["nodes"]) == ("r", "research", ["n2"])


def test_a_job_its_owner_suspended_makes_no_pods_and_is_told_so(tmp_path, capsys) -> None:
    documents = [o.job("paused", parallelism=2, suspend=True), o.node("n2", "2")]
    code, data, err = what_if(capsys, written(tmp_path, "job.yaml", documents))
    assert code == 0, err
    (paused,) = data["groups"]
    assert (paused["kind"], paused["name"], paused["eta"]["seconds"]) == ("Job", "paused", None)
    assert "suspended (spec.suspend)" in paused["reason"], paused


def test_an_indexed_job_s_pods_are_named_by_their_index(tmp_path, capsys) -> None:
    job = o.job("ix", parallelism=2, completions=2)
    job["spec"]["completionMode"] = "Indexed"
    code, data, err = what_if(capsys, written(tmp_path, "job.yaml", [o.node("n2", "2"), job]))
    assert code == 0, err
    assert [g["name"] for g in data["groups"]] == ["ix-0-0", "ix-1-1"]


def test_a_labelled_jobset_is_answered_for_its_one_group_as_a_labelled_job_is(
    tmp_path, capsys
) -> None:
    """Its Jobs held with it, released together once the forward run admits the group:
    it starts when the labelled Job of four pods above does."""
    made = jobset(
        replicated("leader", 1, 1, activeDeadlineSeconds=30),
        replicated("workers", 1, 3, activeDeadlineSeconds=30),
        queue_name="default",
    )
    code, data, err = what_if(capsys, written(tmp_path, "jobset.yaml", [made]))
    assert code == 0, err
    (group,) = data["groups"]
    assert (group["kind"], group["name"], group["queue"]) == ("PodGroup", "js", "default")
    assert (group["admitted"], group["eta"]["seconds"], group["nodes"]) == (False, 36.0, ["n1"])


def test_a_jobset_not_labelled_is_answered_for_what_its_jobs_make(tmp_path, capsys) -> None:
    made = jobset(replicated("workers", 2, 1, schedulerName="kbatch"), queue_name=None)
    code, data, err = what_if(capsys, written(tmp_path, "js.yaml", [o.node("n2", "2"), made]))
    assert code == 0, err
    assert [(g["kind"], g["name"], g["nodes"]) for g in data["groups"]] == [
        ("Pod", "js-workers-0-0", ["n2"]),
        ("Pod", "js-workers-1-0", ["n2"]),
    ]


@pytest.mark.parametrize(
    ("change", "told"),
    [
        ({"queue_name": "nowhere"}, "queue 'nowhere' does not exist"),
        ({"suspend": True}, "the JobSet is suspended (spec.suspend)"),
    ],
)
def test_a_jobset_that_would_not_run_is_told_why(tmp_path, capsys, change, told) -> None:
    made = jobset(replicated("workers", 2, 1), **{"queue_name": "default", **change})
    code, data, err = what_if(capsys, written(tmp_path, "js.yaml", [made]))
    assert code == 0, err
    (group,) = data["groups"]
    assert (group["name"], group["admitted"], group["eta"]["seconds"]) == ("js", False, None)
    assert told in group["reason"], group


def test_a_bad_jobset_is_refused_naming_its_field(tmp_path, capsys) -> None:
    made = jobset(replicated("workers", 1, 1), successPolicy={"operator": "Some"})
    path = written(tmp_path, "js.yaml", [made])
    code, _, err = what_if(capsys, path)
    assert code == 2 and "JobSet default/js: spec.successPolicy.operator: must be" in err, err


def test_a_labelled_job_its_owner_suspended_is_told_so_not_why_its_group_waits(
    tmp_path, capsys
) -> None:
    job = labelled(o.job("paused", parallelism=2, suspend=True), "default")
    code, data, err = what_if(capsys, written(tmp_path, "job.yaml", [job]))
    assert code == 0, err
    (paused,) = data["groups"]
    assert (paused["kind"], paused["name"], paused["eta"]["seconds"]) == (
        "PodGroup",
        "paused",
        None,
    )
    assert "suspended (spec.suspend)" in paused["reason"], paused


def test_a_pod_whose_claim_is_made_on_first_use_gets_an_estimate(tmp_path, capsys) -> None:
    """The claim, its class and the pod are given (a cluster's would be read): the pod
    waits for the running gang, then starts, its volume provisioned on its node."""
    given = [v.storage_class(), v.claim("data"), v.mounting(o.pod("user", cpu="2"), "data")]
    code, data, err = what_if(capsys, written(tmp_path, "user.yaml", given))
    assert code == 0, err
    (user,) = data["groups"]
    assert (user["kind"], user["name"], user["nodes"]) == ("Pod", "user", ["n1"])
    assert user["eta"]["seconds"] == 35.0


def test_a_pod_whose_claim_is_missing_is_told_so(tmp_path, capsys) -> None:
    given = [v.mounting(o.pod("user", cpu="1"), "nowhere")]
    code, data, err = what_if(capsys, written(tmp_path, "user.yaml", given))
    assert code == 0, err
    (user,) = data["groups"]
    assert 'persistentvolumeclaim "nowhere" not found' in user["reason"]
    assert user["nodes"] == []


def test_a_pod_whose_volume_a_node_may_not_attach_is_told_so(tmp_path, capsys) -> None:
    """What if the node's CSINode let it attach no volume of the class's driver: the
    pod is foreseen waiting, told why (a CSINode in the files, as one read would be)."""
    limit = {"name": "csi.example.com", "nodeID": "n1", "allocatable": {"count": 0}}
    csi_node = {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                "metadata": {"name": "n1"}, "spec": {"drivers": [limit]}}  # fmt: skip
    given = [v.storage_class(), v.claim("data"), v.mounting(o.pod("user", cpu="1"), "data")]
    code, data, err = what_if(capsys, written(tmp_path, "user.yaml", [csi_node, *given]))
    assert code == 0, err
    (user,) = data["groups"]
    assert "node(s) exceed max volume count" in user["reason"], user["reason"]
    assert user["nodes"] == []
