"""What the simulator accepts and how it refuses the rest: every error names where."""

import copy
import re
from pathlib import Path

import pytest
import yaml

from kbatch import cli
from kbatch.config import ConfigError
from kbatch.sim import clock, runner, simulate
from kbatch.sim.manifests import ManifestError, load_documents, load_files
from scenarios.objects import conf_map, job, node, pod


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


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            pod("p", cpu="lots"),
            r"^<documents>, document 2: Pod default/p: spec\.containers\[0\]\.resources\.requests\.cpu: 'lots' is not a Kubernetes quantity",
        ),
        (
            pod("p", duration="soon"),
            r"^<documents>, document 2: Pod default/p: annotation kbatch\.io/sim-duration: 'soon' is not a duration",
        ),
        (
            {**pod("p"), "metadata": {"name": "p", "annotations": {"kbatch.io/sim-submit-at": 30}}},
            r"document 2: Pod p: metadata\.annotations\.kbatch\.io/sim-submit-at: "
            r"expected a string \(quote it\), not 30",
        ),
        (
            job("j", cpu="1Zi"),
            r"document 2: Job default/j: spec\.template: spec\.containers\[0\]\.resources\.requests\.cpu: '1Zi'",
        ),
        (
            job("j", duration="2 minutes"),
            r"Job default/j: spec\.template annotation kbatch\.io/sim-duration",
        ),
        (
            {**job("j"), "spec": {**job("j")["spec"], "parallelism": "two"}},
            r"Job default/j: spec\.parallelism: expected an integer, not 'two'",
        ),
        (
            {**job("j"), "spec": {**job("j")["spec"], "parallelism": -1}},
            r"Job default/j: spec\.parallelism: expected a non-negative integer, not -1",
        ),
        (
            {**job("j"), "spec": {"parallelism": 1}},
            r"Job default/j: spec\.template\.spec: a Job needs a pod template",
        ),
        (
            {**node(), "status": {"allocatable": {"cpu": "4 cores"}}},
            r"document 2: Node node-1: status\.allocatable\.cpu",
        ),
    ],
)
def test_bad_objects_are_refused_naming_document_object_and_field(doc: dict, message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        simulate(documents=[node("other"), doc])


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


TEMPLATE_META = "spec.template.metadata"
# Fields of the wrong shape: each is one clear line naming the document, object and field.
MISSHAPEN = [
    (changed(pod("p"), "spec", "x"), r"Pod default/p: spec: expected a map, not 'x'"),
    (changed(pod("p"), "status", "x"), r"Pod default/p: status: expected a map, not 'x'"),
    (
        changed(pod("p"), "spec.containers", "x"),
        r"Pod default/p: spec\.containers: expected a list, not 'x'",
    ),
    (
        changed(pod("p"), "spec.containers", ["x"]),
        r"Pod default/p: spec\.containers\[0\]: expected a map, not 'x'",
    ),
    (
        changed(pod("p"), "spec.initContainers", "x"),
        r"Pod default/p: spec\.initContainers: expected a list, not 'x'",
    ),
    (
        changed(pod("p"), "metadata.labels", ["a"]),
        r"Pod p: metadata\.labels: expected a map, not \['a'\]",
    ),
    (
        changed(pod("p"), "metadata.namespace", 5),
        r"Pod p: metadata\.namespace: expected a string, not 5",
    ),
    (
        changed(pod("p"), "metadata.annotations", {"scheduling.k8s.io/group-name": 5}),
        r"Pod p: metadata\.annotations\.scheduling\.k8s\.io/group-name: expected a string",
    ),
    (
        changed(pod("p"), "spec.nodeName", 5),
        r"Pod default/p: spec\.nodeName: expected a string, not 5",
    ),
    (
        changed(pod("p"), "spec.schedulerName", 5),
        r"Pod default/p: spec\.schedulerName: expected a string, not 5",
    ),
    (
        changed(pod("p"), "spec.priority", "x"),
        r"Pod default/p: spec\.priority: expected an integer, not 'x'",
    ),
    (
        changed(pod("p"), "spec.terminationGracePeriodSeconds", "x"),
        r"Pod default/p: spec\.terminationGracePeriodSeconds: expected an integer",
    ),
    (
        changed(pod("p"), "spec.affinity", {"podAffinity": "x"}),
        r"Pod default/p: spec\.affinity\.podAffinity: expected a map, not 'x'",
    ),
    (changed(job("j"), "spec", "x"), r"Job default/j: spec: expected a map, not 'x'"),
    (
        changed(job("j"), TEMPLATE_META, "x"),
        r"Job default/j: spec\.template\.metadata: expected a map, not 'x'",
    ),
    (
        changed(job("j"), f"{TEMPLATE_META}.annotations", "x"),
        r"Job default/j: spec\.template\.metadata\.annotations: expected a map, not 'x'",
    ),
    (
        changed(job("j"), f"{TEMPLATE_META}.labels", ["a"]),
        r"Job default/j: spec\.template\.metadata\.labels: expected a map, not \['a'\]",
    ),
    (changed(node("n2"), "status", "x"), r"Node n2: status: expected a map, not 'x'"),
    (
        changed(node("n2"), "spec.taints", "x"),
        r"Node n2: spec\.taints: expected a list, not 'x'",
    ),
    (
        changed(node("n2"), "status.conditions", "Ready"),
        r"Node n2: status\.conditions: expected a list, not 'Ready'",
    ),
    (quota("x"), r"ResourceQuota default/rq: spec: expected a map, not 'x'"),
]


@pytest.mark.parametrize(("doc", "message"), MISSHAPEN)
def test_misshapen_fields_are_refused_naming_document_object_and_field(
    doc: dict, message: str
) -> None:
    with pytest.raises(ManifestError, match=r"^<documents>, document 2: " + message):
        simulate(documents=[node("other"), doc])


@pytest.mark.parametrize(("doc", "message"), MISSHAPEN[:3])
def test_misshapen_fields_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], doc: dict, message: str
) -> None:
    path = write(tmp_path, yaml.safe_dump_all([node("other"), doc]))
    assert cli.main(["simulate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert re.fullmatch(rf"kbatch: error: {re.escape(str(path))}, document 2: {message}\n", err)


def test_an_unforeseen_crash_while_checking_names_the_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(*args: object) -> None:
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(runner, "create", broken)
    with pytest.raises(
        ManifestError,
        match=r"^<documents>, document 1: Pod default/p: cannot use it \(TypeError: 'int'",
    ):
        simulate(documents=[pod("p")])


def test_a_bad_object_due_later_is_refused_before_the_run() -> None:
    late = {
        **pod("p", cpu="lots"),
        "metadata": {"name": "p", "annotations": {"kbatch.io/sim-submit-at": "1h"}},
    }
    with pytest.raises(ManifestError, match="Pod default/p"):
        simulate(documents=[node(), late])


def test_unknown_kinds_are_named_once_and_skipped() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "a"}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}}
    volcano_job = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "v"},
    }
    plain_config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {}}
    other = {**service, "metadata": {"name": "b"}}
    notes: list[str] = []
    result = simulate(
        documents=[node(), service, deployment, other, volcano_job, plain_config, pod("p")],
        warn=notes.append,
    )
    assert notes == [
        "skipped 2 Service (v1) objects: the simulator does not model this kind",
        "skipped 1 Deployment (apps/v1) object: the simulator does not model this kind",
        "skipped 1 Job (batch.volcano.sh/v1alpha1) object: the simulator does not model this kind",
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
