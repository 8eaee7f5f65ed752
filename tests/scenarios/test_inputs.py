"""What the simulator accepts and how it refuses the rest: every error names where.

One rule: an object the API server would refuse (schema, validation, a missing
PriorityClass) is refused alone, when it is due, naming its field (the JSON's
``warnings``, the warn channel), and the rest runs; input that cannot be read at
all (not YAML, not a Kubernetes object) is a ManifestError (the CLI's exit 2)."""

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from kbatch.cli import main as cli
from kbatch.config import ConfigError
from kbatch.sim import clock, runner, simulate
from kbatch.sim.manifests import ManifestError, load_documents, load_files
from scenarios.objects import at, conf_map, job, node, pod, pod_group, queue


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("2m", 120),
        ("1h30m", 5400),
        ("500ms", 0.5),
        ("1.5s", 1.5),
        ("0", 0),
        ("1m0.5s", 60.5),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert clock.parse_duration(text, "here") == seconds


@pytest.mark.parametrize("text", ["", "30", "3x", "-1s", "1 h", "s", 30, None])
def test_bad_durations_name_where_they_came_from(text: object) -> None:
    with pytest.raises(
        clock.DurationError, match=r"^Pod default/p: annotation x: .* not a duration"
    ):
        clock.parse_duration(text, "Pod default/p: annotation x")


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (0.25, "250ms"), (90, "1m30s"), (3600, "1h"), (3661, "1h1m1s")]
)
def test_format_duration(seconds: float, text: str) -> None:
    assert clock.format_duration(seconds) == text


def write(tmp_path: Path, text: str, name: str = "in.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


NODE = "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [\n", r"in\.yaml line 2: not valid YAML"),
        (NODE + "---\n- a\n- b\n", r"in\.yaml, document 2: not a Kubernetes object \(a list"),
        (NODE + "---\njust text\n", r"in\.yaml, document 2: not a Kubernetes object \(a str"),
        (
            "apiVersion: v1\nmetadata: {name: x}\n",
            r"in\.yaml, document 1: not a Kubernetes object: no kind",
        ),
        ("kind: Pod\nmetadata: {name: x}\n", r"document 1: not a Kubernetes object: no apiVersion"),
        ("apiVersion: v1\nkind: Pod\n", r"document 1: not a Kubernetes object: no metadata"),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {labels: {}}\n",
            r"document 1: Pod has no metadata\.name",
        ),
        (
            "kind: List\napiVersion: v1\nitems: [{kind: Pod}]\n",
            r"document 1, item 0: not a Kubernetes object: no apiVersion",
        ),
    ],
)
def test_documents_that_are_not_objects(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        load_files([write(tmp_path, text)])


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match=r"nope\.yaml: cannot read: No such file"):
        load_files([tmp_path / "nope.yaml"])


def changed(obj: dict, path: str, value: object) -> dict:
    """A deep copy of ``obj`` with the dotted ``path`` set to ``value``."""
    result = copy.deepcopy(obj)
    *parents, last = path.split(".")
    target = result
    for step in parents:
        target = target.setdefault(step, {})
    target[last] = value
    return result


def quota(spec: object) -> dict:
    return {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "rq"}, "spec": spec}


def priority_class(name: str, value: int = 100) -> dict:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def simulated(*docs: dict, **options: object) -> tuple[dict, list[str]]:
    """The JSON of ``docs`` simulated with a Node and a Pod that fit, and the warn lines."""
    notes: list[str] = []
    result = simulate(documents=[node("other"), pod("ok"), *docs], warn=notes.append, **options)
    return result, notes


