"""``kbatch simulate --workload W.yaml --cluster C.yaml``: Armada's simulator files, as
Armada ships them (/work/shared/armada-simulator-testdata), loaded and simulated.

Loading is checked on every workload × cluster pair; simulations run short ``--until``
windows, so that the file stays fast.
"""

import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from kbatch.api import LIFETIME_ANNOTATION
from kbatch.cli import main as cli
from kbatch.sim import clock, manifests, output, run, simulate, workload
from kbatch.sim.metrics import MeasuredOutcome
from kbatch.sim.runner import Outcome

# ../shared beside the checkout, as CI has it; a clone elsewhere has no testdata to read.
TESTDATA = Path(__file__).parents[3] / "shared" / "armada-simulator-testdata"
if not TESTDATA.is_dir():
    pytest.skip(
        f"no Armada simulator testdata at {TESTDATA} (../shared beside the checkout)",
        allow_module_level=True,
    )
WORKLOADS = sorted(p.relative_to(TESTDATA).as_posix() for p in TESTDATA.glob("workloads/**/*.yaml"))
CLUSTERS = sorted(p.relative_to(TESTDATA).as_posix() for p in TESTDATA.glob("clusters/*.yaml"))
SMALL = "workloads/small-short_big-long"

# Our expectations of each file: nodes; queues -> (weight, jobs); PodGroups due at 30m.
NODES = {
    "clusters/cpu_1_1_10.yaml": 10,
    "clusters/cpu_1_1_100.yaml": 100,
    "clusters/cpu_1_1_2.yaml": 2,
    "clusters/cpu_1_3_100.yaml": 300,
    "clusters/tinyCluster.yaml": 2,
}
QUEUES = {
    "workloads/basicWorkload.yaml": {"a": 10},
    "workloads/small-long_big-long/non-preemptible.yaml": {"a": 64, "b": 2},
    "workloads/small-long_big-long/only-big.yaml": {"b": 2},
    "workloads/small-long_big-long/only-small.yaml": {"a": 64},
    "workloads/small-long_big-long/preemptible.yaml": {"a": 64, "b": 2},
    f"{SMALL}/non-preemptible.yaml": {"a": 640, "b": 2},
    f"{SMALL}/only-big.yaml": {"b": 2},
    f"{SMALL}/only-small.yaml": {"a": 640},
    f"{SMALL}/preemptible.yaml": {"a": 640, "b": 2},
}


def test_the_testdata_is_there() -> None:
    assert sorted(QUEUES) == WORKLOADS and sorted(NODES) == CLUSTERS


def objects(plan: workload.Plan, kind: str) -> list[dict[str, Any]]:
    return [m.obj for m in plan.loaded.objects if m.kind == kind]


@pytest.mark.parametrize("cluster", CLUSTERS)
@pytest.mark.parametrize("spec", WORKLOADS)
def test_every_pair_loads_as_expected(spec: str, cluster: str) -> None:
    plan = workload.load(TESTDATA / spec, TESTDATA / cluster)
    assert plan.warnings == [] and plan.dependent == []
    nodes = objects(plan, "Node")
    assert len(nodes) == NODES[cluster]
    assert len({n["metadata"]["name"] for n in nodes}) == len(nodes)
    assert all(n["metadata"]["labels"][workload.CLUSTER_LABEL] for n in nodes)
    queues = {q["metadata"]["name"]: q["spec"]["weight"] for q in objects(plan, "Queue")}
    assert queues == dict.fromkeys(QUEUES[spec], 1)
    groups = objects(plan, "PodGroup")
    assert Counter(g["spec"]["queue"] for g in groups) == QUEUES[spec]
    assert all(g["spec"]["minMember"] == 1 for g in groups)  # no gangs in Armada's files
    jobs = objects(plan, "Job")
    assert [j["metadata"]["name"] for j in jobs] == [g["metadata"]["name"] for g in groups]
    due = {m.obj["metadata"]["name"]: m.submit_at for m in plan.loaded.objects}
    for group in groups:  # queue B's big jobs come at 30m, the rest at once
        assert due[group["metadata"]["name"]] == (1800.0 if group["spec"]["queue"] == "b" else 0)
    preemptible = "/preemptible" in spec
    for group in groups:
        annotations = group["metadata"]["annotations"]
        assert (annotations.get(LIFETIME_ANNOTATION) == "0") is preemptible
    classes = {c["metadata"]["name"] for c in objects(plan, "PriorityClass")}
    assert classes == {"armada-preemptible" if preemptible else "armada-default"}


def runtimes(plan: workload.Plan, queue: str) -> list[float]:
    return [
        clock.parse_duration(
            j["spec"]["template"]["metadata"]["annotations"][manifests.DURATION], "test"
        )
        for j, g in zip(objects(plan, "Job"), objects(plan, "PodGroup"), strict=True)
        if g["spec"]["queue"] == queue
    ]


