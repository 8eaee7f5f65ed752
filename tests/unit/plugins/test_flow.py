"""flow: decaying usage over fair share orders queues (Armada's fairness with memory)."""

import pytest

from builders import Cluster, FakeCluster, run_actions
from kbatch.api.queue import QueueStatus
from kbatch.api.times import rfc3339
from kbatch.cluster.records import parse_queue
from kbatch.config import ConfigError
from kbatch.operators.scheduler.core import runner
from kbatch.operators.scheduler.core.framework.info import TaskStatus
from kbatch.operators.scheduler.core.plugins.flow import decayed, parse_arguments

NOW = 100_000.0
GiB = 2**30


def conf(arguments: str = "{halfLife: 10m}", fair: str = "flow") -> str:
    """The default tiers with ``fair`` (flow, proportion or both) for queue fairness."""
    plugins = {
        "flow": f"{{name: flow, arguments: {arguments}}}",
        "proportion": "{name: proportion}",
        "both": f"{{name: flow, arguments: {arguments}}}, {{name: proportion}}",
    }[fair]
    return (
        'actions: "allocate"\ntiers:\n'
        "- plugins: [{name: priority}, {name: gang}, {name: conformance}]\n"
        f"- plugins: [{{name: drf}}, {{name: predicates}}, {plugins}, {{name: nodeorder}}]\n"
    )


def remembered(flow: float, seconds_ago: float = 0.0) -> QueueStatus:
    return QueueStatus(flow=flow, flow_updated=rfc3339(NOW - seconds_ago))


def close(cluster: Cluster, text: str | None = None) -> FakeCluster:
    """Open a session, run its actions, close it: what reached the cluster."""
    return run_actions(cluster.open(text or conf(), now=NOW))


# ------------------------------------------------------------------ the formula
@pytest.mark.parametrize(
    ("flow", "usage", "elapsed", "half_life", "expected"),
    [
        (10.0, 2.0, 0.0, 600.0, 10.0),  # no time passed: all remembered
        (10.0, 2.0, 600.0, 600.0, 6.0),  # one half-life: half the excess over usage
        (10.0, 2.0, 1200.0, 600.0, 4.0),  # two: a quarter
        (10.0, 12.0, 600.0, 600.0, 12.0),  # usage above the flow: the flow is the usage
        (10.0, 2.0, 600.0, 0.0, 2.0),  # no half-life: no memory
        (10.0, 2.0, -30.0, 600.0, 10.0),  # a clock behind the stored time: no decay
    ],
)
def test_decay(flow: float, usage: float, elapsed: float, half_life: float, expected: float):
    assert decayed(flow, usage, elapsed, half_life) == pytest.approx(expected)


# ------------------------------------------------------------------ arguments
def test_defaults_are_ten_minutes_and_cpu_cores() -> None:
    parsed = parse_arguments({})
    assert parsed.half_life == 600.0
    assert parsed.weights == {"cpu": 1 / 1000}  # per millicore: 1 per core


