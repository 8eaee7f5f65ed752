"""What the live benchmark hands Volcano's scheduler: its command line, its conf, its
CRDs from the cache, and the PodGroups its pods name."""

from pathlib import Path

import pytest
import yaml

from kbatch.bench import live, live_schedulers
from kbatch.bench import live_workload as w
from kbatch.config import KUBE_BATCH_CONF


def test_a_single_pod_job_gets_a_volcano_group_of_one() -> None:
    spec = w.scenario("a", 10, 20)
    body = w.pod(spec, 7, "volcano")
    assert body["metadata"]["annotations"] == {w.VOLCANO_GROUP_ANNOTATION: "gang-7"}
    group = w.group(spec, 7, "volcano")
    assert group is not None
    path, obj = group
    assert path == "/apis/scheduling.volcano.sh/v1beta1/namespaces/bench/podgroups"
    assert obj["metadata"]["name"] == "gang-7"
    assert obj["spec"] == {"minMember": 1, "queue": "default"}
    assert obj["status"] == {"phase": "Pending"}  # for its enqueue action to move on
    assert w.group(spec, 7, "kube-scheduler") is None
    assert "status" not in (w.group(w.scenario("b", 10, 20), 0, "kbatch") or ("", {}))[1]


def test_a_gang_names_its_volcano_group_of_ten() -> None:
    spec = w.scenario("b", 10, 20)
    group = w.group(spec, 1, "volcano")
    assert group is not None and group[1]["spec"] == {"minMember": 10, "queue": "default"}
    assert w.pod(spec, 19, "volcano")["metadata"]["annotations"] == {
        w.VOLCANO_GROUP_ANNOTATION: "gang-1"
    }


def test_volcano_confs(tmp_path: Path) -> None:
    assert live_schedulers.volcano_conf_text("default") is None
    assert live_schedulers.volcano_conf_text("kbatch") == KUBE_BATCH_CONF
    conf = tmp_path / "v.conf"
    conf.write_text('actions: "allocate"\n')
    assert live_schedulers.volcano_conf_text(str(conf)) == 'actions: "allocate"\n'
    with pytest.raises(ValueError, match=r"--volcano-conf '.*nowhere': no such file"):
        live_schedulers.volcano_conf_text(str(tmp_path / "nowhere"))


def test_kbatchs_default_conf_is_volcanos_without_overcommit() -> None:
    conf = yaml.safe_load(KUBE_BATCH_CONF)
    assert conf["actions"] == "enqueue, allocate, backfill"
    names = [[p["name"] for p in tier["plugins"]] for tier in conf["tiers"]]
    assert names == [
        ["priority", "gang", "conformance"],
        ["drf", "predicates", "proportion", "nodeorder"],
    ]


def test_volcano_argv_turns_its_health_check_on_and_passes_the_conf() -> None:
    argv = live_schedulers.volcano_argv(Path("/b/vc"), Path("/k"), None, 4321, None)
    assert argv[0] == "/b/vc" and "--kubeconfig=/k" in argv
    assert "--enable-healthz=true" in argv and "--healthz-address=127.0.0.1:4321" in argv
    assert "--kube-api-qps=2000" in argv and "--kube-api-burst=2000" in argv
    assert not any(a.startswith("--scheduler-conf") for a in argv)
    argv = live_schedulers.volcano_argv(Path("/b/vc"), Path("/k"), 50.0, 1, Path("/c.conf"))
    assert "--kube-api-qps=50" in argv and "--kube-api-burst=50" in argv
    assert "--scheduler-conf=/c.conf" in argv


def test_volcano_crds_are_read_from_beside_its_binary(tmp_path: Path) -> None:
    binary = tmp_path / "v1.15.1" / "bin" / "vc-scheduler"
    assert live_schedulers.volcano_crds(binary) == []
    crd = tmp_path / "v1.15.1" / "crd"
    crd.mkdir(parents=True)
    for name in ("queues", "podgroups"):
        body = {"kind": "CustomResourceDefinition", "metadata": {"name": f"{name}.x"}}
        (crd / f"{name}.yaml").write_text(yaml.safe_dump(body))
    got = live_schedulers.volcano_crds(binary)
    assert [c["metadata"]["name"] for c in got] == ["podgroups.x", "queues.x"]
    (crd / "other.yaml").write_text("kind: Queue\n")
    with pytest.raises(ValueError, match=r"other.yaml: not a CustomResourceDefinition"):
        live_schedulers.volcano_crds(binary)


def test_the_line_names_each_schedulers_conf() -> None:
    spec = w.scenario("a", 1, 1)
    options = live.Options(spec, 1, ("volcano", "kbatch"), None, 1.0, 1.0, volcano_conf="kbatch")
    assert live.conf_of(options, "volcano") == "kbatch's default"
    assert live.conf_of(options, "kbatch") == "default"
    assert live.conf_of(options, "kube-scheduler") == "default"
    plain = live.Options(spec, 1, ("volcano",), None, 1.0, 1.0)
    assert live.conf_of(plain, "volcano") == "default"


def test_volcanos_queue_is_opened_in_its_status(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(
        live.kubeapi,
        "request",
        lambda api, verb, path, body, **kw: calls.append((verb, path, body, kw)),
    )
    live.open_volcano_queue(object(), "q3")
    assert calls == [
        (
            "PATCH",
            "/apis/scheduling.volcano.sh/v1beta1/queues/q3/status",
            {"status": {"state": "Open"}},
            {"content_type": "application/merge-patch+json"},
        )
    ]