def test_runtimes_are_a_seeded_shifted_exponential(tmp_path: Path) -> None:
    path = TESTDATA / SMALL / "preemptible.yaml"
    small = runtimes(workload.load(path, None), "a")
    assert small == runtimes(workload.load(path, None), "a")  # seeded: the same again
    assert min(small) >= 360 and 30 < statistics.mean(small) - 360 < 42  # 6m + Exp(36s)
    assert len(set(small)) > 600  # one draw per job
    other = tmp_path / "w.yaml"
    other.write_text(path.read_text().replace("randomSeed: 123", "randomSeed: 7"))
    assert runtimes(workload.load(other, None), "a") != small


GANGS = """
randomSeed: 1
queues:
  - name: Research
    weight: 0.5
    jobTemplates:
      - id: prep
        number: 2
        jobSet: set-1
        requirements: {resourceRequirements: {requests: {cpu: 2, memory: 4Gi}}}
        runtimeDistribution: {minimum: 2m, tailMean: 1m}
      - id: train
        number: 8
        gangCardinality: 4
        dependencies: [prep]
        earliestSubmitTimeFromDependencyCompletion: 30s
        priorityClassName: armada-preemptible
        requirements:
          resourceRequirements: {requests: {cpu: 4, nvidia.com/gpu: 1}}
        runtimeDistribution: {minimum: 5m, tailMean: 1m}
  - name: Batch
    weight: 1
    jobTemplates:
      - id: tick
        number: 1
        repeat: {numTimes: 3, period: 10m}
        requirements: {resourceRequirements: {requests: {cpu: 1}}}
        runtimeDistribution: {minimum: 1m}
        colour: blue
"""


def test_gangs_dependencies_repeats_and_weights(tmp_path: Path) -> None:
    spec = tmp_path / "gangs.yaml"
    spec.write_text(GANGS)
    warnings: list[str] = []
    outcome = run(
        workload=spec,
        cluster=TESTDATA / "clusters/tinyCluster.yaml",
        until="40m",
        warn=warnings.append,
    )
    ignored = f"{spec}: ignoring fields kbatch does not read: queues[1].jobTemplates[0].colour"
    assert warnings == [ignored]
    result = output.to_json(outcome)
    assert result["warnings"] == []
    queues = {q["name"]: q["weight"] for q in result["queues"]}
    assert queues == {"research": 1, "batch": 2, "default": 1}  # 0.5 : 1
    groups = {g["name"]: g for g in result["podGroups"]}
    trains = {name: g["minMember"] for name, g in groups.items() if name.startswith("train")}
    assert trains == {"train-0": 4, "train-1": 4}
    pods = [p for p in result["pods"] if p["name"].startswith("train-0-")]
    assert len(pods) == 4 and {p["node"] for p in pods} == {"pool2-0-0-0-0"}  # the gpu node
    # train waits for both prep jobs to end, then 30s more (on the 1s tick grid).
    started = {e.name: e.time for e in outcome.cluster.event_log if e.reason == "Scheduled"}
    prep_end = max(started[f"prep-{i}-0"] + duration_of(outcome, f"prep-{i}") for i in range(2))
    train_at = outcome.cluster.created_at["PodGroup armada/train-0"]
    assert prep_end + 30 <= train_at <= prep_end + 32
    assert duration_of(outcome, "train-0") == duration_of(outcome, "train-1") == 300  # gangs
    created = outcome.cluster.created_at
    assert [created[f"PodGroup armada/tick-repeat-{i}-0"] for i in range(3)] == [0, 600, 1200]
    # resubmitted however often it is preempted, as Armada does: no eviction fails it
    policy = outcome.jobs.jobs[(workload.NAMESPACE, "train-0")].obj["spec"]["podFailurePolicy"]
    assert policy == {
        "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
    }


def duration_of(outcome: Outcome, job: str) -> float:
    template = outcome.jobs.jobs[(workload.NAMESPACE, job)].obj["spec"]["template"]
    return clock.parse_duration(template["metadata"]["annotations"][manifests.DURATION], job)


def kbatch(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_same_files_same_json_and_sane_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "simulate",
        "--workload",
        str(TESTDATA / "workloads/small-long_big-long/preemptible.yaml"),
        "--cluster",
        str(TESTDATA / "clusters/cpu_1_1_2.yaml"),
        "--until",
        "45m",
        "--output",
        "json",
    ]
    code, first, err = kbatch(capsys, *args)
    assert (code, err) == (0, "")
    assert kbatch(capsys, *args)[1] == first
    metrics = json.loads(first)["metrics"]
    assert metrics["throughput"]["jobsStarted"] > 0 and metrics["throughput"]["jobsPerSecond"] > 0
    assert set(metrics["latency"]) == {"a", "b"}
    for latency in metrics["latency"].values():
        assert 0 <= latency["started"] <= latency["jobs"]
        started = [latency[k] for k in ("p50", "p99", "max") if latency[k] is not None]
        assert started == sorted(started) and all(s >= 0 for s in started)
    use = metrics["utilisation"]
    assert set(use) == {"cpu", "memory", "waitingSeconds"}
    for resource in ("cpu", "memory"):
        assert all(0 <= v <= 1 for v in use[resource].values() if v is not None)
    assert use["cpu"]["mean"] > 0.5  # 64 small jobs of 1 cpu on 64 cpus
    shares = metrics["fairShare"]
    assert all(0 <= s["share"] <= 1 and 0 < s["fairShare"] <= 1 for s in shares.values())
    over = metrics["overTime"]
    assert 0 < len(over["cpu"]) <= 60 and len(over["share"]["a"]) == len(over["cpu"])
    assert all(0 <= v <= 1 for v in over["cpu"] + over["memory"])
    assert metrics["evictions"]["total"] == sum(metrics["evictions"]["byQueue"].values())