def assert_refused(result: dict, notes: list[str], ref: str, message: str) -> dict:
    """``ref`` (``Kind ns/name``) was refused, alone, with a message matching ``message``
    (named with its field): in the JSON's warnings and on the warn channel; the rest ran."""
    (warning,) = result["warnings"]
    kind, _, where = ref.partition(" ")
    namespace, _, name = where.rpartition("/")
    assert (warning["kind"], warning["namespace"], warning["name"]) == (kind, namespace, name)
    assert re.match(message, warning["message"]), warning["message"]
    assert "pydantic" not in warning["message"]
    assert notes == [f"{ref} refused: {warning['message']}"]
    assert result["pods"][0]["name"] == "ok" and result["pods"][0]["node"] == "other"
    return dict(warning)


# Objects the API server would refuse: each is refused alone, naming its field.
BAD_OBJECTS = [
    (
        pod("p", cpu="lots"),
        "Pod default/p",
        r"spec\.containers\[0\]\.resources\.requests\.cpu: 'lots' is not a Kubernetes quantity",
    ),
    (
        pod("p", duration="soon"),
        "Pod default/p",
        r"metadata\.annotations\.kbatch\.io/sim-duration: 'soon' is not a duration",
    ),
    (
        {**pod("p"), "metadata": {"name": "p", "annotations": {"kbatch.io/sim-submit-at": 30}}},
        "Pod default/p",
        r"metadata\.annotations\.kbatch\.io/sim-submit-at: expected a string \(quote it\), not 30",
    ),
    (
        {**pod("p"), "metadata": {"name": "p", "annotations": {"kbatch.io/sim-submit-at": "x"}}},
        "Pod default/p",
        r"metadata\.annotations\.kbatch\.io/sim-submit-at: 'x' is not a duration",
    ),
    (
        job("j", cpu="1Zi"),
        "Job default/j",
        r"spec\.template\.spec\.containers\[0\]\.resources\.requests\.cpu: '1Zi'",
    ),
    (
        job("j", duration="2 minutes"),
        "Job default/j",
        r"spec\.template\.metadata\.annotations\.kbatch\.io/sim-duration: '2 minutes' is not",
    ),
    (
        {**job("j"), "spec": {**job("j")["spec"], "parallelism": "two"}},
        "Job default/j",
        r"spec\.parallelism: expected an integer, not 'two'",
    ),
    (
        {**job("j"), "spec": {**job("j")["spec"], "parallelism": -1}},
        "Job default/j",
        r"spec\.parallelism: expected a non-negative integer, not -1",
    ),
    (
        {**job("j"), "spec": {"parallelism": 1}},
        "Job default/j",
        r"spec\.template\.spec: a Job needs a pod template",
    ),
    (
        {**job("j"), "spec": {**job("j")["spec"], "backoffLimit": -1}},
        "Job default/j",
        r"spec\.backoffLimit: expected a non-negative integer, not -1",
    ),
    (
        {**job("j"), "spec": {**job("j")["spec"], "activeDeadlineSeconds": 0}},
        "Job default/j",
        r"spec\.activeDeadlineSeconds: expected a positive integer, not 0",
    ),
    (
        {**job("j"), "spec": {**job("j")["spec"], "activeDeadlineSeconds": "30"}},
        "Job default/j",
        r"spec\.activeDeadlineSeconds: expected an integer, not '30'",
    ),
    (
        {**pod("p"), "spec": {**pod("p")["spec"], "schedulingGates": [{"name": ""}]}},
        "Pod default/p",
        r"spec\.schedulingGates\[0\]\.name: required",
    ),
    (
        {
            **pod("p"),
            "spec": {**pod("p")["spec"], "nodeName": "node-1", "schedulingGates": [{"name": "x"}]},
        },
        "Pod default/p",
        r"spec\.nodeName: cannot be set until all schedulingGates have been removed",
    ),
    (
        {**pod("p"), "spec": {**pod("p")["spec"], "resources": {"requests": {"cpu": "100m"}}}},
        "Pod default/p",
        r"spec\.resources\.requests\[cpu\]: must be at least its containers' requests of 1, "
        r"not 100m",
    ),
    (
        {**node(), "status": {"allocatable": {"cpu": "4 cores"}}},
        "Node node-1",
        r"status\.allocatable\.cpu: '4 cores' is not a Kubernetes quantity",
    ),
    (
        {**pod_group("g"), "spec": {"minMember": 1, "size": 3}},
        "PodGroup default/g",
        r"spec\.size: unknown field",
    ),
    (
        {**pod_group("g"), "status": {"phase": "Done"}},
        "PodGroup default/g",
        r"status\.phase: must be 'Pending', 'Inqueue', 'Running', 'Unknown' or 'Completed', "
        r"not 'Done'",
    ),
    (
        {**queue("q"), "spec": {"weight": 1, "reclaimable": "maybe"}},
        "Queue q",
        r"spec\.reclaimable: expected true or false, not 'maybe'",
    ),
    (
        {**priority_class("top"), "value": 2_000_000_000},
        "PriorityClass top",
        r"value: must be <= 1000000000 \(higher values are reserved for system-\* classes\)",
    ),
    (
        quota({"hard": {"cpu": "-4"}}),
        "ResourceQuota default/rq",
        r"spec\.hard\.cpu: must not be negative, not -4",
    ),
]