@pytest.mark.parametrize(
    ("resource", "weight", "per_unit"),
    [
        ("cpu", 1, 1 / 1000),  # per core, the scheduler counting millicores
        ("cpu", "2", 2 / 1000),
        ("cpu", "1/500m", 1 / 500),
        ("memory", "0.25/GiB", 0.25 / GiB),  # as the issue spells it
        ("memory", "0.25/Gi", 0.25 / GiB),
        ("memory", "2/4Gi", 2 / (4 * GiB)),
        ("memory", "1/1k", 1 / 1000),
        ("memory", "1/1e3", 1 / 1000),
        ("memory", 1e-9, 1e-9),  # per byte
        ("nvidia.com/gpu", 8, 8.0),
        ("nvidia.com/gpu", 0, 0.0),
    ],
)
def test_resource_weights(resource: str, weight: object, per_unit: float) -> None:
    weights = parse_arguments({"resourceWeights": {"pods": 1, resource: weight}}).weights
    assert weights[resource] == pytest.approx(per_unit)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"halflife": "1m"}, "unknown argument 'halflife' for plugin flow"),
        ({"halfLife": "soon"}, "halfLife: 'soon' is not a duration"),
        ({"halfLife": 600}, "halfLife: 600 is not a duration: write it as a string"),
        ({"resourceWeights": ["cpu"]}, "resourceWeights must map resource names to weights"),
        ({"resourceWeights": {}}, "resourceWeights must map resource names to weights"),
        ({"resourceWeights": {"cpu": -1}}, "resourceWeights.cpu must not be negative"),
        ({"resourceWeights": {"cpu": True}}, "resourceWeights.cpu must be a number"),
        ({"resourceWeights": {"cpu": "x/Gi"}}, "resourceWeights.cpu must be a number"),
        ({"resourceWeights": {"memory": "1/Gb"}}, "resourceWeights.memory: 'Gb' is not a quantity"),
        ({"resourceWeights": {"memory": "1/0"}}, "resourceWeights.memory: '1/0' is per nothing"),
        ({"resourceWeights": {"memory": "1/-1Gi"}}, "resourceWeights.memory: '-1Gi' is not a"),
        ({"resourceWeights": {"cpu": 0}}, "resourceWeights: every weight is 0"),
    ],
)
def test_bad_arguments_are_refused_naming_them(arguments: dict[str, object], message: str):
    with pytest.raises(ValueError, match="^" + message.replace("(", r"\(").replace(".", r"\.")):
        parse_arguments(arguments)


def test_the_conf_names_the_plugin_and_the_argument() -> None:
    with pytest.raises(ConfigError) as caught:
        runner.load_conf(conf("{resourceWeights: {memory: lots}}"))
    assert "tiers[1] plugin flow: arguments: resourceWeights.memory must be a number" in str(
        caught.value
    )


# ------------------------------------------------------------------ order
def two_queues(cpu: float = 8, a: QueueStatus | None = None, b: QueueStatus | None = None):
    """One node; queues a and b (weight 1, as default), each with eight 1-cpu jobs."""
    cluster = Cluster().node("n1", cpu=cpu, memory=64).queue("a").queue("b")
    cluster.queues["a"].old_status = a
    cluster.queues["b"].old_status = b
    for name in ("a", "b"):
        for i in range(8):
            cluster.job(f"{name}{i}", queue=name).tasks(1, cpu=1)
    return cluster


def placed(sent: FakeCluster) -> str:
    """The queues of the binds, in the order they were made: 'abab...'."""
    return "".join(name[0] for name, _ in sent.binds)


def test_without_history_queues_take_turns_job_by_job() -> None:
    """The key follows each placement (progressive filling), so neither queue runs away
    with the node; created first, a wins the ties."""
    assert placed(close(two_queues(cpu=4))) == "abab"


def test_the_queue_with_less_flow_goes_first_until_the_flows_meet() -> None:
    """a remembers 6 cores: b gets 6 before a gets any, then they take turns (the tie goes
    to a, created first). Proportion would have split 4 and 4."""
    sent = close(two_queues(a=remembered(6.0)))
    assert placed(sent) == "bbbbbbab"
    assert sorted(placed(close(two_queues(a=remembered(6.0)), conf(fair="proportion")))) == list(
        "aaaabbbb"
    )


def test_the_next_job_placed_leaves_its_queue_s_ratio_smallest() -> None:
    """No history; a's jobs take 4 cores, b's 1 (one node of 8). By the ratio *after* the
    next job (Armada), b goes first: 1 < 4; b then fills to 3, and at a tie (a's 4 against
    b's 3 + 1) a, created first, places its 4; b takes the last core. Ordered by the
    ratio before the job, a would have gone first, at 0 against 0."""
    cluster = Cluster().node("n1", cpu=8, memory=64).queue("a").queue("b")
    for i in range(4):
        cluster.job(f"a{i}", queue="a").tasks(1, cpu=4)
        cluster.job(f"b{i}x", queue="b").tasks(1, cpu=1)
        cluster.job(f"b{i}y", queue="b").tasks(1, cpu=1)
    assert placed(close(cluster)) == "bbbab"