def test_the_table_shows_the_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = kbatch(
        capsys,
        "simulate",
        "--workload",
        str(TESTDATA / "workloads/basicWorkload.yaml"),
        "--cluster",
        str(TESTDATA / "clusters/cpu_1_1_2.yaml"),
    )
    assert (code, err) == (0, "")
    assert "METRICS\nQUEUE  JOBS  STARTED  WAIT P50" in out
    assert "throughput: 10 jobs started" in out and "utilisation: cpu " in out


def test_manifests_alone_have_no_metrics() -> None:
    examples = Path(__file__).parents[2] / "examples"
    result = simulate([examples / "sim-cluster.yaml", examples / "gang-job.yaml"])
    assert "metrics" not in result
    with_cluster = simulate(
        [examples / "gang-job.yaml"], cluster=TESTDATA / "clusters/cpu_1_1_2.yaml"
    )
    assert "metrics" not in with_cluster and with_cluster["summary"]["binds"] == 6


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, "cannot read"),
        ("queues: [", "not valid YAML"),
        ("queues: {name: A}", "queues: expected a list"),
        ("queues: [{name: A, jobTemplates: [{number: ten}]}]", "jobTemplates[0].number"),
        (
            "queues: [{name: A, jobTemplates: [{runtimeDistribution: {minimum: 5}}]}]",
            "queues[0].jobTemplates[0].runtimeDistribution.minimum",
        ),
        (
            "queues: [{name: A, jobTemplates: [{number: 3, gangCardinality: 2}]}]",
            "not a multiple of gangCardinality",
        ),
        (
            "queues: [{name: A, jobTemplates: [{id: x, dependencies: [y]}]}]",
            "no job template has id 'y'",
        ),
        (
            "queues: [{name: A, jobTemplates: [{id: x, dependencies: [x]}]}]",
            "a cycle: x -> x",
        ),
        (
            "queues: [{name: A, jobTemplates: [{requirements: "
            "{resourceRequirements: {requests: {cpu: lots}}}}]}]",
            "requirements.resourceRequirements.requests.cpu",
        ),
        ("queues: [{name: A, weight: heavy}]", "queues[0].weight"),
    ],
)
def test_bad_input_is_one_line_naming_file_and_field(
    text: str | None, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "w.yaml"
    if text is not None:
        path.write_text(text)
    code, out, err = kbatch(capsys, "simulate", "--workload", str(path))
    assert (code, out) == (2, "")
    assert err.startswith(f"kbatch: error: {path}") and err.count("\n") == 1, err
    assert expected in err and "Traceback" not in err


def test_a_bad_cluster_field_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("clusters: [{name: c, nodeTemplates: [{number: two}]}]")
    code, _, err = kbatch(capsys, "simulate", "--cluster", str(path))
    assert code == 2 and "clusters[0].nodeTemplates[0].number" in err


def test_simulate_needs_some_input(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = kbatch(capsys, "simulate")
    assert code == 2 and "required: FILE (or --workload, --cluster)" in err


def test_the_outcome_carries_the_metrics_points() -> None:
    outcome = run(
        workload=TESTDATA / "workloads/basicWorkload.yaml",
        cluster=TESTDATA / "clusters/tinyCluster.yaml",
        until="10m",
    )
    assert isinstance(outcome, MeasuredOutcome)
    assert outcome.recorder.resources == {"cpu", "memory", "nvidia.com/gpu"}
    assert outcome.recorder.points[0].time == 0.0


def json_types(value: Any) -> set[type]:
    """The types of ``value`` and of everything in it."""
    found = {type(value)}
    if isinstance(value, dict):
        found |= {t for key in value for t in json_types(key)}
        found |= {t for item in value.values() for t in json_types(item)}
    elif isinstance(value, list):
        found |= {t for item in value for t in json_types(item)}
    return found


def test_the_json_contract_holds_json_types_alone() -> None:
    """The metrics' means were numpy's floats, which only ``json`` writes (a subclass of
    float): YAML's safe dump and orjson refused them."""
    result = simulate(
        workload=TESTDATA / "workloads/small-long_big-long/preemptible.yaml",
        cluster=TESTDATA / "clusters/cpu_1_1_2.yaml",
        until="45m",
    )
    assert json_types(result) <= {dict, list, str, int, float, bool, type(None)}
    assert result["metrics"]["utilisation"]["cpu"]["mean"] > 0
    yaml.safe_dump(result)