@pytest.mark.parametrize(("doc", "ref", "message"), BAD_OBJECTS)
def test_bad_objects_are_refused_naming_object_and_field(doc: dict, ref: str, message: str) -> None:
    assert_refused(*simulated(doc), ref, message)


TEMPLATE_META = "spec.template.metadata"
# Fields of the wrong shape: each object is refused alone, naming its field.
MISSHAPEN = [
    (changed(pod("p"), "spec", "x"), "Pod default/p", r"spec: expected a map, not 'x'"),
    (
        changed(pod("p"), "spec.priorityClassName", ["a"]),
        "Pod default/p",
        r"spec\.priorityClassName: expected a string, not \['a'\]",
    ),
    (changed(pod("p"), "status", "x"), "Pod default/p", r"status: expected a map, not 'x'"),
    (
        changed(pod("p"), "spec.containers", "x"),
        "Pod default/p",
        r"spec\.containers: expected a list, not 'x'",
    ),
    (
        changed(pod("p"), "spec.containers", ["x"]),
        "Pod default/p",
        r"spec\.containers\[0\]: expected a map, not 'x'",
    ),
    (
        changed(pod("p"), "spec.initContainers", "x"),
        "Pod default/p",
        r"spec\.initContainers: expected a list, not 'x'",
    ),
    (
        changed(pod("p"), "metadata.labels", ["a"]),
        "Pod default/p",
        r"metadata\.labels: expected a map, not \['a'\]",
    ),
    (
        changed(pod("p"), "metadata.namespace", 5),
        "Pod 5/p",
        r"metadata\.namespace: expected a string, not 5",
    ),
    (
        changed(pod("p"), "metadata.annotations", {"scheduling.k8s.io/group-name": 5}),
        "Pod default/p",
        r"metadata\.annotations\.scheduling\.k8s\.io/group-name: expected a string",
    ),
    (
        changed(pod("p"), "metadata.annotations", "x"),
        "Pod default/p",
        r"metadata\.annotations: expected a map, not 'x'",
    ),
    (
        changed(pod("p"), "metadata.ownerReferences", "x"),
        "Pod default/p",
        r"metadata\.ownerReferences: expected a list, not 'x'",
    ),
    (
        changed(pod("p"), "metadata.ownerReferences", [{"kind": "Job", "name": "j"}]),
        "Pod default/p",
        r"metadata\.ownerReferences\[0\]\.apiVersion: required",
    ),
    (
        changed(pod("p"), "spec.nodeName", 5),
        "Pod default/p",
        r"spec\.nodeName: expected a string, not 5",
    ),
    (
        changed(pod("p"), "spec.schedulerName", 5),
        "Pod default/p",
        r"spec\.schedulerName: expected a string, not 5",
    ),
    (
        changed(pod("p"), "spec.priority", "x"),
        "Pod default/p",
        r"spec\.priority: expected an integer, not 'x'",
    ),
    (
        changed(pod("p"), "spec.terminationGracePeriodSeconds", "x"),
        "Pod default/p",
        r"spec\.terminationGracePeriodSeconds: expected an integer",
    ),
    (
        changed(pod("p"), "spec.affinity", {"podAffinity": "x"}),
        "Pod default/p",
        r"spec\.affinity\.podAffinity: expected a map, not 'x'",
    ),
    (changed(job("j"), "spec", "x"), "Job default/j", r"spec: expected a map, not 'x'"),
    (
        changed(job("j"), TEMPLATE_META, "x"),
        "Job default/j",
        r"spec\.template\.metadata: expected a map, not 'x'",
    ),
    (
        changed(job("j"), f"{TEMPLATE_META}.annotations", "x"),
        "Job default/j",
        r"spec\.template\.metadata\.annotations: expected a map, not 'x'",
    ),
    (
        changed(job("j"), f"{TEMPLATE_META}.labels", ["a"]),
        "Job default/j",
        r"spec\.template\.metadata\.labels: expected a map, not \['a'\]",
    ),
    (
        changed(job("j"), "spec.template.spec.containers", "x"),
        "Job default/j",
        r"spec\.template\.spec\.containers: expected a list, not 'x'",
    ),
    (changed(node("n2"), "status", "x"), "Node n2", r"status: expected a map, not 'x'"),
    (
        changed(node("n2"), "spec.taints", "x"),
        "Node n2",
        r"spec\.taints: expected a list, not 'x'",
    ),
    (
        changed(node("n2"), "status.conditions", "Ready"),
        "Node n2",
        r"status\.conditions: expected a list, not 'Ready'",
    ),
    (changed(pod_group("g"), "spec", "x"), "PodGroup default/g", r"spec: expected a map"),
    (quota("x"), "ResourceQuota default/rq", r"spec: expected a map, not 'x'"),
]


