"""Topology-aware gang placement (DESIGN §12): a gang's domain is chosen for the whole
gang — the smallest that holds it — and a required level waits rather than spreads."""

from typing import Any

import pytest

from kbatch.config import ConfigError
from kbatch.sim import output, simulate
from scenarios.objects import Obj, at, conf_map, node, pod, pod_group
from scenarios.runner import Outcome

RACK, ZONE = "kbatch.io/rack", "topology.kubernetes.io/zone"
CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
topology:
  levels: [topology.kubernetes.io/zone, kbatch.io/rack, kubernetes.io/hostname]
"""


def rack_node(name: str, rack: str, zone: str = "z1", cpu: str = "4") -> Obj:
    obj = node(name, cpu=cpu)
    obj["metadata"]["labels"] = {RACK: rack, ZONE: zone, "kubernetes.io/hostname": name}
    return obj


def gang(name: str, size: int, cpu: str = "2", **topology: str) -> list[Obj]:
    group = pod_group(name, min_member=size)
    annotations = {f"kbatch.io/topology-{mode}": level for mode, level in topology.items()}
    if annotations:
        group["metadata"]["annotations"] = annotations
    return [group, *(pod(f"{name}-{i}", cpu=cpu, group=name) for i in range(size))]


def racks(count: int, nodes_per_rack: int = 2, cpu: str = "4") -> list[Obj]:
    """Racks r1.. of ``nodes_per_rack`` nodes; racks 1-2 in zone z1, 3-4 in z2."""
    return [
        rack_node(f"r{r}-n{n}", f"r{r}", zone=f"z{(r + 1) // 2}", cpu=cpu)
        for r in range(1, count + 1)
        for n in range(1, nodes_per_rack + 1)
    ]


def run(*docs: Any) -> Outcome:
    return Outcome(simulate(documents=[conf_map(CONF), *docs], until="1m"))


def racks_of(outcome: Outcome, group: str) -> set[str]:
    return {p["node"].partition("-")[0] for p in outcome.bound(group=group)}


def busy(name: str, node: str, cpu: str = "2") -> Obj:
    """A pod of no gang, running on ``node``."""
    obj = pod(name, cpu=cpu)
    obj["spec"]["nodeName"] = node
    return obj


def test_required_waits_rather_than_spreads_and_says_which_racks_came_closest() -> None:
    """Each rack holds 4 pods of 2 cpu when empty; a busy pod in each leaves room for 3."""
    outcome = run(*racks(2), busy("b1", "r1-n1"), busy("b2", "r2-n1"), *gang("g", 4, required=RACK))
    assert outcome.bound(group="g") == []
    message = outcome.condition("g", "Unschedulable")["message"]
    assert message.endswith(
        "needs 4 pods in one kbatch.io/rack domain: the closest are r1 (room for 3), "
        "r2 (room for 3)"
    ), message


def test_a_gang_no_domain_can_ever_hold_is_not_admitted_and_keeps_no_one_out() -> None:
    """12 cpu in one rack of 8: never. Admitted, it would hold 12 cpu of the cluster's
    promises for ever, and the gang after it (8 cpu) would never be admitted. Without
    its pods yet (they come once it is admitted: a Job held for it), its minResources
    say so."""
    after = [at(obj, "10s") for obj in gang("after", 4)]
    outcome = run(*racks(2), *gang("big", 6, required=RACK), *after)
    assert outcome.group("big")["phase"] == "Pending"
    message = outcome.condition("big", "Unschedulable")["message"]
    assert message.endswith(
        "not admitted: 6 pods of cpu 2 never fit in one kbatch.io/rack domain, even empty: "
        "the largest holds 4 of them"
    ), message
    assert len(outcome.bound(group="after")) == 4
    big, *_ = gang("big", 6, required=RACK)
    big["spec"]["minResources"] = {"cpu": "12"}
    outcome = run(*racks(2), big, *after)
    message = outcome.condition("big", "Unschedulable")["message"]
    assert message.endswith(
        "not admitted: minResources cpu 12 fit in no kbatch.io/rack domain: the largest has cpu 8"
    ), message
    assert len(outcome.bound(group="after")) == 4


def test_a_gang_whose_pods_no_domain_can_pack_is_not_admitted_either() -> None:
    """Rack r1 has nodes of 4 and 8 cpu, 12 in all: enough for the minResources of four
    3-cpu pods, but it holds 1 + 2 of them (r2 one more: the cluster as a whole holds
    them all). Admitted, the gang held its 12 cpu for ever and the gang after it was
    told the cluster's free room was too small (found by reading node_fit beside
    topology's own check, which sums a domain's room)."""
    nodes = [rack_node("r1-n1", "r1"), rack_node("r1-n2", "r1", cpu="8"), rack_node("r2-n1", "r2")]
    big, *pods = gang("big", 4, cpu="3", required=RACK)
    big["spec"]["minResources"] = {"cpu": "12"}
    after = [at(obj, "10s") for obj in gang("after", 2, cpu="4")]
    outcome = run(*nodes, big, *pods, *after)
    assert outcome.group("big")["phase"] == "Pending"
    message = outcome.condition("big", "Unschedulable")["message"]
    assert message.endswith(
        "not admitted: 4 pods of cpu 3 never fit in one kbatch.io/rack domain, even empty: "
        "the largest holds 3 of them"
    ), message
    assert len(outcome.bound(group="after")) == 2


def test_without_a_topology_request_the_same_gang_spreads() -> None:
    outcome = run(*racks(2), *gang("big", 6))
    assert racks_of(outcome, "big") == {"r1", "r2"}


def test_required_places_the_whole_gang_in_one_rack() -> None:
    outcome = run(*racks(2), *gang("fits", 4, required=RACK))
    assert len(outcome.bound(group="fits")) == 4
    assert len(racks_of(outcome, "fits")) == 1


def test_preferred_packs_one_rack_where_nodeorder_alone_would_spread() -> None:
    spread = run(*racks(2), *gang("g", 4))
    assert racks_of(spread, "g") == {"r1", "r2"}, "least-requested spreads"
    packed = run(*racks(2), *gang("g", 4, preferred=RACK))
    assert len(racks_of(packed, "g")) == 1


def test_preferred_goes_out_a_level_then_spreads_only_when_it_must() -> None:
    """Six pods of 2 cpu: no rack holds them, zone z1 (racks 1-2) does."""
    outcome = run(*racks(4), *gang("g", 6, preferred=RACK))
    assert racks_of(outcome, "g") == {"r1", "r2"}
    outcome = run(*racks(4), *gang("g", 12, preferred=RACK))
    assert len(outcome.bound(group="g")) == 12, "no zone holds 12: it spreads"


def test_two_gangs_do_not_fragment_each_others_racks() -> None:
    """Rack r1 has 4 cpu free (a 4-cpu pod runs there), r2 all 8. The small gang
    takes the tightest rack that holds it (r1), so the big one still finds a whole
    rack (task by task, the small gang would take the roomiest nodes, in r2)."""
    busy = pod("busy", cpu="4")
    busy["spec"]["nodeName"] = "r1-n1"
    docs = [*racks(2), busy, *gang("small", 2, preferred=RACK)]
    docs += gang("big", 4, required=RACK)
    outcome = run(*docs)
    assert racks_of(outcome, "small") == {"r1"}
    assert racks_of(outcome, "big") == {"r2"}
    assert len(outcome.bound(group="big")) == 4


def test_a_gang_not_asking_ignores_the_levels() -> None:
    outcome = run(*racks(2), *gang("g", 8))
    assert len(outcome.bound(group="g")) == 8


@pytest.mark.parametrize(
    ("annotations", "field"),
    [
        ({"kbatch.io/topology-required": "not a key!"}, "kbatch.io/topology-required"),
        (
            {"kbatch.io/topology-required": RACK, "kbatch.io/topology-preferred": RACK},
            "kbatch.io/topology-preferred",
        ),
    ],
)
def test_a_bad_topology_annotation_is_refused_naming_it(annotations: dict, field: str) -> None:
    group = pod_group("g")
    group["metadata"]["annotations"] = annotations
    result = simulate(documents=[*racks(1), group])
    (warning,) = result["warnings"]
    assert f"metadata.annotations.{field}" in warning["message"], warning


def test_a_level_listed_twice_is_refused() -> None:
    conf = CONF.replace("kubernetes.io/hostname]", "kbatch.io/rack]")
    with pytest.raises(ConfigError, match=r"a level is listed twice: kbatch\.io/rack"):
        simulate(documents=[conf_map(conf), *racks(1)])


def test_the_output_names_each_group_s_domains() -> None:
    """The JSON's podGroups rows say where a group asking for a level runs; the table
    gets a TOPOLOGY column; a group that waits (no rack holds 6 pods) has none yet."""
    result = simulate(
        documents=[
            conf_map(CONF),
            *racks(3),
            *gang("packed", 4, preferred=RACK),
            *gang("big", 6, required=RACK),
            *gang("plain", 2),
        ],
        until="1m",
    )
    rows = {g["name"]: g for g in result["podGroups"]}
    (rack,) = rows["packed"]["topology"]["domains"]
    assert rows["packed"]["topology"] == {"mode": "preferred", "level": RACK, "domains": [rack]}
    assert rows["big"]["topology"] == {"mode": "required", "level": RACK, "domains": []}
    assert "topology" not in rows["plain"]
    table = output.to_table(result)
    assert "TOPOLOGY" in table
    assert f"preferred {RACK}: {rack}" in table
    assert f"required {RACK}: none yet" in table


def test_a_gang_for_a_level_no_node_is_labelled_with_says_so() -> None:
    """Counting its pods per domain finds no domain at all: the words say why."""
    outcome = run(node("n1", cpu="8"), *gang("g", 2, required=RACK))
    assert outcome.group("g")["phase"] == "Pending"
    message = outcome.condition("g", "Unschedulable")["message"]
    assert message.endswith("not admitted: no node has the label kbatch.io/rack"), message


def test_room_reserve_kept_for_a_gang_counts_as_its_own_when_a_domain_is_chosen() -> None:
    """Rack r1's two 8-cpu nodes are busy a while (9 cpu of 16), so reserve keeps room for a
    gang of two 5-cpu pods that requires one rack. Choosing the rack, allocate held
    that kept room against the gang as against everyone else: the rack seemed full, the
    gang waited, reserve kept the room again, for ever, on an idle rack (found by
    random gangs on racks)."""
    reserving = CONF.replace("backfill", "backfill, reserve")
    busy = [pod(f"busy-{i}", duration="5s") for i in range(5)] + [pod("wide", "4", duration="7s")]
    later = [at(obj, "1s") for obj in gang("g", 2, cpu="5", required=RACK)]
    docs = [
        conf_map(reserving),
        rack_node("r1-n1", "r1", cpu="8"),
        rack_node("r1-n2", "r1", cpu="8"),
    ]
    outcome = Outcome(simulate(documents=[*docs, *busy, *later], until="1m"))
    assert len(outcome.bound(group="g")) == 2
