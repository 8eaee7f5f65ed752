"""The live benchmark's pure parts: the objects each scheduler is handed, the figures
made of bind times, the JSON line's shape and the table."""

import json

import pytest

from kbatch.api import GROUP_NAME_ANNOTATION
from kbatch.bench import live, live_api, live_cluster
from kbatch.bench import live_workload as w


def test_scenarios_default_to_their_sizes_and_take_reduced_ones() -> None:
    assert w.scenario("a") == w.Scenario("a", 1000, 10000, 1)
    assert w.scenario("b") == w.Scenario("b", 1000, 10000, 10)
    assert w.scenario("b", nodes=100, pods=1000) == w.Scenario("b", 100, 1000, 10)
    assert w.scenario("b", pods=1000).gangs == 100


@pytest.mark.parametrize(
    ("name", "nodes", "pods", "says"),
    [
        ("e", None, None, "--scenario 'e': one of a, b, c, d"),
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
    assert live_api.parse_request_counts(text) == {"POST": 10, "GET": 2}
    by_resource = live_api.parse_request_counts(text, ("verb", "resource", "subresource"))
    assert by_resource == {"POST pods": 7, "GET nodes": 2, "POST bindings": 3}


def test_request_counts_by_resource_name_the_subresource() -> None:
    text = "\n".join(
        [
            'apiserver_request_total{resource="pods",subresource="binding",verb="POST"} 5',
            'apiserver_request_total{resource="pods",subresource="",verb="POST"} 4',
            'apiserver_request_total{resource="pods",subresource="status",verb="PATCH"} 2',
        ]
    )
    counts = live_api.parse_request_counts(text, ("verb", "resource", "subresource"))
    assert counts == {"POST pods/binding": 5, "POST pods": 4, "PATCH pods/status": 2}
    assert live_api.differences(counts, {"POST pods": 4, "PATCH pods/status": 1}) == {
        "PATCH pods/status": 1, "POST pods/binding": 5,
    }  # fmt: skip


def test_kwok_stages_fake_ready_nodes_and_pods_that_finish() -> None:
    stages = {s["metadata"]["name"]: s for s in live_cluster.kwok_stages(12.5)}
    assert set(stages) == {"node-initialize", "pod-ready", "pod-complete", "pod-delete"}
    assert stages["pod-complete"]["spec"]["delay"] == {"durationMilliseconds": 12500}
    template = stages["node-initialize"]["spec"]["next"]["statusTemplate"]
    assert f'cpu: "{w.NODE_CPU}"' in template and "{{ NodeIP | Quote }}" in template
    assert stages["pod-delete"]["spec"]["next"] == {"delete": True}


def test_pods_scale_with_the_nodes_unless_given() -> None:
    assert w.scenario("b", nodes=200) == w.Scenario("b", 200, 2000, 10)
    assert w.scenario("c", nodes=200) == w.Scenario("c", 200, 2000, 10, 100, 10)
    assert w.scenario("d", nodes=200) == w.Scenario("d", 200, 800, 10, restart=True)
    assert w.scenario("d", nodes=200, pods=50).pods == 50
    assert w.scenario("a", nodes=1).pods == 10
    assert w.scenario("c") == w.Scenario("c", 5000, 50000, 10, 100, 10)
    assert w.scenario("d") == w.Scenario("d", 5000, 20000, 10, restart=True)


def test_scenario_c_has_gangs_of_10_to_100_over_10_queues() -> None:
    spec = w.scenario("c")
    assert sum(spec.sizes) == 50000
    assert set(spec.sizes) <= set(range(10, 101, 10)) and len(set(spec.sizes)) == 10
    assert spec.sizes == w.scenario("c").sizes  # drawn the same each time
    for g in (0, 1, spec.gangs - 1):
        members = spec.members(g)
        assert len(members) == spec.sizes[g]
        assert {spec.gang_of(i) for i in members} == {g}
    assert spec.members(spec.gangs - 1)[-1] == 49999
    assert {spec.queue_of(g) for g in range(spec.gangs)} == {f"queue-{i}" for i in range(10)}
    assert w.scenario("b").queue_of(3) is None


def test_a_gang_of_scenario_c_is_named_with_its_size_and_queue() -> None:
    spec = w.scenario("c", nodes=100)
    g = 3
    size, pod = spec.sizes[g], spec.members(g)[0]
    kbatch, volcano = w.group(spec, g, "kbatch"), w.group(spec, g, "volcano")
    upstream = w.group(spec, g, "kube-scheduler")
    assert kbatch and volcano and upstream
    assert kbatch[1]["spec"] == {"minMember": size, "queue": "queue-3"}
    assert volcano[1]["spec"] == {"minMember": size, "queue": "queue-3"}
    assert upstream[1]["spec"] == {"schedulingPolicy": {"gang": {"minCount": size}}}
    assert w.pod(spec, pod, "kbatch")["metadata"]["annotations"] == {
        GROUP_NAME_ANNOTATION: f"gang-{g}"
    }


def test_kbatch_and_volcano_get_the_weighted_queues_and_kube_scheduler_none() -> None:
    spec = w.scenario("c", nodes=20)
    for scheduler, api in (("kbatch", w.KBATCH_GROUPS), ("volcano", w.VOLCANO_QUEUES)):
        queues = w.queues(spec, scheduler)
        assert [q[1]["spec"]["weight"] for q in queues] == list(range(1, 11))
        assert {q[0] for q in queues} == {f"/apis/{api}/queues"}
        assert queues[0][1]["metadata"]["name"] == "queue-0"
    assert w.queues(spec, "kube-scheduler") == []
    assert w.queues(w.scenario("b"), "kbatch") == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ((5, 50, 10, 15), "max_gang .15. must be a multiple of gang .10."),
        ((5, 50, 0), "gang must be positive"),
        ((5, 50, 10, 0, -1), "queues must be 0 or more"),
    ],
)
def test_bad_gang_shapes_are_refused(args: tuple[int, ...], says: str) -> None:
    with pytest.raises(ValueError, match=says):
        w.Scenario("x", *args)


def test_a_restart_run_says_when_the_pods_were_made() -> None:
    options = live.Options(w.scenario("d", 1, 10), 1, ("kbatch",), None, 1.0, 1.0)
    assert "killed" in live.submitted(options)
    plain = live.Options(w.scenario("b", 1, 10), 1, ("kbatch",), None, 1.0, 1.0)
    assert live.submitted(plain) == "while it ran"
