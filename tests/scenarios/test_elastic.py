"""Elastic gangs (DESIGN §12): pods beyond a group's minimum are surplus, placed only
after every group of the queue still short of its minimum has had its turn, and the
first to go when room is needed."""

from typing import Any

from kbatch.sim import output, simulate
from scenarios.objects import Obj, at, conf_map, node, pod, pod_group
from scenarios.runner import Outcome

HIGH = {
    "apiVersion": "scheduling.k8s.io/v1",
    "kind": "PriorityClass",
    "metadata": {"name": "high"},
    "value": 1000,
}


def group_of(name: str, min_member: int, priority: str | None = None) -> Obj:
    group = pod_group(name, min_member=min_member)
    if priority:
        group["spec"]["priorityClassName"] = priority
    return group


def test_surplus_waits_for_every_minimum_of_the_queue_even_of_lower_priority() -> None:
    """On 6 cpu: an elastic high-priority group (minimum 2, six pods) and a plain gang of
    4 below it. The high group takes its 2, the gang its 4; no room is left for surplus.
    (kube-batch's job order would place the high group's six first, and the gang
    would wait.)"""
    docs: list[Any] = [HIGH, node("n1", cpu="6"), group_of("elastic", 2, "high")]
    docs += [pod(f"elastic-{i}", group="elastic") for i in range(6)]
    docs.append(group_of("gang", 4))
    docs += [pod(f"gang-{i}", group="gang") for i in range(4)]
    result = simulate(documents=docs, until="1m")
    on_node = [p["name"] for p in result["pods"] if p["node"]]
    assert sorted(n.rpartition("-")[0] for n in on_node) == ["elastic"] * 2 + ["gang"] * 4


def test_surplus_fills_the_room_the_minimums_leave() -> None:
    docs: list[Any] = [HIGH, node("n1", cpu="8"), group_of("elastic", 2, "high")]
    docs += [pod(f"elastic-{i}", group="elastic") for i in range(6)]
    docs.append(group_of("gang", 4))
    docs += [pod(f"gang-{i}", group="gang") for i in range(4)]
    result = simulate(documents=docs, until="1m")
    bound = [p["name"].rpartition("-")[0] for p in result["pods"] if p["node"]]
    assert sorted(bound) == ["elastic"] * 4 + ["gang"] * 4
    # The output says which pods are surplus: the elastic group's 2 beyond its minimum.
    surplus = {g["name"]: g.get("surplus") for g in result["podGroups"]}
    assert surplus == {"elastic": 2, "gang": None}
    table = output.to_table(result)
    assert "SURPLUS" in table


# Preemption by priority alone: drf would refuse to take a job down to nothing for a
# preemptor that then holds a larger share than the victim keeps.
PREEMPT = """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def high(obj: Obj) -> Obj:
    obj["spec"]["priorityClassName"] = "high"
    return obj


def test_a_gang_spread_over_nodes_is_preempted_whole() -> None:
    """A gang of four 2-cpu pods fills two 4-cpu nodes, two on each; a high-priority pod
    asks for 4 cpu at 30 s. Evicting two pods of one node would break the gang, so the
    whole gang goes, on both nodes (before, it could lose only spare pods, had none, and
    the high pod waited for ever)."""
    docs: list[Any] = [HIGH, conf_map(PREEMPT), node("n1"), node("n2"), group_of("gang", 4)]
    docs += [pod(f"gang-{i}", cpu="2", group="gang") for i in range(4)]
    docs.append(at(high(pod_group("urgent")), "30s"))
    docs.append(at(high(pod("urgent", cpu="4", group="urgent")), "30s"))
    outcome = Outcome(simulate(documents=docs, until="2m"))
    assert outcome.pod("urgent")["phase"] == "Running"
    assert outcome.evictions(group="gang") == 4
    times = {e["time"] for e in outcome.events("Evict", kind="Pod")}
    assert len(times) == 1, "the gang goes at once"


def test_surplus_goes_before_any_gang_is_broken() -> None:
    """On one 8-cpu node, an elastic group (minimum 2, four pods) and a gang of four,
    all 1 cpu; a high-priority pod asks for 2 cpu. The elastic group's two surplus pods
    go; the gang keeps running."""
    docs: list[Any] = [HIGH, conf_map(PREEMPT), node("n1", cpu="8")]
    docs.append(group_of("gang", 4))
    docs += [pod(f"gang-{i}", group="gang") for i in range(4)]
    docs.append(group_of("elastic", 2))
    docs += [pod(f"elastic-{i}", group="elastic") for i in range(4)]
    docs.append(at(high(pod_group("urgent")), "30s"))
    docs.append(at(high(pod("urgent", cpu="2", group="urgent")), "30s"))
    outcome = Outcome(simulate(documents=docs, until="2m"))
    assert outcome.pod("urgent")["phase"] == "Running"
    assert outcome.evictions(group="elastic") == 2
    assert outcome.evictions(group="gang") == 0
    assert len(outcome.running(group="elastic")) == 2


def test_a_gang_whose_pods_the_plugins_do_not_all_let_go_is_not_broken() -> None:
    """Half of the spread gang runs at high priority (its PodGroup's class is low, its
    pods' differ): priority lets only the low pods go, which would break it: nothing goes."""
    docs: list[Any] = [HIGH, conf_map(PREEMPT), node("n1"), node("n2"), group_of("gang", 4)]
    docs += [pod(f"gang-{i}", cpu="2", group="gang") for i in range(2)]
    docs += [high(pod(f"gang-{i}", cpu="2", group="gang")) for i in range(2, 4)]
    docs.append(at(high(pod_group("urgent")), "30s"))
    docs.append(at(high(pod("urgent", cpu="4", group="urgent")), "30s"))
    outcome = Outcome(simulate(documents=docs, until="2m"))
    assert outcome.evictions(group="gang") == 0
    assert len(outcome.running(group="gang")) == 4