@pytest.mark.parametrize(("doc", "ref", "message"), MISSHAPEN)
def test_misshapen_fields_are_refused_naming_object_and_field(
    doc: dict, ref: str, message: str
) -> None:
    assert_refused(*simulated(doc), ref, message)


def test_what_the_api_server_sets_itself_is_not_checked() -> None:
    mine = changed(pod("p"), "metadata.creationTimestamp", "yesterday")
    result, notes = simulated(changed(mine, "metadata.uid", 5))
    assert notes == [] and result["warnings"] == []
    assert {p["name"]: p["phase"] for p in result["pods"]} == {"ok": "Running", "p": "Running"}


# The brief of issue 9: each bad object is refused naming kind, name and field in the JSON,
# through the CLI, and the rest of the simulation runs (exit 0).
REFUSED_VIA_CLI = [
    (pod_group("pg-1", min_member=-1), "PodGroup default/pg-1", r"spec\.minMember: must be >= 1"),
    (
        changed(pod_group("pg-1"), "spec.minMember", "x"),
        "PodGroup default/pg-1",
        r"spec\.minMember: expected an integer, not 'x'",
    ),
    (
        pod("p", cpu="lots"),
        "Pod default/p",
        r"spec\.containers\[0\]\.resources\.requests\.cpu: 'lots' is not a Kubernetes quantity",
    ),
    (
        pod("p", cpu="-1"),
        "Pod default/p",
        r"spec\.containers\[0\]\.resources\.requests\.cpu: must not be negative, not -1",
    ),
    (queue("q", weight=0), "Queue q", r"spec\.weight: must be >= 1, not 0"),
    (
        changed(queue("q"), "spec.capability", {"cpu": "-2"}),
        "Queue q",
        r"spec\.capability\.cpu: must not be negative, not -2",
    ),
    (
        changed(pod_group("pg-1"), "spec.minResources", {"cpu": "-1"}),
        "PodGroup default/pg-1",
        r"spec\.minResources\.cpu: must not be negative, not -1",
    ),
    (
        pod("p", priorityClassName="nosuch"),
        "Pod default/p",
        r"spec\.priorityClassName: no PriorityClass named 'nosuch'",
    ),
    (
        changed(pod("p"), "metadata.labels", ["app"]),
        "Pod default/p",
        r"metadata\.labels: expected a map, not \['app'\]",
    ),
    (
        changed(pod("p"), "spec.containers", "main"),
        "Pod default/p",
        r"spec\.containers: expected a list, not 'main'",
    ),
]


