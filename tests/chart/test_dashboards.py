"""The Grafana dashboards: every query reads only metrics kbatch exports (DESIGN §8)."""

from __future__ import annotations

import itertools

import pytest
import yaml

from builders import Cluster, FakeCluster, vec
from chart import dashboards
from chart.tools import CHART
from kbatch.metrics import SchedulerMetrics, exported_names
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.info import TaskStatus

# The panels the issue asks for, by dashboard.
REQUIRED_PANELS = {
    "kbatch scheduler": {
        "E2E scheduling latency",
        "Action latency (p99)",
        "Plugin latency (p99)",
        "Schedule attempts by result",
        "Preemption attempts",
        "Unschedulable jobs",
    },
    "kbatch queues": {
        "CPU (millicores): deserved vs allocated vs request",
        "Memory: deserved vs allocated vs request",
        "Share",
        "PodGroups by phase",
        "Subtree $subtree: CPU (millicores) deserved vs allocated vs request",
    },
}


def chart_conf_text() -> str:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    return yaml.safe_dump(values["scheduler"]["conf"])


def recorded_metrics() -> SchedulerMetrics:
    """Metrics after one whole session of the chart's scheduler conf on a small cluster
    (a gang that fits, one that does not, a capped queue, a GPU)."""
    cluster = Cluster().node("n1", cpu=4, gpu=2).node("n2", cpu=2)
    cluster.queue("capped", weight=2, capability=vec(cpu=3, memory=8, gpu=1))
    cluster.job("fits", queue="capped", min_member=2).tasks(2, cpu=1, gpu=1)
    cluster.job("too-big", min_member=3).tasks(3, cpu=3)
    cluster.job("running").tasks(1, cpu=1, status=TaskStatus.RUNNING, node="n2")
    scheduler = runner.Scheduler(
        FakeCluster(cluster.snapshot()),
        runner.load_conf(chart_conf_text(), "charts/kbatch/values.yaml"),
        clock=lambda: 100.0,
        session_ids=map(str, itertools.count()).__next__,
    )
    metrics = SchedulerMetrics()
    metrics.record(scheduler.run_once())
    return metrics


ALL_QUERIES = list(dashboards.queries())


def test_there_are_two_dashboards_with_queries() -> None:
    titles = {dashboards.load(path)["title"] for path in dashboards.files()}
    assert titles == set(REQUIRED_PANELS)
    assert len(ALL_QUERIES) >= 20


@pytest.mark.parametrize("path", dashboards.files(), ids=lambda p: p.name)
def test_dashboard_has_the_required_panels_and_a_datasource_variable(path) -> None:
    board = dashboards.load(path)
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert REQUIRED_PANELS[board["title"]] <= {p["title"] for p in panels}
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    assert board["uid"] and len(board["uid"]) <= 40
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("up", {"up"}),
        ('rate(x_total{job="a", le=~"1|2"}[5m])', {"x_total"}),
        (
            "histogram_quantile(0.99, sum by (le, action) (rate(h_bucket[$__rate_interval])))",
            {"h_bucket"},
        ),
        ("sum(rate(a[1m])) by (le) / on (instance) group_left (pod) b", {"a", "b"}),
        ("topk(10, max without (job_id) (g))", {"g"}),
        ('a > bool 1e3 and b offset 5m unless c{x="sum(d)"}', {"a", "b", "c"}),
        ("sum(kbatch_e2e_x_count) or vector(0)", {"kbatch_e2e_x_count"}),
        ('max by (queue_name) (q{queue_name=~"$queue"})', {"q"}),
        ("rate(m:recorded:rule[5m:30s])", {"m:recorded:rule"}),
        # a metric named like a function, and functions over label-looking names
        ("rate(rate[5m])", {"rate"}),
        ('count_values("value", by_metric) BY (value)', {"by_metric"}),
        ("on_time_total offset 1h and ignoring(job) bool_gauge", {"on_time_total", "bool_gauge"}),
        ('sum without (instance, job) (label_replace(up, "dst", "$1", "src", "(.*)"))', {"up"}),
        ("max_over_time(x[5m:1m] @ end())", {"x"}),
        ('sum(rate(x_total{a="}[", b=~"{x}"}[5m]))', {"x_total"}),
        # a metric named in a matcher; one selected by a pattern cannot pass unread
        ('{__name__="kbatch_a", job="x"}', {"kbatch_a"}),
        ('{__name__=~"kbatch_.*"}', {'__name__=~"kbatch_.*"'}),
    ],
)
def test_the_tokenizer_finds_exactly_the_metric_names(expr, names) -> None:
    assert dashboards.metric_names(expr) == names