def test_a_gang_short_of_its_minimum_counts_the_rest_of_it() -> None:
    """The key with a's next job: a gang of 3 (1 core each, 1 running) adds the 2 cores it
    still needs; a job already ready adds one more of its pending tasks."""
    cluster = Cluster().node("n1", cpu=8, memory=64).queue("a")
    gang = cluster.job("gang", queue="a", min_member=3)
    gang.tasks(1, cpu=1, status=TaskStatus.RUNNING, node="n1").tasks(2, cpu=1)
    cluster.job("elastic", queue="a", min_member=1).tasks(
        1, cpu=2, status=TaskStatus.RUNNING, node="n1"
    ).tasks(3, cpu=2)
    session = cluster.open(conf(), now=NOW)
    queue = session.queues["a"]
    share = 1 / 2  # beside the default queue
    held = 1 + 2
    assert session.queue_order_key(queue)[0] == held / share
    assert session.queue_order_key(queue, session.jobs["default/gang"])[0] == (held + 2) / share
    assert session.queue_order_key(queue, session.jobs["default/elastic"])[0] == (held + 2) / share


def test_half_life_decays_the_memory() -> None:
    """Remembered one half-life ago, 6 cores count 3: b gets 3 before a gets any."""
    sent = close(two_queues(a=remembered(6.0, seconds_ago=600)))
    assert placed(sent).startswith("bbba")


def test_weight_divides_the_flow() -> None:
    """a (weight 2) remembers 6 cores, b (weight 1) 4: 3 per unit of share is less than 4."""
    cluster = two_queues(a=remembered(6.0), b=remembered(4.0))
    cluster.queues["a"].weight = 2
    assert placed(close(cluster)).startswith("a")


def test_beside_proportion_flow_orders_and_proportion_caps() -> None:
    """b goes first, but proportion's overused stops it at its deserved half (4 cores;
    kube-batch's test lets a queue *at* its share take one job more)."""
    sent = close(two_queues(a=remembered(6.0)), conf(fair="both"))
    assert placed(sent) == "bbbbbaaa"


def test_a_session_counts_what_it_placed_in_full_and_writes_the_formula() -> None:
    """a remembers 6 cores and places 2: its key counts 8 at once (so the session's room is
    divided job by job), while the flow written is DESIGN's formula, max(6, 2) = 6."""
    cluster = Cluster().node("n1", cpu=2).queue("a")  # a's share: 1/2 (beside default)
    cluster.queues["a"].old_status = remembered(6.0)
    cluster.job("j", queue="a").tasks(2, cpu=1)
    session = cluster.open(conf(), now=NOW)
    assert session.queue_order_key(session.queues["a"])[0] == 6 / (1 / 2)
    assert len(run_actions(session).binds) == 2
    assert session.queue_order_key(session.queues["a"])[0] == 8 / (1 / 2)
    assert session.queues["a"].flow == 6.0


# ------------------------------------------------------------------ the status
def test_usage_is_priced_by_the_resource_weights() -> None:
    cluster = Cluster().node("n1", cpu=8, memory=64, gpu=2).queue("a")
    running = TaskStatus.RUNNING
    cluster.job("j", queue="a").tasks(1, cpu=2, memory=4, gpu=1, status=running, node="n1")
    weights = "{resourceWeights: {cpu: 1, memory: 0.25/GiB, nvidia.com/gpu: 8}}"
    sent = close(cluster, conf(weights))
    assert sent.queues["a"].flow == 2 + 1 + 8
    assert sent.queues["a"].flow_updated == rfc3339(NOW)


def test_the_flow_is_written_decayed_to_the_session_time() -> None:
    idle = Cluster().node("n1", cpu=12).queue("a", weight=2)
    idle.queues["a"].old_status = QueueStatus()
    assert "a" not in close(idle).queues  # nothing held, nothing remembered: nothing new
    cluster = Cluster().node("n1", cpu=12).queue("a", weight=2)
    cluster.queues["a"].old_status = remembered(8.0, seconds_ago=1200)
    assert close(cluster).queues["a"].flow == 2.0


