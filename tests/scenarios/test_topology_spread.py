"""Pod topology spread (``spec.topologySpreadConstraints``, kube-scheduler's
PodTopologySpread) through the simulator: a gang's pods spread among themselves as
they are placed, a gang that cannot spread waits whole and says why, and the soft
kind only prefers."""

from typing import Any

import pytest

from kbatch.sim import simulate
from scenarios.objects import Obj, node, pod, pod_group
from scenarios.runner import Outcome

ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
SKEWED = "node(s) didn't match pod topology spread constraints"


def in_zone(name: str, zone: str | None, cpu: str = "8") -> Obj:
    made = node(name, cpu=cpu)
    made["metadata"]["labels"] = {HOSTNAME: name, **({ZONE: zone} if zone else {})}
    return made


def spread(key: str = ZONE, skew: int = 1, hard: bool = True, **more: Any) -> Obj:
    return {
        "maxSkew": skew,
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "train"}},
        **more,
    }


def spread_pod(name: str, *constraints: Obj, cpu: str = "1", **kw: Any) -> Obj:
    made = pod(name, cpu=cpu, topologySpreadConstraints=list(constraints), **kw)
    made["metadata"]["labels"] = {"app": "train"}
    return made


def gang(name: str, size: int, *constraints: Obj, cpu: str = "1") -> list[Obj]:
    pods = [spread_pod(f"{name}-{i}", *constraints, cpu=cpu, group=name) for i in range(size)]
    return [pod_group(name, size), *pods]


def placed(outcome: Outcome) -> dict[str, str | None]:
    return {p["name"]: p["node"] for p in outcome.pods()}


def zones_of(nodes: dict[str, str | None], zone_of: dict[str, str]) -> list[str]:
    return sorted(zone_of[n] for n in nodes.values() if n)


def why(outcome: Outcome, name: str) -> str:
    messages = [e["message"] for e in outcome.events("FailedScheduling") if e["name"] == name]
    assert messages, f"no FailedScheduling event for {name}"
    return str(messages[-1])


def test_a_gang_spreads_over_zones_though_one_zone_has_room_for_all() -> None:
    docs = [in_zone("a1", "a", cpu="64"), in_zone("b1", "b", cpu="4"), *gang("g", 4, spread())]
    outcome = Outcome(simulate(documents=docs, until="1m"))
    nodes = placed(outcome)
    assert zones_of(nodes, {"a1": "a", "b1": "b"}) == ["a", "a", "b", "b"]


def test_without_the_constraint_the_same_gang_packs_one_zone() -> None:
    """The control: what the test above changes is the constraint's doing."""
    docs = [in_zone("a1", "a", cpu="64"), in_zone("b1", "b", cpu="4"), pod_group("g", 4)]
    docs += [pod(f"g-{i}", group="g") for i in range(4)]
    outcome = Outcome(simulate(documents=docs, until="1m"))
    assert set(placed(outcome).values()) == {"a1"}


def test_a_gang_that_cannot_spread_now_waits_whole_and_says_why() -> None:
    # Another scheduler's pod leaves b room for one pod of 4 cpu: a gang of four would be
    # 3 + 1, a skew of 2 (on the empty nodes it would spread 2 + 2: it is admitted).
    docs = [in_zone("a1", "a", cpu="16"), in_zone("b1", "b", cpu="8")]
    docs.append(pod("theirs", cpu="4", scheduler="default-scheduler", nodeName="b1"))
    docs += gang("g", 4, spread(), cpu="4")
    outcome = Outcome(simulate(documents=docs, until="1m"))
    assert {placed(outcome)[f"g-{i}"] for i in range(4)} == {None}
    assert outcome.group("g")["phase"] == "Inqueue"
    assert SKEWED in why(outcome, "g-0")


def test_a_wider_skew_lets_the_same_gang_start() -> None:
    docs = [in_zone("a1", "a", cpu="16"), in_zone("b1", "b", cpu="4")]
    docs += gang("g", 4, spread(skew=2), cpu="4")
    outcome = Outcome(simulate(documents=docs, until="1m"))
    assert zones_of(placed(outcome), {"a1": "a", "b1": "b"}) == ["a", "a", "a", "b"]


def test_a_node_without_the_key_is_never_chosen() -> None:
    docs = [in_zone("bare", None, cpu="64"), in_zone("a1", "a", cpu="2")]
    docs += [spread_pod(f"p-{i}", spread()) for i in range(3)]
    outcome = Outcome(simulate(documents=docs, until="1m"))
    nodes = placed(outcome)
    assert sorted(str(n) for n in nodes.values()) == ["None", "a1", "a1"]
    (waiting,) = [name for name, n in nodes.items() if n is None]
    assert f"{SKEWED} (missing required label)" in why(outcome, waiting)