def test_range_functions_are_paired_with_the_metric_they_read() -> None:
    expr = 'sum(delta(g[5m])) / sum(rate(c_total{a="}"}[$__rate_interval])) + max(h)'
    assert dashboards.range_functions(expr) == {("delta", "g"), ("rate", "c_total")}


# Gauges kbatch exports that only grow within a process (kube-batch's names, no _total):
# like counters, they go back to 0 when kbatch restarts.
COUNTER_LIKE = frozenset({"kbatch_total_preemption_attempts"})
RESET_SAFE = frozenset({"rate", "irate", "increase", "resets"})


def test_counters_are_read_with_functions_that_survive_a_restart() -> None:
    """delta() of a counter is negative across a restart; rate()/increase() see the reset."""
    wrong = {
        f"{q.dashboard} / {q.panel}: {function}({metric})"
        for q in ALL_QUERIES
        for function, metric in dashboards.range_functions(q.expr)
        if (metric in COUNTER_LIKE or metric.endswith(("_total", "_count", "_sum", "_bucket")))
        and function not in RESET_SAFE
    }
    assert not wrong, sorted(wrong)


def test_a_panel_of_pod_group_phases_names_every_phase_it_plots() -> None:
    for q in ALL_QUERIES:
        title = q.panel.lower()
        for name in dashboards.metric_names(q.expr):
            phase = name.removeprefix("kbatch_queue_pod_group_").removesuffix("_count")
            if name.startswith("kbatch_queue_pod_group_") and "by phase" not in title:
                assert phase in title, f"{q.dashboard} / {q.panel} plots {phase}"


def test_every_query_uses_only_exported_metrics() -> None:
    exported = exported_names(recorded_metrics())
    unknown = {
        f"{q.dashboard} / {q.panel} / {q.ref}: {name}"
        for q in ALL_QUERIES
        for name in dashboards.metric_names(q.expr)
        if name not in exported
    }
    assert not unknown, "\n".join(sorted(unknown))
    used = {name for q in ALL_QUERIES for name in dashboards.metric_names(q.expr)}
    assert all(name.startswith("kbatch_") for name in used)


def test_every_query_variable_reads_an_exported_metric() -> None:
    exported = exported_names(recorded_metrics())
    variables = list(dashboards.variable_queries())
    assert variables, "the queues dashboard selects queues with a variable"
    for variable in variables:
        assert dashboards.variable_metric(variable.expr) in exported, variable


def test_the_dashboards_read_every_metric_family() -> None:
    """No family kbatch exports is left off the dashboards."""
    used = {name for q in ALL_QUERIES for name in dashboards.metric_names(q.expr)}
    families = {family.name for family in SchedulerMetrics().registry.collect()}
    covered = {f for f in families if any(u == f or u.startswith(f + "_") for u in used)}
    assert covered == families, sorted(families - covered)


def test_each_top_level_subtree_gets_its_own_panels() -> None:
    """Repeated over the ``subtree`` variable, whose values are the top-level queues (the
    gauges' ``parent`` is "" there); each shows the subtree's queue and its children."""
    (board,) = [dashboards.load(p) for p in dashboards.files() if "queues" in p.name]
    (subtree,) = [v for v in board["templating"]["list"] if v["name"] == "subtree"]
    assert subtree["query"]["query"] == 'label_values(kbatch_queue_weight{parent=""}, queue_name)'
    assert subtree["includeAll"] and subtree["multi"]
    repeated = [p for p in board["panels"] if p.get("repeat") == "subtree"]
    assert {p["title"].split(": ")[1].split(" deserved")[0] for p in repeated} == {
        "CPU (millicores)",
        "memory",
    }
    for panel in repeated:
        kinds = set()
        for target in panel["targets"]:
            own, children = target["expr"].split(" or ")
            assert 'queue_name=~"$subtree"' in own and 'parent=~"$subtree"' in children
            (metric,) = dashboards.metric_names(own)
            assert dashboards.metric_names(children) == {metric}
            kinds.add(metric.split("_")[2])
        assert kinds == {"deserved", "allocated", "request"}, panel["title"]


def test_the_queue_gauges_carry_the_subtree_the_panels_select() -> None:
    """What the subtree panels select, read off the registry: a top-level queue's series
    have parent "", a child's its parent's name."""
    cluster = Cluster().node("n1", cpu=4).queue("team").queue("leaf")
    cluster.queues["leaf"].parent = "team"
    metrics = SchedulerMetrics()
    metrics.record(cluster.open())
    parents = {
        sample.labels["queue_name"]: sample.labels["parent"]
        for family in metrics.registry.collect()
        if family.name == "kbatch_queue_deserved_milli_cpu"
        for sample in family.samples
    }
    assert parents == {"default": "", "team": "", "leaf": "team"}
