"""Roles with their own minimum (DESIGN §12, Volcano's minTaskMember): a gang is ready
when minMember is met and every role's minimum too; the condition names the role that
is short; an eviction never leaves a role below its minimum; the webhook refuses roles
that ask for more than minMember and fills minResources from the roles' templates."""

from typing import Any

import pytest

from kbatch.config import DEFAULT_CONF
from kbatch.sim import output, simulate
from scenarios.objects import Obj, at, conf_map, job, node, pod, pod_group, queue
from scenarios.runner import Outcome

ROLE = "kbatch.io/task"


def with_roles(group: Obj, roles: dict[str, Any]) -> Obj:
    group["spec"]["minTaskMember"] = roles
    return group


def role_pod(name: str, role: str, cpu: str = "1", annotation: str = ROLE, **kw: Any) -> Obj:
    obj = pod(name, cpu=cpu, group="train", **kw)
    obj["metadata"]["annotations"][annotation] = role
    return obj


def launcher_and_workers(roles: dict[str, int] | None, cpu: str = "4") -> Outcome:
    """A 3-cpu launcher (named to come last) and three 1-cpu workers; minMember 3."""
    group = pod_group("train", min_member=3)
    if roles is not None:
        with_roles(group, roles)
    docs = [node("n1", cpu=cpu), group, role_pod("z-launcher", "launcher", cpu="3")]
    docs += [role_pod(f"worker-{i}", "worker") for i in range(3)]
    return Outcome(simulate(documents=docs, until="1m"))


def test_without_roles_any_three_pods_make_the_gang() -> None:
    outcome = launcher_and_workers(None)
    assert outcome.group("train")["phase"] == "Running"
    assert outcome.pod("z-launcher")["node"] is None


def test_the_short_role_goes_first_so_the_gang_fits() -> None:
    """On 5 cpu the launcher (3) and two workers (2) fit, if the launcher is placed
    before a third worker takes its room."""
    outcome = launcher_and_workers({"launcher": 1, "worker": 2}, cpu="5")
    assert outcome.group("train")["phase"] == "Running"
    assert outcome.pod("z-launcher")["node"] == "n1"
    assert len(outcome.bound(group="train")) == 3


def test_a_role_short_of_its_minimum_keeps_the_gang_waiting_and_is_named() -> None:
    """Two 4-cpu nodes, 1.5 cpu of each taken: three workers would make minMember; the
    3-cpu launcher fits no node now, and the gang waits for it, saying so. A 5-cpu
    launcher would fit no node even empty: the gang is not admitted, saying that."""
    group = with_roles(pod_group("train", min_member=3), {"launcher": 1, "worker": 2})
    busy = [pod(f"busy-{n}", cpu="1500m") for n in ("n1", "n2")]
    for taken, name in zip(busy, ("n1", "n2"), strict=True):
        taken["spec"]["nodeName"] = name
    workers = [role_pod(f"worker-{i}", "worker") for i in range(3)]
    docs = [node("n1"), node("n2"), *busy, group, role_pod("launcher", "launcher", cpu="3")]
    # (without reserve, which would drain the two nodes for it and say that instead)
    unreserved = conf_map(DEFAULT_CONF.replace(", reserve", ""))
    outcome = Outcome(simulate(documents=[unreserved, *docs, *workers], until="1m"))
    assert outcome.bound(group="train") == []
    message = outcome.condition("train", "Unschedulable")["message"]
    assert message == (
        "4/4 tasks in gang unschedulable: role launcher: 0/1 placed: "
        "0/2 nodes are available: 2 Insufficient cpu"
    ), message
    docs = [node("n1"), node("n2"), group, role_pod("launcher", "launcher", cpu="5")]
    outcome = Outcome(simulate(documents=[*docs, *workers], until="1m"))
    assert outcome.group("train")["phase"] == "Pending"
    message = outcome.condition("train", "Unschedulable")["message"]
    assert message == (
        "4/4 tasks in gang unschedulable: not admitted: role launcher: 1 of its 1 pods "
        "(cpu 5) fits on no node, even empty: 0 left of the 1 it needs at once"
    ), message