def test_running_pods_count_and_terminating_ones_do_not() -> None:
    running = [spread_pod(f"old-{i}", nodeName="a1") for i in range(2)]
    docs = [in_zone("a1", "a", cpu="16"), in_zone("b1", "b"), *running]
    docs += [spread_pod("new", spread(), cpu="1")]
    outcome = Outcome(simulate(documents=docs, until="1m"))
    assert placed(outcome)["new"] == "b1"  # (a holds two already: a skew of 3 there)


def test_min_domains_counts_missing_zones_as_empty() -> None:
    docs = [in_zone("a1", "a", cpu="16"), in_zone("b1", "b", cpu="16")]
    docs += gang("g", 3, spread(minDomains=3))
    outcome = Outcome(simulate(documents=docs, until="1m"))
    assert set(placed(outcome).values()) == {None}  # (one a zone while there are < 3)
    docs = [in_zone("a1", "a", cpu="16"), in_zone("b1", "b", cpu="16")]
    docs += gang("g", 2, spread(minDomains=3))
    outcome = Outcome(simulate(documents=docs, until="1m"))
    assert sorted(str(n) for n in placed(outcome).values()) == ["a1", "b1"]


def test_match_label_keys_spread_each_job_on_its_own() -> None:
    docs: list[Obj] = [in_zone("a1", "a", cpu="16"), in_zone("b1", "b", cpu="16")]
    for job in ("one", "two"):
        for i in range(2):
            made = spread_pod(f"{job}-{i}", spread(matchLabelKeys=["job"]), group=job)
            made["metadata"]["labels"]["job"] = job
            docs.append(made)
        docs.append(pod_group(job, 2))
    outcome = Outcome(simulate(documents=docs, until="1m"))
    nodes = placed(outcome)
    for job in ("one", "two"):
        assert {nodes[f"{job}-0"], nodes[f"{job}-1"]} == {"a1", "b1"}


def test_node_affinity_policy_ignore_counts_domains_the_pod_cannot_use() -> None:
    # The pod may only go to zone a; with Ignore, zone b (empty) is a domain too, so a
    # second pod in a would be a skew of 2.
    only_a = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": ZONE, "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    docs = [in_zone("a1", "a", cpu="16"), in_zone("b1", "b", cpu="16")]
    for policy, expect in (("Honor", ["a1", "a1"]), ("Ignore", ["None", "a1"])):
        constraint = spread(nodeAffinityPolicy=policy)
        pods = [spread_pod(f"p-{i}", constraint, affinity=only_a) for i in range(2)]
        outcome = Outcome(simulate(documents=[*docs, *pods], until="1m"))
        assert sorted(str(n) for n in placed(outcome).values()) == expect, policy


def test_schedule_anyway_prefers_the_emptier_zone_but_does_not_wait() -> None:
    docs = [in_zone("a1", "a", cpu="16"), in_zone("b1", "b", cpu="2")]
    docs += [spread_pod(f"p-{i}", spread(hard=False)) for i in range(4)]
    outcome = Outcome(simulate(documents=docs, until="1m"))
    assert zones_of(placed(outcome), {"a1": "a", "b1": "b"}) == ["a", "a", "b", "b"]


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("maxSkew", 0, "topologySpreadConstraints[0].maxSkew: must be greater than zero"),
        ("whenUnsatisfiable", "Later", "topologySpreadConstraints[0].whenUnsatisfiable"),
        ("topologyKey", "", "topologySpreadConstraints[0].topologyKey: required"),
        ("nodeTaintsPolicy", "Maybe", "topologySpreadConstraints[0].nodeTaintsPolicy"),
    ],
)
def test_a_bad_constraint_is_refused_naming_the_field(field: str, value: Any, message: str) -> None:
    bad = spread_pod("bad", {**spread(), field: value})
    docs = [in_zone("a1", "a"), bad, spread_pod("good", spread())]
    result = simulate(documents=docs, until="10s", warn=lambda _: None)
    (warning,) = [w for w in result["warnings"] if w.get("name") == "bad"]
    assert message in warning["message"]
    assert placed(Outcome(result))["good"] == "a1"


def test_a_gang_that_could_never_spread_is_not_admitted_and_others_run() -> None:
    """Even on empty nodes, four pods of 4 cpu spread over a (16 cpu) and b (4 cpu) with
    a skew of 1 hold 3 at most: the gang is told so and holds no room, so the gang
    after it, without the constraint, is admitted and runs."""
    docs = [in_zone("a1", "a", cpu="16"), in_zone("b1", "b", cpu="4")]
    docs += gang("g", 4, spread(), cpu="4")
    docs += [pod_group("h", 4), *(pod(f"h-{i}", cpu="4", group="h") for i in range(4))]
    outcome = Outcome(simulate(documents=docs, until="1m"))
    nodes = placed(outcome)
    assert {nodes[f"g-{i}"] for i in range(4)} == {None}
    assert None not in {nodes[f"h-{i}"] for i in range(4)}
    told = outcome.group("g")
    assert told["phase"] == "Pending"
    assert "spread over topology.kubernetes.io/zone with a skew of 1 at most" in str(told)