def test_a_small_move_is_not_written_alone_and_a_large_one_is() -> None:
    """12 cpu, a's fair share two thirds: 8 cores; the step is 1% of that (0.08)."""

    def sent_after(seconds: float, running: int = 0) -> FakeCluster:
        cluster = Cluster().node("n1", cpu=12).queue("a", weight=2)
        cluster.queues["a"].old_status = remembered(8.0, seconds_ago=seconds)
        if running:
            cluster.job("j", queue="a").tasks(running, cpu=1, status=TaskStatus.RUNNING, node="n1")
        return close(cluster)

    assert "a" not in sent_after(5).queues  # 8 → 7.95
    assert sent_after(60).queues["a"].flow == pytest.approx(8 * 0.5**0.1, rel=1e-5)
    # written anyway (a job now counts as running): the fresh flow goes with it
    assert sent_after(5, running=1).queues["a"].flow == pytest.approx(
        1 + 7 * 0.5 ** (5 / 600), rel=1e-5
    )


def test_a_steady_flow_is_written_again_every_twentieth_of_the_half_life() -> None:
    """The time says until when the queue held that much: a's 4 cores held steadily are
    written again after 30 s (10 m / 20), though the flow did not move."""

    def steady(status: QueueStatus | None) -> Cluster:
        cluster = Cluster().node("n1", cpu=12).queue("a", weight=2)
        cluster.queues["a"].old_status = status
        cluster.job("j", queue="a").tasks(4, cpu=1, status=TaskStatus.RUNNING, node="n1")
        return cluster

    published = close(steady(None)).queues["a"]
    assert published.flow == 4.0

    def written_after(seconds: float) -> QueueStatus | None:
        stored = published.model_copy(update={"flow_updated": rfc3339(NOW - seconds)})
        return close(steady(stored)).queues.get("a")

    assert written_after(20) is None
    refreshed = written_after(40)
    assert refreshed is not None
    assert (refreshed.flow, refreshed.flow_updated) == (4.0, rfc3339(NOW))
    # without memory (halfLife 0) the time does not matter: never written for it alone
    stored = published.model_copy(update={"flow_updated": rfc3339(NOW - 3600)})
    assert "a" not in close(steady(stored), conf("{halfLife: '0'}")).queues


def test_a_remembered_excess_below_the_step_is_forgotten() -> None:
    cluster = Cluster().node("n1", cpu=12).queue("a", weight=2)
    cluster.queues["a"].old_status = remembered(8.0, seconds_ago=600 * 10)  # 8/1024 left
    assert close(cluster).queues["a"].flow == 0.0


def test_a_restart_keeps_the_flow() -> None:
    """A session writes a's flow; a new scheduler reads it back from the Queue (as the
    cluster layer parses it) one half-life later and orders by it."""
    first = Cluster().node("n1", cpu=8).queue("a").queue("b")
    first.job("old", queue="a").tasks(8, cpu=1, status=TaskStatus.RUNNING, node="n1")
    written = close(first).queues["a"]
    assert written.flow == 8.0
    obj = {
        "apiVersion": "scheduling.incubator.k8s.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "a"},
        "status": written.model_dump(mode="json", by_alias=True, exclude_none=True),
    }
    read_back = parse_queue(obj).status
    assert read_back == written
    # a's old jobs are gone: its flow, 8 remembered a half-life ago, counts 4. b gets 4
    # before a gets any, then they take turns.
    later = two_queues(a=read_back)
    assert placed(run_actions(later.open(conf(), now=NOW + 600))) == "bbbbabab"


def test_without_the_plugin_the_stored_flow_is_kept_and_never_the_reason_to_write() -> None:
    def cluster_with(status: QueueStatus | None, pending: int = 0) -> Cluster:
        cluster = Cluster().node("n1", cpu=4).queue("a")
        cluster.queues["a"].old_status = status
        cluster.job("j", queue="a").tasks(1, cpu=1, status=TaskStatus.RUNNING, node="n1")
        if pending:
            cluster.job("k", queue="a").tasks(pending, cpu=1)
        return cluster

    kube_batch = conf(fair="proportion")
    published = close(cluster_with(None), kube_batch).queues["a"]
    assert (published.flow, published.flow_updated) == (None, None)
    stored = published.model_copy(update={"flow": 8.0, "flow_updated": rfc3339(NOW - 3600)})
    assert "a" not in close(cluster_with(stored), kube_batch).queues
    status = close(cluster_with(stored, pending=1), kube_batch).queues["a"]
    assert (status.flow, status.flow_updated) == (8.0, rfc3339(NOW - 3600))
    assert status.allocated["cpu"] == "2"