@pytest.mark.parametrize(("doc", "ref", "message"), REFUSED_VIA_CLI)
def test_the_cli_refuses_a_bad_object_and_runs_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict, ref: str, message: str
) -> None:
    path = write(tmp_path, yaml.safe_dump_all([node("other"), pod("ok"), doc]))
    assert cli.main(["simulate", str(path), "--output", "json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert err.endswith("\n") and all(line.startswith("kbatch: ") for line in err.splitlines())
    notes = [line.removeprefix("kbatch: ") for line in err.splitlines()]
    warning = assert_refused(result, notes, ref, message)
    assert list(warning) == ["time", "kind", "namespace", "name", "message"]
    assert warning["time"] == 0.0
    assert [(p["name"], p["phase"]) for p in result["pods"]] == [("ok", "Running")]


def test_the_table_names_a_refused_object_under_warnings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, yaml.safe_dump_all([node("other"), pod_group("pg-1", min_member=-1)]))
    assert cli.main(["simulate", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == "kbatch: PodGroup default/pg-1 refused: spec.minMember: must be >= 1, not -1\n"
    assert re.search(
        r"^WARNINGS .*\nTIME\s+KIND\s+NAMESPACE\s+NAME\s+REASON\s+MESSAGE\n"
        r"0s\s+PodGroup\s+default\s+pg-1\s+AdmissionRejected\s+spec\.minMember: must be >= 1",
        out,
        re.M,
    )


def test_a_pod_of_a_refused_pod_group_waits_like_one_of_a_missing_group() -> None:
    result, _ = simulated(
        pod_group("g", min_member=-1), pod("a", group="g"), pod("b", group="none")
    )
    rows = {p["name"]: (p["node"], p["phase"]) for p in result["pods"]}
    assert rows["a"] == rows["b"] == (None, "Pending")
    assert result["podGroups"] == []


def test_an_unforeseen_crash_names_the_object(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object) -> None:
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(runner, "create", broken)
    with pytest.raises(
        ManifestError,
        match=r"^<documents>, document 1: Pod default/p: cannot use it \(TypeError: 'int'",
    ):
        simulate(documents=[pod("p")])


def test_a_bad_object_due_later_is_refused_when_it_is_due() -> None:
    late = at(pod("p", cpu="lots"), "1h")
    result, notes = simulated(late)
    warning = assert_refused(result, notes, "Pod default/p", r"spec\.containers\[0\]")
    assert warning["time"] == 3600.0
    assert result["summary"]["binds"] == 1


def test_a_refused_update_leaves_the_object_as_it_was() -> None:
    update = at(changed(pod_group("g", min_member=2), "spec.minMember", 0), "10s")
    result, notes = simulated(pod_group("g", min_member=2), update)
    warning = assert_refused(result, notes, "PodGroup default/g", r"spec\.minMember: must be >= 1")
    assert warning["time"] == 10.0
    assert [(g["name"], g["minMember"]) for g in result["podGroups"]] == [("g", 2)]


def test_unknown_kinds_are_named_once_and_skipped() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    volcano_flow = {
        "apiVersion": "flow.volcano.sh/v1alpha1",
        "kind": "JobFlow",
        "metadata": {"name": "v"},
    }
    plain_config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    other = {**service, "metadata": {"name": "b"}}
    notes: list[str] = []
    result = simulate(
        documents=[node(), service, deployment, other, volcano_flow, plain_config, pod("p")],
        warn=notes.append,
    )
    assert notes == [
        "skipped 2 Service (v1) objects: the simulator does not model this kind",
        "skipped 1 Deployment (apps/v1) object: the simulator does not model this kind",
        "skipped 1 JobFlow (flow.volcano.sh/v1alpha1) object: the simulator does not model this kind",
        "skipped 1 ConfigMap (v1) object: the simulator does not model this kind",
    ]
    assert [p["name"] for p in result["pods"]] == ["p"]


def test_unknown_kinds_go_to_stderr_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}
    simulate(documents=[node(), service, {**service, "metadata": {"name": "b"}}])
    assert capsys.readouterr().err.count("Service") == 1


def test_a_list_is_read_item_by_item() -> None:
    result = simulate(documents=[{"apiVersion": "v1", "kind": "List", "items": [node(), pod("p")]}])
    assert result["pods"][0]["node"] == "node-1"


def test_scheduler_conf_config_map_must_hold_one_value() -> None:
    bad = conf_map("actions: allocate")
    bad["data"]["other"] = "x"
    with pytest.raises(
        ManifestError,
        match="ConfigMap kbatch-conf: a scheduler conf ConfigMap needs exactly one data value",
    ):
        load_documents([bad])


def test_only_one_scheduler_conf() -> None:
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n'
    with pytest.raises(ManifestError, match="a second scheduler conf"):
        load_documents([conf_map(text, "a"), conf_map(text, "b")])


def test_a_bad_scheduler_conf_names_its_config_map() -> None:
    text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: no-such-plugin\n'
    with pytest.raises(
        ConfigError,
        match=r"document 1 \(ConfigMap kbatch-conf, data\.conf\.yaml\) line 4: unknown plugin",
    ):
        runner.resolve_conf(None, load_documents([conf_map(text)]))


def test_config_file_wins_over_the_config_map(tmp_path: Path) -> None:
    in_manifests = 'actions: "enqueue"\ntiers:\n- plugins:\n  - name: gang\n'
    given = write(
        tmp_path, 'actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n', "conf.yaml"
    )
    conf = runner.resolve_conf(given, load_documents([conf_map(in_manifests)]))
    assert conf.actions == ("allocate",)


def test_a_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"conf\.yaml: cannot read"):
        runner.resolve_conf(tmp_path / "conf.yaml", load_documents([]))


def test_period_must_be_positive() -> None:
    with pytest.raises(clock.DurationError, match="--period"):
        simulate(documents=[node()], period="0")


def test_every_modelled_kind_is_taken_without_a_note() -> None:
    documents = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        node(),
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 100,
        },
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": "q", "namespace": "team"},
            "spec": {"hard": {"cpu": "10"}},
        },
        {
            "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "q"},
        },
        {
            "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g"},
        },
        pod("p", group="g", priorityClassName="high"),
        job("j"),
    ]
    notes: list[str] = []
    result = simulate(documents=documents, warn=notes.append)
    assert notes == []
    assert [p["name"] for p in result["pods"]] == ["j-0", "p"]


def test_two_manifests_of_one_object_due_together_are_refused_naming_both() -> None:
    with pytest.raises(
        ManifestError,
        match=r"^<documents>, document 3: Pod default/p is already defined by <documents>, "
        r"document 2, due at the same time",
    ):
        simulate(documents=[node(), pod("p", cpu="1"), pod("p", cpu="2")])


def test_an_input_without_objects_says_so() -> None:
    notes: list[str] = []
    simulate(
        documents=[conf_map('actions: "allocate"\ntiers:\n- plugins:\n  - name: gang\n')],
        warn=notes.append,
    )
    assert notes == ["the input holds no objects to simulate (the cluster stays empty)"]