def test_the_condition_says_how_far_the_short_role_got() -> None:
    """Workers of 3 cpu on two 4-cpu nodes and a 1-cpu one (9 cpu: admitted): two could
    be placed, the third of the three the role needs never: the group waits, Pending,
    and says so."""
    group = with_roles(pod_group("train", min_member=3), {"worker": 3})
    docs = [node("n1"), node("n2"), node("n3", cpu="1"), group]
    docs += [role_pod(f"worker-{i}", "worker", cpu="3") for i in range(3)]
    outcome = Outcome(simulate(documents=docs, until="1m"))
    message = outcome.condition("train", "Unschedulable")["message"]
    assert message == (
        "3/3 tasks in gang unschedulable: not admitted: 3 pods of cpu 3 never fit on the "
        "nodes, even empty: they hold 2 of them"
    )


CONF = """
actions: "enqueue, reclaim, allocate, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def test_reclaim_takes_surplus_but_never_a_role_below_its_minimum() -> None:
    """Queue a runs 2 ps + 6 workers (minMember 4: ps 2, worker 2) on 8 cpu; queue b
    asks for 4 cpu at 30 s. Reclaim may take 4 surplus workers, never a ps."""
    group = with_roles(pod_group("train", min_member=4, queue="a"), {"ps": 2, "worker": 2})
    docs: list[Any] = [conf_map(CONF), node("n1", cpu="8"), queue("a"), queue("b"), group]
    docs += [role_pod(f"ps-{i}", "ps") for i in range(2)]
    docs += [role_pod(f"worker-{i}", "worker") for i in range(6)]
    docs.append(at(pod_group("b", queue="b"), "30s"))
    docs.append(at(pod("b", cpu="4", group="b"), "30s"))
    outcome = Outcome(simulate(documents=docs, until="2m"))
    assert outcome.pod("b")["phase"] == "Running"
    assert outcome.evictions(group="train") == 4
    assert all(outcome.pod(f"ps-{i}")["evictions"] == 0 for i in range(2))
    assert len(outcome.running(group="train")) == 4


def test_roles_asking_more_than_min_member_are_refused_naming_the_field() -> None:
    group = with_roles(pod_group("train", min_member=2), {"ps": 2, "worker": 1})
    result = simulate(documents=[node("n1"), group])
    (warning,) = result["warnings"]
    assert "spec.minTaskMember" in warning["message"]
    assert "add up to 3, more than minMember 2" in warning["message"]


@pytest.mark.parametrize("bad", [{"ps": -1}, {"ps": "two"}, ["ps"]])
def test_a_bad_role_minimum_is_refused_naming_the_field(bad: Any) -> None:
    group = with_roles(pod_group("train", min_member=2), bad)
    result = simulate(documents=[node("n1"), group])
    (warning,) = result["warnings"]
    assert "spec.minTaskMember" in warning["message"], warning


def test_min_resources_are_filled_from_the_roles_templates() -> None:
    """A 4-cpu launcher Job and a Job of two 1-cpu workers, minMember 3 with launcher 1:
    the webhook fills 4 + 2 × 1 = 6 cpu (not 3 × the smallest, 3), more than the 5-cpu
    cluster, so the gang is not admitted, saying why."""
    group = with_roles(pod_group("train", min_member=3), {"launcher": 1})
    launcher = job("launcher", cpu="4", group="train")
    launcher["spec"]["template"]["metadata"]["annotations"][ROLE] = "launcher"
    workers = job("workers", parallelism=2, cpu="1", group="train")
    workers["spec"]["template"]["metadata"]["annotations"][ROLE] = "worker"
    outcome = Outcome(simulate(documents=[node("n1", cpu="5"), launcher, workers, group]))
    assert outcome.group("train")["phase"] == "Pending"
    message = outcome.condition("train", "Unschedulable")["message"]
    assert "cpu 6 > 5 free" in message, message


def test_the_table_shows_each_roles_running_pods_against_its_minimum() -> None:
    result = simulate(
        documents=[
            node("n1", cpu="8"),
            with_roles(pod_group("train", min_member=3), {"launcher": 1, "worker": 2}),
            role_pod("launcher", "launcher"),
            *(role_pod(f"worker-{i}", "worker") for i in range(3)),
        ],
        until="1m",
    )
    assert result["podGroups"][0]["minTaskMember"] == {"launcher": 1, "worker": 2}
    assert {p["name"]: p["role"] for p in result["pods"]}["worker-0"] == "worker"
    table = output.to_table(result)
    assert "ROLES (RUNNING/MIN)" in table
    assert "launcher 1/1, worker 3/2" in table
