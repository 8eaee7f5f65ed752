"""The reserve action (DESIGN §11): a whole-node job beside a flood of small ones."""

from typing import Any

import pytest

from kbatch.sim import simulate
from scenarios.objects import at, conf_map, job, node, pod, pod_group, queue
from scenarios.runner import HERE, Outcome

PLACING = "enqueue, allocate, backfill"
TIERS = """
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""
HOSTNAME = "kubernetes.io/hostname"
SMALL_RUNTIME = 60.0  # the longest small job: 50 s + 7 × 1.5 s, rounded up


def flood_and_big(actions: str) -> Outcome:
    """Two 4-cpu nodes kept full by queue a's eight streams of 1-cpu jobs of staggered
    lengths; at 30 s queue b (within its share) asks for a whole node."""
    group = pod_group("flood", queue="a")
    streams = []
    for i in range(8):
        stream = job(f"flood-{i}", completions=40, group="flood", duration=f"{50 + 1.5 * i}s")
        streams.append(stream)
    big_group = at(pod_group("big", queue="b"), "30s")
    big = at(pod("big", cpu="4", group="big"), "30s")
    conf = conf_map(f"actions: {actions!r}\n{TIERS}")
    docs: list[Any] = [conf, node("n1"), node("n2"), queue("a"), queue("b"), group]
    return Outcome(simulate(documents=[*docs, *streams, big_group, big], until="20m"))


def started(outcome: Outcome, name: str) -> float | None:
    times = [e["time"] for e in outcome.events("Scheduled") if e["name"] == name]
    return times[0] if times else None


def test_without_reserve_the_whole_node_job_waits_for_the_flood() -> None:
    """kube-batch's behaviour: a's jobs refill a core whenever a dips below its share, on
    either node, so neither drains (the issue measured 73 minutes on Armada's workload)."""
    waited = started(flood_and_big(PLACING), "big")
    assert waited is None or waited - 30.0 > 5 * SMALL_RUNTIME


def test_with_reserve_it_starts_within_one_small_job_runtime() -> None:
    outcome = flood_and_big(f"{PLACING}, reserve")
    at_start = started(outcome, "big")
    assert at_start is not None and at_start - 30.0 <= SMALL_RUNTIME + 5.0, at_start
    assert outcome.summary["evictions"] == 0, "a drain, not an eviction"


def test_the_condition_says_which_node_drains() -> None:
    outcome = flood_and_big(f"{PLACING}, reserve")
    said = [
        e["message"]
        for e in outcome.events("Unschedulable")
        if e["name"] == "big" and "to drain" in e["message"]
    ]
    assert said, outcome.events("Unschedulable")
    assert said[0].startswith("1/1 tasks in gang unschedulable: waiting for 1 node to drain: n")
    assert "cpu still in use)" in said[0]


def flood_in_its_own_queue(one_pod_groups: bool, config: str | None = None) -> Outcome:
    """Four 4-cpu nodes, all full (n1 and n2 until 60 s, but for one of n1's cores free at
    10 s; n3 and n4 until 20 s). At 1 s a gang of two 4-cpu pods comes; from 2 s to 300 s
    a 1-cpu, 15-s job each second, in the same queue, as one-pod PodGroups or bare pods.
    Its queue is at its deserved share the whole time, so proportion never lets the gang
    in past the idle room, which the flood takes core by core as it frees."""
    docs: list[Any] = [conf_map(config)] if config is not None else []
    ends = {"n1": [10, 60, 60, 60], "n2": [60] * 4, "n3": [10, 20, 20, 20], "n4": [20] * 4}
    for name, durations in ends.items():
        docs.append(node(name))
        for i, lasts in enumerate(durations):
            docs.append(pod(f"{name}-busy-{i}", duration=f"{lasts}s", nodeName=name))
    docs.append(at(pod_group("big", min_member=2), "1s"))
    docs += [at(pod(f"big-{i}", cpu="4", group="big"), "1s") for i in range(2)]
    for t in range(2, 300):
        group = f"flood-{t}" if one_pod_groups else None
        if group is not None:
            docs.append(at(pod_group(group), f"{t}s"))
        docs.append(at(pod(f"flood-{t}", duration="15s", group=group), f"{t}s"))
    return Outcome(simulate(documents=docs, until="10m"))


@pytest.mark.parametrize("one_pod_groups", [True, False], ids=["groups", "bare-pods"])
def test_a_gang_behind_a_flood_in_its_own_queue_starts_once_its_nodes_drain(
    one_pod_groups: bool,
) -> None:
    """With the default conf the gang, first in its queue's line and within its share once
    the queue's running work ends, is admitted ahead of the room once it has waited 30 s
    (``reserve.starvingAfter``) while later jobs of its queue took the cores it waits for;
    reserve keeps two nodes for it, and it starts as they drain, not after the flood
    (315 s)."""
    outcome = flood_in_its_own_queue(one_pod_groups)
    admitted = [
        e["time"]
        for e in outcome.events(kind="PodGroup")
        if e["name"] == "big" and e["message"] == "phase Pending → Inqueue"
    ]
    assert len(admitted) == 1 and 31.0 <= admitted[0] <= 36.0, admitted
    at_start = started(outcome, "big-0")
    assert at_start is not None and at_start <= 61.0, at_start  # n1 and n2 are busy to 60 s
    assert started(outcome, "big-1") == at_start
    flood = [name for name in outcome.pods() if name["name"].startswith("flood-")]
    assert all(pod["node"] is not None for pod in flood), "every small job ran too"
    assert outcome.summary["evictions"] == 0


def test_kube_batchs_conf_lets_the_flood_starve_it() -> None:
    kube_batch = (HERE.parents[1] / "examples" / "conf" / "kube-batch.yaml").read_text()
    at_start = started(flood_in_its_own_queue(True, kube_batch), "big-0")
    assert at_start is not None and at_start >= 300.0, at_start


def named_node(name: str) -> dict[str, Any]:
    made = node(name)
    made["metadata"]["labels"] = {HOSTNAME: name}
    return made


APART = {
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "g"}}, "topologyKey": HOSTNAME}
        ]
    }
}


@pytest.mark.parametrize("why", ["anti-affinity", "host port"])
def test_no_room_is_kept_for_a_gang_whose_pods_cannot_share_the_one_node_there_is(
    why: str,
) -> None:
    """A gang of two whose pods keep apart (required anti-affinity by hostname, or one
    host port), on a cluster where another scheduler's pod holds one of two nodes for
    good: no plan puts both pods on the other node (it had kept that node for both, for
    ever, and the job after it waited behind it)."""
    gang = [pod_group("g", 2)]
    for i in range(2):
        member = pod(f"g-{i}", cpu="2", group="g")
        member["metadata"]["labels"] = {"app": "g"}
        if why == "anti-affinity":
            member["spec"]["affinity"] = APART
        else:
            member["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
        gang.append(member)
    theirs = pod("theirs", cpu="4", scheduler="default-scheduler", nodeName="n2")
    later = at(pod("later", cpu="1"), "10s")
    conf = conf_map(f"actions: '{PLACING}, reserve'\n{TIERS}")
    docs = [conf, named_node("n1"), named_node("n2"), theirs, *gang, later]
    outcome = Outcome(simulate(documents=docs, until="1m"))
    assert outcome.running(job="g") == []
    assert started(outcome, "later") is not None
