"""The live benchmark's pure parts: the objects each scheduler is handed, the figures
made of bind times, the JSON line's shape and the table."""

import json

import pytest

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.bench import live, live_cluster
from kbatch.bench import live_workload as w


def test_scenarios_default_to_their_sizes_and_take_reduced_ones() -> None:
    assert w.scenario("a") == w.Scenario("a", 1000, 10000, 1)
    assert w.scenario("b") == w.Scenario("b", 1000, 10000, 10)
    assert w.scenario("b", nodes=100, pods=1000) == w.Scenario("b", 100, 1000, 10)
    assert w.scenario("b", pods=1000).gangs == 100


@pytest.mark.parametrize(
    ("name", "nodes", "pods", "says"),
    [
        ("c", None, None, "runs a, b so far"),
        ("b", None, 1005, "multiple of the gang size 10"),
        ("a", -1, None, "nodes must be positive"),
    ],
)
def test_bad_scenarios_are_refused_naming_the_field(
    name: str, nodes: int | None, pods: int | None, says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        w.scenario(name, nodes, pods)


def test_every_scheduler_gets_the_same_pod_but_for_what_marks_it_its_own() -> None:
    spec = w.scenario("b", 10, 20)
    pods = {s: w.pod(spec, 13, s) for s in w.SCHEDULERS}
    assert {p["metadata"]["name"] for p in pods.values()} == {"pod-13"}
    assert {json.dumps(p["spec"]["containers"]) for p in pods.values()} == {
        json.dumps(pods["kbatch"]["spec"]["containers"])
    }
    assert pods["kbatch"]["spec"]["schedulerName"] == "kbatch"
    assert pods["kbatch"]["metadata"]["annotations"] == {GROUP_NAME_ANNOTATION: "gang-1"}
    assert pods["volcano"]["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "gang-1"}
    assert pods["kube-scheduler"]["spec"]["schedulingGroup"] == {"podGroupName": "gang-1"}
    assert pods["kube-scheduler"]["spec"]["schedulerName"] == "default-scheduler"
    assert all(p["metadata"]["labels"] == {w.GANG_LABEL: "gang-1"} for p in pods.values())


def test_single_pod_jobs_have_no_group() -> None:
    spec = w.scenario("a", 10, 20)
    assert w.group(spec, 0, "kbatch") is None
    body = w.pod(spec, 0, "kube-scheduler")
    assert "schedulingGroup" not in body["spec"] and "annotations" not in body["metadata"]


def test_each_scheduler_gets_the_group_it_reads() -> None:
    spec = w.scenario("b", 10, 20)
    kbatch = w.group(spec, 1, "kbatch")
    upstream = w.group(spec, 1, "kube-scheduler")
    volcano = w.group(spec, 1, "volcano")
    assert kbatch and upstream and volcano
    assert kbatch[0] == "/apis/scheduling.incubator.k8s.io/v1alpha1/namespaces/bench/podgroups"
    assert kbatch[1]["spec"] == {"minMember": 10}
    assert upstream[0].startswith("/apis/scheduling.k8s.io/v1beta1/")
    assert upstream[1]["spec"] == {"schedulingPolicy": {"gang": {"minCount": 10}}}
    assert volcano[1]["apiVersion"] == "scheduling.volcano.sh/v1beta1"
    assert volcano[1]["spec"]["minMember"] == 10
    assert {g[1]["metadata"]["name"] for g in (kbatch, upstream, volcano)} == {"gang-1"}


def test_nodes_are_labelled_for_kwok() -> None:
    node = w.node(7)
    assert node["metadata"]["name"] == "kwok-node-7"
    assert node["metadata"]["labels"][w.NODE_LABEL] == w.NODE_LABEL_VALUE


def test_percentile_interpolates() -> None:
    assert w.percentile([], 0.5) is None
    assert w.percentile([3.0], 0.99) == 3.0
    assert w.percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert w.percentile([float(i) for i in range(101)], 0.99) == pytest.approx(99.0)


def test_gang_latency_runs_from_the_last_creation_to_the_last_bind() -> None:
    created = {"a": 0.0, "b": 1.0, "c": 0.0, "d": 0.0}
    bound = {"a": 2.0, "b": 5.0, "c": 3.0}  # gang y is missing d: not counted
    gangs = {"a": "x", "b": "x", "c": "y", "d": "y"}
    assert w.gang_latencies(created, bound, gangs) == [4.0]


def test_partly_bound_counts_pods_of_gangs_not_whole() -> None:
    sizes = {"g1": 3, "g2": 2}
    binds = [(0.0, "g1"), (0.1, "g1"), (0.2, "g2"), (0.3, "g1"), (5.0, "g2")]
    # at 0.2: g1 has 2 of 3 and g2 1 of 2 -> 3 pods partly bound
    assert w.max_partly_bound(binds, sizes) == 3
    # counted only once partly bound for a second: g2 alone, 1 pod
    assert w.max_partly_bound(binds, sizes, grace=1.0) == 1
    whole = [(0.0, "g1"), (0.1, "g1"), (0.2, "g1"), (0.3, "g2"), (0.4, "g2")]
    assert w.max_partly_bound(whole, sizes, grace=1.0) == 0


def test_a_gang_left_partly_bound_counts_all_its_bound_pods() -> None:
    binds = [(0.0, "g"), (2.0, "g"), (3.0, "g")]
    assert w.max_partly_bound(binds, {"g": 4}, grace=1.0) == 3


def test_a_run_line_has_every_key_and_the_figures() -> None:
    spec = w.scenario("b", 2, 20)
    created = {w.pod_name(i): 0.1 * i for i in range(20)}
    bound = {w.pod_name(i): 10.0 + 0.5 * i for i in range(20)}
    line = w.run_line(spec, "kbatch", 2, created, bound, peak_rss_bytes=5, error=None)
    assert list(line)[: len(w.LINE_KEYS)] == list(w.LINE_KEYS)
    assert line["seconds_to_all_bound"] == 19.5
    assert line["binds_per_second"] == 2.0
    assert line["p50_seconds"] == pytest.approx(13.8)  # 10 + 0.4 i at i = 9.5
    assert (line["round"], line["pods"], line["nodes"], line["bound"]) == (2, 20, 2, 20)
    assert line["gang_p50_seconds"] is not None
    json.dumps(line)


def test_a_run_not_wholly_bound_has_no_time_to_all_bound() -> None:
    spec = w.scenario("a", 2, 3)
    line = w.run_line(spec, "volcano", 1, {"pod-0": 0.0}, {"pod-0": 1.0}, error="timeout")
    assert line["seconds_to_all_bound"] is None and line["binds_per_second"] is None
    assert line["error"] == "timeout" and line["bound"] == 1


def test_summary_takes_min_median_max_of_the_runs_that_finished() -> None:
    lines = [
        {"scheduler": "kbatch", "scenario": "a", "seconds_to_all_bound": s, "error": None}
        for s in (3.0, 1.0, 2.0)
    ]
    lines.append({"scheduler": "volcano", "scenario": "a", "error": "not built"})
    rows = w.summary(lines)
    assert rows[0]["seconds_to_all_bound"] == (1.0, 2.0, 3.0)
    assert (rows[0]["runs"], rows[0]["failed"]) == (3, 0)
    assert (rows[1]["failed"], rows[1]["errors"]) == (1, ["not built"])
    text = w.table(rows)
    assert "1 / 2 / 3" in text and "volcano (a): not built" in text


def test_the_order_turns_each_round() -> None:
    names = ("kbatch", "kube-scheduler", "volcano")
    assert live.order(names, 0) == list(names)
    assert live.order(names, 1) == ["kube-scheduler", "volcano", "kbatch"]
    assert live.order(names, 3) == list(names)


def test_request_counts_are_summed_by_verb() -> None:
    text = "\n".join(
        [
            "# HELP apiserver_request_total x",
            'apiserver_request_total{code="201",component="apiserver",resource="pods",verb="POST"} 7',
            'apiserver_request_total{code="200",resource="nodes",verb="GET"} 2',
            'apiserver_request_total{code="201",resource="bindings",verb="POST"} 3e+00',
            'apiserver_request_duration_seconds_count{verb="POST"} 99',
        ]
    )
    assert live.parse_request_counts(text) == {"POST": 10, "GET": 2}


def test_kwok_stages_fake_ready_nodes_and_pods_that_finish() -> None:
    stages = {s["metadata"]["name"]: s for s in live_cluster.kwok_stages(12.5)}
    assert set(stages) == {"node-initialize", "pod-ready", "pod-complete", "pod-delete"}
    assert stages["pod-complete"]["spec"]["delay"] == {"durationMilliseconds": 12500}
    template = stages["node-initialize"]["spec"]["next"]["statusTemplate"]
    assert f'cpu: "{w.NODE_CPU}"' in template and "{{ NodeIP | Quote }}" in template
    assert stages["pod-delete"]["spec"]["next"] == {"delete": True}


def test_a_backlog_run_counts_the_time_to_all_bound_from_the_schedulers_start() -> None:
    spec = w.scenario("a", 1, 2)
    created, bound = {"pod-0": 0.0, "pod-1": 1.0}, {"pod-0": 5.0, "pod-1": 6.0}
    assert w.run_line(spec, "kbatch", 1, created, bound)["seconds_to_all_bound"] == 6.0
    assert w.run_line(spec, "kbatch", 1, created, bound, since=4.0)["seconds_to_all_bound"] == 2.0
